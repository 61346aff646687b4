"""HTTP reads specific to mailboxes: the durable, paged transcript (spec "What the
transcript proves, and what it doesn't") and the organization's boards, which its
mailboxes hold (spec "Holding a board")."""

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
from workforce.principals import resolve_principal
from workforce.refusals import Refusal

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
