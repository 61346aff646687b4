"""HTTP reads specific to mailboxes: the durable, paged transcript (spec "What the
transcript proves, and what it doesn't"), the organization's boards, which its
mailboxes hold (spec "Holding a board"), the inventory (spec "What a mailbox is"), and
projects (spec "A room per project")."""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from boards.models import TaskStatus
from workforce.api.pagination import PAGE_PARAMETERS, page_response, page_schema
from workforce.api.views import int_param, read_page
from workforce.flows import format_serializer_errors
from workforce.principals import resolve_principal
from workforce.refusals import Refusal

from .inventory import access_inventory_seat, list_inventory_mailboxes, list_seat_mailboxes
from .models import TalkListing
from .projects import access_project, do_add_project_member, do_create_project, list_projects, project_wire
from .queries import BoardSummary, access_mailbox_session, list_boards, list_transcript


class TranscriptView(APIView):
    """The whole durable transcript of a mailbox, paged, beyond the history window."""

    @extend_schema(
        parameters=[
            OpenApiParameter("after", int, description="Only lines with seq above this (default 0)"),
            OpenApiParameter("limit", int, description="At most this many lines (1-1000, default 100)"),
        ],
        responses={
            200: inline_serializer(
                "TranscriptPage",
                {
                    "mailboxId": serializers.CharField(),
                    "lines": serializers.ListField(child=serializers.DictField()),
                    "next": serializers.IntegerField(allow_null=True),
                },
            )
        },
        summary="Read a mailbox's durable transcript",
    )
    def get(self, request: HttpRequest, mailbox_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_mailbox_session(principal.org, mailbox_id, reader=principal.reader)
        after = int_param(request, "after", 0)
        lines, next_seq = read_page(
            request, lambda n: list_transcript(session, after=after, limit=n), next_of=lambda line: line.seq
        )
        return Response(
            {
                "mailboxId": session.session_id,
                "lines": [{"seq": line.seq, **line.as_wire()} for line in lines],
                "next": next_seq,
            }
        )


class BoardSerializer(serializers.Serializer):
    """One board: ``{id, mailbox, name, declared, counts, tasks}``."""

    id = serializers.CharField(source="board_id", help_text="The ledger id, <mailbox id>.<board>.")
    mailbox = serializers.CharField(source="mailbox_id", help_text="The mailbox that holds the board.")
    name = serializers.CharField(help_text="The board's name in its mailbox's boards: list.")
    declared = serializers.BooleanField(
        help_text="The mailbox, opened in this organization, declares the board now; false for a ledger kept from before."
    )
    counts = serializers.DictField(child=serializers.IntegerField(), help_text="Rows per status, every status named.")
    tasks = serializers.SerializerMethodField(help_text="Where its rows are read (GET, paged).")

    def get_tasks(self, board: BoardSummary) -> str:
        path = reverse("board-tasks", args=[board.board_id])
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request is not None else path


class BoardListView(APIView):
    """The organization's boards, by ledger id, paged."""

    @extend_schema(
        parameters=[
            *PAGE_PARAMETERS,
            OpenApiParameter("mailbox", str, description="Only the boards this mailbox holds"),
            OpenApiParameter(
                "status", str, description="Only boards with at least one row in this status", enum=list(TaskStatus.values)
            ),
        ],
        responses={200: page_schema("BoardPage", BoardSerializer)},
        summary="List the organization's boards",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        status = request.query_params.get("status") or None
        if status is not None and status not in TaskStatus.values:
            raise Refusal("invalid-input", f"status must be one of {', '.join(TaskStatus.values)}, not {status[:40]!r}.")
        mailbox = request.query_params.get("mailbox") or None
        boards = list_boards(principal.org, reader=principal.reader, mailbox=mailbox, status=status)
        return page_response(request, self, boards, BoardSerializer)


class MailboxListView(APIView):
    """The organization's mailboxes, from the inventory (spec "What a mailbox is"), by id, paged."""

    @extend_schema(
        parameters=[
            OpenApiParameter("after", str, description="Only mailboxes whose id sorts after this one"),
            OpenApiParameter("limit", int, description="At most this many (1-1000, default 100)"),
        ],
        responses={
            200: inline_serializer(
                "MailboxInventoryPage",
                {
                    "mailboxes": serializers.ListField(child=serializers.DictField()),
                    "next": serializers.CharField(allow_null=True),
                },
            )
        },
        summary="List the organization's mailboxes (the inventory)",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        after = request.query_params.get("after") or ""
        rows, next_id = read_page(
            request,
            lambda n: list_inventory_mailboxes(principal.org, after=after, limit=n),
            next_of=lambda row: row.mailbox_id,
        )
        return Response({"mailboxes": [row.as_wire() for row in rows], "next": next_id})


class SeatMailboxesView(APIView):
    """The mailboxes one seat is a member of, from the inventory."""

    @extend_schema(
        responses={
            200: inline_serializer(
                "SeatMailboxes",
                {"seat": serializers.DictField(), "mailboxes": serializers.ListField(child=serializers.DictField())},
            )
        },
        summary="List the mailboxes a seat is in (the inventory)",
    )
    def get(self, request: HttpRequest, seat_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        # An anonymous read reaches no one's own workers (as GET /api/workers): not even
        # those of a user who named themselves "anonymous".
        seat = access_inventory_seat(principal.org, seat_id, reader=principal.reader or "")
        rows = list_seat_mailboxes(principal.org, seat_id)
        return Response({"seat": seat, "mailboxes": [row.as_wire() for row in rows]})


# ----------------------------------------------------------------------------- projects


class ProjectBody(serializers.Serializer):
    """``POST /api/projects``: ``{userId?, title, brief?, id?, members?}``."""

    userId = serializers.CharField(required=False)
    title = serializers.CharField(max_length=200)
    brief = serializers.CharField(required=False, allow_blank=True)
    id = serializers.CharField(required=False, max_length=64)
    members = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=500)


class MemberBody(serializers.Serializer):
    """``POST /api/projects/{id}/members``: ``{userId?, member}``."""

    userId = serializers.CharField(required=False)
    member = serializers.CharField(max_length=200)


def _body(request: HttpRequest, serializer_class: type[serializers.Serializer]) -> dict:
    """The JSON body checked against ``serializer_class`` (unknown keys refused).

    Raises:
        Refusal("invalid-input").
    """
    body = request.data
    if not isinstance(body, dict):
        raise Refusal("invalid-input", "The body must be a JSON object.")
    declared = set(serializer_class().fields)
    unknown = sorted(set(body) - declared)
    if unknown:
        raise Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send {', '.join(sorted(declared))}.")
    serializer = serializer_class(data=body)
    if not serializer.is_valid():
        raise Refusal("invalid-input", format_serializer_errors(serializer.errors))
    return dict(serializer.validated_data)


class ProjectListView(APIView):
    """Create a project, or list the projects you are a member of (spec "A room per project")."""

    @extend_schema(
        request=ProjectBody,
        responses={201: inline_serializer("Project", {"id": serializers.CharField()})},
        summary="Create a project (and ready your talk session)",
    )
    def post(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.data.get("userId") if isinstance(request.data, dict) else None)
        body = _body(request, ProjectBody)
        members = body.get("members") or []
        project, talk = do_create_project(
            principal.org,
            owner=principal.user_id,
            title=body["title"],
            brief=body.get("brief", ""),
            project_id=body.get("id"),
            members=members,
            ready_talk=True,
        )
        return Response(project_wire(project, talk_session_id=talk.session_id if talk else None), status=201)

    @extend_schema(
        parameters=[
            OpenApiParameter("after", str, description="Only projects whose id sorts after this one"),
            OpenApiParameter("limit", int, description="At most this many (1-1000, default 100)"),
        ],
        responses={200: inline_serializer("ProjectPage", {"projects": serializers.ListField(child=serializers.DictField())})},
        operation_id="projects_list",
        summary="List the projects you are a member of",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        after = request.query_params.get("after") or ""
        rows, next_id = read_page(
            request,
            lambda n: list_projects(principal.org, reader=principal.reader, after=after, limit=n),
            next_of=lambda row: row.project_id,
        )
        return Response(
            {"projects": [project_wire(p, talk_session_id=_listed(p, principal.user_id)) for p in rows], "next": next_id}
        )


def _listed(project, user_id: str) -> str | None:
    listing = TalkListing.objects.filter(project=project, user_id=user_id).values_list("session__session_id", flat=True).first()
    return listing


class ProjectDetailView(APIView):
    """One project, for one of its members (anyone else: 404 ``no-such-project``)."""

    @extend_schema(responses={200: inline_serializer("ProjectDetail", {"id": serializers.CharField()})}, summary="Show a project")
    def get(self, request: HttpRequest, project_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        project = access_project(principal.org, project_id, reader=principal.reader or "")
        return Response(project_wire(project, talk_session_id=_listed(project, principal.user_id)))


class ProjectMembersView(APIView):
    """Add a member to a project (its owner only)."""

    @extend_schema(
        request=MemberBody,
        responses={201: inline_serializer("ProjectMembers", {"members": serializers.ListField(child=serializers.CharField())})},
        summary="Add a member to a project",
    )
    def post(self, request: HttpRequest, project_id: str) -> Response:
        principal = resolve_principal(request, request.data.get("userId") if isinstance(request.data, dict) else None)
        body = _body(request, MemberBody)
        do_add_project_member(principal.org, project_id, user_id=body["member"], by=principal.user_id)
        project = access_project(principal.org, project_id)
        return Response(project_wire(project), status=201)
