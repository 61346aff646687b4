"""A person's roster over HTTP (``seats.roster``; spec 004 "Who can be a delegate"):

- ``GET /api/workers?userId=&limit=&offset=``: the caller's roster, one entry per worker
  id as the scope rule picks it: their own first, then the organization's, then the
  standard ones (DRF's limit/offset page: ``{count, next, previous, results}``).
- ``POST /api/workers`` ``{"userId", "id", "workerMd"}``: hire a worker of one's own
  from a ``WORKER.md`` text; 201 with the worker. A refused text answers 400
  ``invalid-worker`` with every problem in ``error.problems``; an id already on the
  caller's own roster 409 ``worker-already-on-roster``.
- ``GET /api/workers/{id}?userId=``: one worker on the caller's roster; another user's,
  or one nobody holds, 404 ``worker-not-on-roster`` (``No worker "<id>" on your roster.``).
- ``POST /api/workers/{id}/fork`` ``{"userId", "id"?}``: fork a worker on the roster into
  one of one's own (under ``id``; default the same id); 201.
- ``GET /api/tool-servers?userId=``: the tree's tool servers and the calls seats made to
  them, counted per seat and per server (``ToolServersView``).
- ``DELETE /api/workers/{id}?userId=``: fire a worker of one's own; 204. A standard or
  the organization's worker answers 409 ``worker-not-your-own``.
"""

from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.api.pagination import ListPagination
from workforce.principals import Principal, resolve_principal
from workforce.refusals import Refusal

from .queries import access_worker, list_roster, tool_call_counts
from .roster import worker_wire
from .services import do_fire_worker, do_fork_worker, do_hire_worker
from .tool_servers import declared_servers


class WorkerSerializer(serializers.Serializer):
    """One roster entry (``seats.roster.worker_wire``)."""

    id = serializers.CharField()
    flow = serializers.CharField()
    scope = serializers.ChoiceField(choices=["own", "org", "shared"])
    standard = serializers.BooleanField()
    description = serializers.CharField(allow_null=True)
    model = serializers.CharField(allow_null=True)
    tools = serializers.ListField(child=serializers.CharField())
    instructions = serializers.CharField()
    settings = serializers.DictField()
    forkedFrom = serializers.CharField(allow_null=True)
    hiredAt = serializers.DateTimeField(allow_null=True)


class HireBody(serializers.Serializer):
    userId = serializers.CharField(required=False)
    id = serializers.CharField(help_text="The worker's id: <name> or <team>.<name>.")
    workerMd = serializers.CharField(help_text="The whole WORKER.md text: frontmatter and body.")


class ForkBody(serializers.Serializer):
    userId = serializers.CharField(required=False)
    id = serializers.CharField(required=False, help_text="The fork's id (default: the id forked).")


ERROR = inline_serializer(
    "RosterError",
    {
        "requestId": serializers.CharField(allow_null=True),
        "status": serializers.CharField(),
        "error": inline_serializer(
            "RosterErrorDetail",
            {
                "reason": serializers.CharField(),
                "message": serializers.CharField(),
                "problems": serializers.ListField(child=serializers.CharField(), required=False),
            },
        ),
    },
)
USER_PARAM = OpenApiParameter("userId", str, description="Who is calling (without authentication)")


def _body(request: HttpRequest, allowed: set[str]) -> dict:
    body = request.data if request.data is not None else {}
    if not isinstance(body, dict):
        raise Refusal("invalid-input", "The body must be a JSON object.")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send {', '.join(sorted(allowed))}.")
    return body


def _reader(principal: Principal) -> str:
    # An anonymous read reaches no one's own workers (an own seat always has an owner).
    return "" if principal.anonymous else principal.user_id


def _created(request: HttpRequest, seat) -> Response:
    response = Response(worker_wire(seat), status=201)
    response["Location"] = request.build_absolute_uri(reverse("worker-detail", args=[seat.seat_id]))
    return response


class WorkersView(APIView):
    """The caller's roster, and hiring a worker of one's own."""

    @extend_schema(
        parameters=[
            USER_PARAM,
            OpenApiParameter("limit", int, description="At most this many workers (1-1000, default 100)"),
            OpenApiParameter("offset", int, description="Skip this many"),
        ],
        responses={
            200: inline_serializer(
                "WorkerPage",
                {
                    "count": serializers.IntegerField(),
                    "next": serializers.URLField(allow_null=True),
                    "previous": serializers.URLField(allow_null=True),
                    "results": WorkerSerializer(many=True),
                },
            )
        },
        operation_id="workers_list",
        summary="List your roster: your own workers, then your organization's, then the standard ones",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        paginator = ListPagination()
        # The ignore: the DRF stubs take a QuerySet only; LimitOffsetPagination slices any sequence.
        page: list | None = paginator.paginate_queryset(list_roster(principal.org, _reader(principal)), request, view=self)  # type: ignore[arg-type]
        return paginator.get_paginated_response([worker_wire(seat) for seat in page or ()])

    @extend_schema(
        request=HireBody,
        responses={201: WorkerSerializer, 400: ERROR, 409: ERROR},
        operation_id="workers_hire",
        summary="Hire a worker of your own from a WORKER.md text",
    )
    def post(self, request: HttpRequest) -> Response:
        body = _body(request, {"userId", "id", "workerMd"})
        principal = resolve_principal(request, body.get("userId"))
        for key in ("id", "workerMd"):
            if not isinstance(body.get(key), str) or not body[key].strip():
                raise Refusal("invalid-input", f"{key} is required: send id and workerMd (the WORKER.md text).")
        seat = do_hire_worker(principal.org, principal.user_id, body["id"], body["workerMd"])
        return _created(request, seat)


class WorkerDetailView(APIView):
    """One worker on the caller's roster, and firing one of one's own."""

    @extend_schema(
        parameters=[USER_PARAM],
        responses={200: WorkerSerializer, 404: ERROR},
        operation_id="worker_read",
        summary="Read a worker on your roster",
    )
    def get(self, request: HttpRequest, worker: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        return Response(worker_wire(access_worker(principal.org, _reader(principal), worker)))

    @extend_schema(
        parameters=[USER_PARAM],
        request=None,
        responses={204: OpenApiResponse(description="Fired"), 404: ERROR, 409: ERROR},
        operation_id="worker_fire",
        summary="Fire a worker of your own",
    )
    def delete(self, request: HttpRequest, worker: str) -> Response:
        body = _body(request, {"userId"})
        principal = resolve_principal(request, body.get("userId") or request.query_params.get("userId"))
        do_fire_worker(principal.org, principal.user_id, worker)
        return Response(status=204)


class WorkerForkView(APIView):
    """Fork a worker on the caller's roster into one of their own."""

    @extend_schema(
        request=ForkBody,
        responses={201: WorkerSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
        operation_id="worker_fork",
        summary="Fork a worker into one of your own",
    )
    def post(self, request: HttpRequest, worker: str) -> Response:
        body = _body(request, {"userId", "id"})
        principal = resolve_principal(request, body.get("userId"))
        new_id = body.get("id")
        if new_id is not None and not isinstance(new_id, str):
            raise Refusal("invalid-input", "id must be the fork's worker id.")
        seat = do_fork_worker(principal.org, principal.user_id, worker, new_id)
        return _created(request, seat)


class ToolServersView(APIView):
    """The tree's tool servers and their calls counted per seat and per server (docs/tools.md).

    ``GET /api/tool-servers?userId=``: ``{"servers": [{name, transport, description}],
    "counts": [{seatId, server, calls, failed, denied}]}``, the counts of the caller's
    organization (``seats.queries.tool_call_counts``)."""

    @extend_schema(
        parameters=[USER_PARAM],
        responses={
            200: inline_serializer(
                "ToolServers",
                {
                    "servers": serializers.ListField(child=serializers.DictField()),
                    "counts": serializers.ListField(child=serializers.DictField()),
                },
            )
        },
        operation_id="tool_servers_list",
        summary="List the tree's tool servers and the calls seats made to them",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        servers = [{"name": s.name, "transport": s.transport, "description": s.description} for s in declared_servers().values()]
        return Response({"servers": servers, "counts": tool_call_counts(principal.org, user_id=principal.reader)})
