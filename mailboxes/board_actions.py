"""A mailbox's boards as actions (spec "Holding a board", "Filing and reading rows",
"Working the rows"): ``fileTask`` and ``readBoard`` on a mailbox holding a board, and,
with ``boardActions: true``, the eight task tools as actions named
``<tool>_<suffix>`` on that mailbox's own session.

The mailbox keeps the ledger and runs nothing; the rows live in the boards app, which
this module reaches through its services (mailboxes may import boards).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from rest_framework import serializers

from boards.drains import board_worker_keys
from boards.errors import UNKNOWN_ASSIGNEE, TaskError
from boards.naming import mailbox_board, tool_suffix
from boards.queries import list_board_tasks, task_wire
from boards.services import do_file_task
from boards.tools import (
    TOOL_DESCRIPTIONS,
    TOOL_NAMES,
    parse_board_tool_name,
    run_board_tool,
    tool_parameters,
    validate_tool_args,
)
from workforce.facets import ON_TASK_FILED
from workforce.flows import Action, ActionFamily, ClientTextField, StrictCharField, StrictIntegerField
from workforce.refusals import Refusal
from workforce.sessions import ActionContext
from workforce.tools import ToolContext

from .queries import access_mailbox_state, held_boards
from .roster import current_roster

BOARD_TASK_ITEM = "board-task"


def _not_declared(mailbox_id: str, board: str, held: list[str], *, what: str = "") -> Refusal:
    if not held:
        return Refusal(
            "board-not-declared",
            f"{mailbox_id} holds no board, so it answers neither fileTask nor readBoard{what}.",
        )
    return Refusal(
        "board-not-declared",
        f'{mailbox_id} does not hold a board "{board}"; it holds {", ".join(sorted(held))}. '
        f"A mailbox reaches its own boards and no others{what}.",
    )


def require_held_board(ctx: ActionContext, board: str) -> tuple[dict, str]:
    """The mailbox's state and the ledger id of ``board``, a board it holds.

    Raises:
        Refusal("mailbox-not-bound" | "mailbox-is-a-template"): not an opened mailbox.
        Refusal("board-not-declared"): it does not hold ``board`` (the message lists the
            boards it does hold), including another mailbox's board.
    """
    state = access_mailbox_state(ctx.session)
    held = held_boards(ctx.session)
    if board not in held:
        raise _not_declared(ctx.session.session_id, board, held)
    return state, mailbox_board(ctx.session.session_id, board).id


class FileTaskInput(serializers.Serializer):
    """``{board, goal, title?, context?, assignee?, priority?, maxAttempts?, labels?,
    input?, author?}``; nothing else."""

    board = StrictCharField()
    goal = ClientTextField()
    title = ClientTextField(required=False, max_length=500)
    # The ignore: DRF's metaclass takes declared fields off the class (Serializer.context
    # stays the property); the stubs cannot know.
    context = ClientTextField(required=False)  # type: ignore[assignment]
    assignee = StrictCharField(required=False, max_length=200)  # BoardTask.assignee
    priority = StrictIntegerField(required=False)
    maxAttempts = StrictIntegerField(required=False, min_value=1)
    labels = serializers.ListField(child=ClientTextField(max_length=200), required=False)
    input = serializers.JSONField(required=False)
    author = StrictCharField(required=False, max_length=200)  # a member id (Seat.seat_id)


def file_task(ctx: ActionContext, data: dict) -> dict:
    """File one row onto a board the mailbox holds; answers ``{board, boardId, taskId,
    status}``. ``author`` is an unverified label checked against the declared members and
    stored beside ``authorVerified: false``. Leaves a ``board-task`` item on the mailbox's
    session so a live board list picks the row up.

    ``assignee`` must be a key of the board's workers map, as the hired drains of the
    board declare it (``boards.drains.board_worker_keys``); a board no drain declares
    has no map, and then any key is kept (as the task tools do).

    Raises:
        Refusal("board-not-declared" | "author-not-a-member" | "mailbox-not-bound").
        Refusal("unknown-assignee"): no drain of the board has that worker key (409);
            the message names the keys it has.
    """
    board = data["board"]
    state, board_id = require_held_board(ctx, board)
    author = data.get("author")
    if author is not None and author not in state["members"]:
        raise Refusal(
            "author-not-a-member",
            f'"{author}" is not a member of {ctx.session.session_id}; its members are {", ".join(state["members"]) or "none"}.',
        )
    try:
        task = do_file_task(
            ctx.org,
            board_id,
            goal=data["goal"],
            title=data.get("title"),
            context=data.get("context"),
            assignee=data.get("assignee"),
            priority=data.get("priority"),
            max_attempts=data.get("maxAttempts"),
            labels=data.get("labels"),
            input=data.get("input"),
            author=author,
            actor=author or ctx.user_id,
            known_workers=board_worker_keys(board_id),
        )
    except TaskError as error:
        if error.code == UNKNOWN_ASSIGNEE:
            raise Refusal("unknown-assignee", error.message) from None
        raise Refusal("invalid-input", error.message) from None  # pragma: no cover - the schema checked it
    ctx.emit(BOARD_TASK_ITEM, {"board": board, "boardId": board_id, "task": task_wire(task)})
    # The mailbox runs nothing; a kind that wants its drains woken on a filing sets the
    # facet ``on_task_filed(ctx, board_id, task)`` (enqueue after commit, e.g. a drain).
    hook = ON_TASK_FILED.get(ctx.flow)
    if hook is not None:
        hook(ctx, board_id, task)
    return {"board": board, "boardId": board_id, "taskId": task.task_id, "status": task.status}


class ReadBoardInput(serializers.Serializer):
    """``{board}``: a board the mailbox holds, by its local name."""

    board = StrictCharField()


def read_board(ctx: ActionContext, data: dict) -> dict:
    """Every row on one board the mailbox holds, oldest filed first, with the
    browser-safe fields: ``{board, boardId, tasks: [...]}``.

    Raises:
        Refusal("board-not-declared" | "mailbox-not-bound").
    """
    board = data["board"]
    _, board_id = require_held_board(ctx, board)
    return {"board": board, "boardId": board_id, "tasks": [task_wire(t) for t in list_board_tasks(ctx.org, board_id)]}


@dataclass(frozen=True)
class BoardToolAction(Action):
    """A task tool offered as a mailbox action: its arguments are checked by the tool's
    own schema (a bad one is ``invalid-input``)."""

    tool: str = ""

    def validate(self, data: Any) -> dict:
        try:
            return validate_tool_args(self.tool, data)
        except TaskError as error:
            raise Refusal("invalid-input", error.message) from None


def run_board_action(ctx: ActionContext, data: dict, *, tool: str, mailbox_id: str, board: str) -> dict:
    """Run task tool ``tool`` on ``mailbox_id``'s board ``board``, from that mailbox's own
    session only. Answers the tool's ``{ok: true, ...}``; a tool refusal fails the
    request with the tool's code as its reason and changes nothing.

    Raises:
        Refusal("board-not-declared"): called on another mailbox's session.
        Refusal("task_not_found" | "unknown_assignee" | "illegal_status_transition" |
            "task_terminal" | "invalid_arguments").
    """
    access_mailbox_state(ctx.session)
    session_id = ctx.session.session_id
    if session_id != mailbox_id:
        raise _not_declared(
            session_id,
            board,
            held_boards(ctx.session),
            what=f" ({ctx.request.action} works only on {mailbox_id}'s own session)",
        )
    board_id = mailbox_board(mailbox_id, board).id
    tool_ctx = ToolContext(
        org=ctx.org, seat_id=ctx.user_id, session=ctx.session, request=ctx.request, extras={"board_action": True}
    )
    try:
        return run_board_tool(tool, board_id, tool_ctx, data)
    except TaskError as error:
        raise Refusal(error.code, error.message) from None


def resolve_board_action(kind: str, name: str, internal: bool) -> Action | None:
    """The board action called ``name`` (``<tool>_<suffix>``) of a mailbox on ``kind``
    that opted in with ``boardActions: true``, or None. The binder refuses two opted-in
    boards whose suffixes collide, so at most one board answers a name."""
    parsed = parse_board_tool_name(name)
    if parsed is None:
        return None
    tool, suffix = parsed
    for mailbox in current_roster().mailboxes:
        if mailbox.kind != kind or not mailbox.board_actions:
            continue
        for board in mailbox.boards:
            board_id = mailbox.board_id(board)
            if tool_suffix(board_id) == suffix:
                return BoardToolAction(
                    name=name,
                    handler=partial(run_board_action, tool=tool, mailbox_id=mailbox.id, board=board),
                    description=TOOL_DESCRIPTIONS[tool].format(board=board_id),
                    tool=tool,
                )
    return None


def board_action_families() -> tuple[ActionFamily, ...]:
    """The eight task tools as the mailbox kind's action families (``<tool>_{boardSuffix}``),
    for the OpenAPI schema: ``resolve_board_action`` makes these names at run time, one
    set per board of a mailbox with ``boardActions: true``."""
    where = (
        "The board's ledger id (<mailbox id>.<board>) with every character that can't go in a tool name "
        "turned into _ (support.desk.escalations -> support_desk_escalations). Only a mailbox whose "
        "MAILBOX.md says boardActions: true answers these, on its own session."
    )
    return tuple(
        ActionFamily(
            template=f"{tool}_{{boardSuffix}}",
            parameter="boardSuffix",
            parameter_description=where,
            description=TOOL_DESCRIPTIONS[tool].format(board="<mailbox id>.<board>"),
            input_schema=tool_parameters(tool),
        )
        for tool in TOOL_NAMES
    )
