"""HTTP read of a board's rows (spec "Showing a board on screen"): the ledger a screen
reads, paged and filtered by status and assignee, with the browser-safe fields only."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.api.views import read_page
from workforce.principals import resolve_principal
from workforce.queries import session_readable
from workforce.refusals import Refusal

from .errors import TaskError
from .models import TaskStatus
from .naming import split_board_id
from .queries import access_task, list_board_tasks, task_wire


class BoardTasksView(APIView):
    """The rows of one board ledger in the caller's organization, oldest filed first."""

    @extend_schema(
        parameters=[
            OpenApiParameter("status", str, description="Only rows with this status", enum=list(TaskStatus.values)),
            OpenApiParameter("assignee", str, description="Only rows assigned to this worker key"),
            OpenApiParameter("after", str, description="A task id: only rows filed after it (the previous page's next)"),
            OpenApiParameter("limit", int, description="At most this many rows (1-1000, default 100)"),
        ],
        responses={
            200: inline_serializer(
                "BoardTaskPage",
                {
                    "boardId": serializers.CharField(),
                    "tasks": serializers.ListField(child=serializers.DictField()),
                    "next": serializers.CharField(allow_null=True),
                },
            )
        },
        summary="Read a board's rows",
    )
    def get(self, request: HttpRequest, board_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        status = request.query_params.get("status") or None
        if status is not None and status not in TaskStatus.values:
            raise Refusal("invalid-input", f"status must be one of {', '.join(TaskStatus.values)}, not {status!r}.")
        try:
            mailbox_id = split_board_id(board_id)[0]
        except ValueError:
            mailbox_id = None
        if mailbox_id is not None and not session_readable(principal.org, mailbox_id, reader=principal.reader):
            # A ledger is its mailbox's, read by the kernel's rule; one under a session the
            # caller may not read answers as a board nobody filed on.
            return Response({"boardId": board_id, "tasks": [], "next": None})
        assignee = request.query_params.get("assignee") or None
        after = request.query_params.get("after") or None
        if after is not None:
            try:
                access_task(principal.org, board_id, after)
            except TaskError:
                raise Refusal(
                    "invalid-input", f"after must be a task id on {board_id} (a page's next), not {after[:80]!r}."
                ) from None
        rows, next_id = read_page(
            request,
            lambda n: list_board_tasks(principal.org, board_id, status=status, assignee=assignee, after=after, limit=n),
            next_of=lambda task: task.task_id,
        )
        return Response({"boardId": board_id, "tasks": [task_wire(t) for t in rows], "next": next_id})
