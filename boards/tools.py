"""The eight task tools per board (spec "Working the rows"): addTask, assignTask,
updateTask, listTasks, completeTask, failTask, blockTask and cancelTask, each named
``<tool>_<suffix>`` where the suffix is the board's ledger id made tool-safe
(``addTask_engineering_incidents_followups``).

A tool answers ``{"ok": true, ...}`` or ``{"refused": "<code>: <message>"}``
and never raises. The set is fixed per board: a worker's ``tools:`` line neither grants
nor withholds them (the seat's capability composes ``board_task_tools`` per board). A
mailbox with ``boardActions: true`` offers the same eight as actions on its own session,
through ``call_board_tool`` and ``validate_tool_args``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from workforce.refusals import failure_text
from workforce.tools import Tool, ToolContext, ToolResult, refuse

from . import services
from .drains import board_worker_keys
from .errors import INTERNAL_ERROR, INVALID_ARGUMENTS, TaskError
from .models import TaskStatus
from .naming import tool_suffix
from .queries import list_board_tasks, task_wire

logger = logging.getLogger(__name__)

TOOL_NAMES = ("addTask", "assignTask", "updateTask", "listTasks", "completeTask", "failTask", "blockTask", "cancelTask")
LIST_LIMIT_DEFAULT = 50
LIST_LIMIT_MAX = 200


@dataclass(frozen=True)
class Arg:
    """One tool argument: ``kind`` is string (non-blank text), integer, boolean,
    strings (a list of text), nullable-string, status (a task status) or any (JSON).
    ``max_length`` caps text that lands in a bounded column (characters)."""

    name: str
    kind: str
    required: bool = False
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None

    def schema(self) -> dict:
        if self.kind == "string":
            out: dict = {"type": "string", "minLength": 1}
        elif self.kind == "nullable-string":
            out = {"type": ["string", "null"]}
        elif self.kind == "integer":
            out = {"type": "integer"}
            if self.minimum is not None:
                out["minimum"] = self.minimum
            if self.maximum is not None:
                out["maximum"] = self.maximum
        elif self.kind == "boolean":
            out = {"type": "boolean"}
        elif self.kind == "strings":
            out = {"type": "array", "items": {"type": "string"}}
        elif self.kind == "status":
            out = {"type": "string", "enum": list(TaskStatus.values)}
        else:
            out = {}
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        if self.description:
            out["description"] = self.description
        return out

    def check(self, value: Any) -> str | None:
        """Why ``value`` doesn't fit, or None."""
        if self.max_length is not None and isinstance(value, str) and len(value) > self.max_length:
            return f"{self.name} must be at most {self.max_length} characters"
        if self.kind == "string":
            if not isinstance(value, str) or not value.strip():
                return f"{self.name} must be non-empty text"
        elif self.kind == "nullable-string":
            if value is not None and (not isinstance(value, str) or not value.strip()):
                return f"{self.name} must be non-empty text or null"
        elif self.kind == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                return f"{self.name} must be a whole number"
            if self.minimum is not None and value < self.minimum:
                return f"{self.name} must be at least {self.minimum}"
            if self.maximum is not None and value > self.maximum:
                return f"{self.name} must be at most {self.maximum}"
        elif self.kind == "boolean":
            if not isinstance(value, bool):
                return f"{self.name} must be true or false"
        elif self.kind == "strings":
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                return f"{self.name} must be a list of non-empty strings"
        elif self.kind == "status":
            if value not in TaskStatus.values:
                return f"{self.name} must be one of {', '.join(TaskStatus.values)}"
        return None


_TASK_ID = Arg("taskId", "string", True, "The row's id (task_…).", max_length=64)
_ROW_FIELDS = (
    Arg("title", "string", description="A short title.", max_length=500),
    Arg("context", "string", description="What the worker needs to know."),
    Arg("priority", "integer", description="Higher is claimed first; unset counts as 0."),
    Arg("maxAttempts", "integer", minimum=1, description="Claims allowed before a failing row is errored (default 3)."),
    Arg("labels", "strings", description="Free-form labels."),
    Arg("input", "any", description="Any JSON the worker reads."),
    Arg("deps", "strings", description="Task ids on this board that must complete first."),
)

TOOL_ARGS: dict[str, tuple[Arg, ...]] = {
    "addTask": (
        Arg("goal", "string", True, "What the row is for."),
        *_ROW_FIELDS,
        Arg("assignee", "string", description="The key of the worker that should run it.", max_length=200),
    ),
    "assignTask": (_TASK_ID, Arg("assignee", "nullable-string", True, "A worker key, or null to unassign.", max_length=200)),
    "updateTask": (_TASK_ID, Arg("goal", "string", description="What the row is for."), *_ROW_FIELDS),
    "listTasks": (
        Arg("status", "status", description="Only rows with this status."),
        Arg("assignee", "string", description="Only rows assigned to this worker key."),
        Arg("label", "string", description="Only rows carrying this label."),
        Arg(
            "limit",
            "integer",
            minimum=1,
            maximum=LIST_LIMIT_MAX,
            description=f"At most this many rows (default {LIST_LIMIT_DEFAULT}).",
        ),
    ),
    "completeTask": (_TASK_ID, Arg("output", "any", description="The result, any JSON.")),
    "failTask": (_TASK_ID, Arg("error", "string", True, "What went wrong.")),
    "blockTask": (
        _TASK_ID,
        Arg("reason", "string", description="Why it can't run yet."),
        Arg("unblock", "boolean", description="true moves a blocked row back to pending."),
    ),
    "cancelTask": (_TASK_ID, Arg("reason", "string", description="Why it is dropped.")),
}

TOOL_DESCRIPTIONS = {
    "addTask": "File a new pending row on board {board}.",
    "assignTask": "Set or clear the worker a row on board {board} is for (any row not yet finished).",
    "updateTask": "Edit a row's title, goal, context, priority, maxAttempts, labels, input or deps on board {board}.",
    "listTasks": "List rows on board {board}, oldest first, optionally by status, assignee or label.",
    "completeTask": "Settle an in-progress or parked row on board {board} as completed, with its output.",
    "failTask": "Settle an in-progress or parked row on board {board} as failed: it is retried while attempts remain, else errored.",
    "blockTask": "Block a pending row on board {board}; with unblock: true, move a blocked row back to pending.",
    "cancelTask": "Cancel a row on board {board} that is not finished.",
}


def tool_parameters(tool: str) -> dict:
    """The JSON schema of a task tool's arguments (no keys beyond those declared)."""
    args = TOOL_ARGS[tool]
    return {
        "type": "object",
        "properties": {a.name: a.schema() for a in args},
        "required": [a.name for a in args if a.required],
        "additionalProperties": False,
    }


def validate_tool_args(tool: str, args: Any) -> dict:
    """Check ``args`` against task tool ``tool``'s arguments and return them.

    Raises:
        TaskError("invalid_arguments"): not an object, an undeclared key, a missing
            required key, or a value of the wrong kind (every problem named).
        KeyError: ``tool`` is not one of ``TOOL_NAMES``.
    """
    spec = {a.name: a for a in TOOL_ARGS[tool]}
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TaskError(INVALID_ARGUMENTS, f"{tool} takes a JSON object, not {type(args).__name__}.")
    problems = []
    extra = sorted(set(args) - set(spec))
    if extra:
        problems.append(f"{tool} does not take {', '.join(extra)}; it takes {', '.join(spec)}")
    for name, arg in spec.items():
        if name not in args:
            if arg.required:
                problems.append(f"{name} is required")
            continue
        problem = arg.check(args[name])
        if problem:
            problems.append(problem)
    if problems:
        raise TaskError(INVALID_ARGUMENTS, "; ".join(problems) + ".")
    return dict(args)


def tool_row(task) -> dict:
    """A row as a tool answers it: the browser-safe fields plus ``context`` and ``input``
    (what a worker needs to do it)."""
    return {**task_wire(task), "context": task.context, "input": task.input}


_UPDATE_KEYS = {
    "title": "title",
    "goal": "goal",
    "context": "context",
    "priority": "priority",
    "maxAttempts": "max_attempts",
    "labels": "labels",
    "input": "input",
    "deps": "deps",
}


def _run(tool: str, board_id: str, ctx: ToolContext, args: dict, workers: frozenset[str] | None) -> dict:
    org = ctx.org
    actor = ctx.seat_id
    if tool == "addTask":
        author = None if ctx.extras.get("board_action") else ctx.seat_id
        task = services.do_file_task(
            org,
            board_id,
            goal=args["goal"],
            title=args.get("title"),
            context=args.get("context"),
            assignee=args.get("assignee"),
            priority=args.get("priority"),
            max_attempts=args.get("maxAttempts"),
            labels=args.get("labels"),
            input=args.get("input"),
            deps=args.get("deps"),
            author=author,
            actor=actor,
            known_workers=workers,
        )
        return {"ok": True, "taskId": task.task_id, "status": task.status, "task": tool_row(task)}
    if tool == "listTasks":
        limit = args.get("limit", LIST_LIMIT_DEFAULT)
        rows = list_board_tasks(
            org, board_id, status=args.get("status"), assignee=args.get("assignee"), label=args.get("label"), limit=limit + 1
        )
        return {"ok": True, "boardId": board_id, "tasks": [tool_row(t) for t in rows[:limit]], "more": len(rows) > limit}
    task_id = args["taskId"]
    if tool == "assignTask":
        task = services.do_assign_task(org, board_id, task_id, args["assignee"], actor=actor, known_workers=workers)
    elif tool == "updateTask":
        changes = {_UPDATE_KEYS[k]: v for k, v in args.items() if k != "taskId"}
        task = services.do_update_task(org, board_id, task_id, changes, actor=actor)
    elif tool == "completeTask":
        task = services.do_complete_task(org, board_id, task_id, output=args.get("output"), actor=actor)
    elif tool == "failTask":
        task = services.do_fail_task(org, board_id, task_id, error=args["error"], actor=actor)
    elif tool == "blockTask":
        if args.get("unblock"):
            task = services.do_unblock_task(org, board_id, task_id, actor=actor)
        else:
            task = services.do_block_task(org, board_id, task_id, reason=args.get("reason"), actor=actor)
    elif tool == "cancelTask":
        task = services.do_cancel_task(org, board_id, task_id, reason=args.get("reason"), actor=actor)
    else:  # pragma: no cover - TOOL_NAMES is closed
        raise KeyError(tool)
    return {"ok": True, "task": tool_row(task)}


def run_board_tool(tool: str, board_id: str, ctx: ToolContext, args: Any, *, workers: Iterable[str] | None = None) -> dict:
    """``call_board_tool`` that raises instead of refusing (``{"refused": …}``) (what a
    mailbox's board action uses, so its request fails with the code as reason).

    Raises:
        TaskError: the tool's refusal (its code and message).
    """
    clean = validate_tool_args(tool, args)
    known = frozenset(workers) if workers is not None else board_worker_keys(board_id)
    return _run(tool, board_id, ctx, clean, known)


def call_board_tool(tool: str, board_id: str, ctx: ToolContext, args: Any, *, workers: Iterable[str] | None = None) -> ToolResult:
    """Run task tool ``tool`` (one of ``TOOL_NAMES``) on ledger ``board_id`` in ``ctx.org``.

    Args:
        ctx: the caller; ``ctx.seat_id`` is the actor in change records and the author
            of rows added (unless ``ctx.extras["board_action"]`` is set: a mailbox
            action's caller is no seat, and its rows carry no author).
        args: the model's arguments (checked here).
        workers: the board's worker keys for ``unknown_assignee``; default: the keys the
            hired drains of the board declare (``boards.drains.board_worker_keys``).

    Returns:
        ``{"ok": True, ...}`` (``task`` for row calls; ``taskId``/``status`` for addTask;
        ``tasks``/``more`` for listTasks) or ``{"refused": "<code>: <message>"}``.
        Never raises.
    """
    try:
        return run_board_tool(tool, board_id, ctx, args, workers=workers)
    except TaskError as error:
        return error.as_result()
    except Exception as exc:  # a tool never raises; the model reads what happened
        logger.exception("task tool %s on %s failed", tool, board_id)
        return refuse(INTERNAL_ERROR, failure_text(exc))


def board_tool_name(tool: str, board_id: str) -> str:
    """``<tool>_<suffix>``: ``addTask_engineering_incidents_followups``."""
    return f"{tool}_{tool_suffix(board_id)}"


def parse_board_tool_name(name: str) -> tuple[str, str] | None:
    """``(tool, suffix)`` when ``name`` is ``<one of TOOL_NAMES>_<suffix>``, else None."""
    tool, sep, suffix = name.partition("_")
    if not sep or not suffix or tool not in TOOL_NAMES:
        return None
    return tool, suffix


def _bind(tool: str, board_id: str, workers: frozenset[str] | None) -> Callable[[ToolContext, dict], ToolResult]:
    def call(ctx: ToolContext, args: dict) -> ToolResult:
        return call_board_tool(tool, board_id, ctx, args, workers=workers)

    call.__name__ = board_tool_name(tool, board_id)
    return call


def board_task_tools(board_id: str, *, workers: Iterable[str] | None = None) -> list[Tool]:
    """The eight task tools over ledger ``board_id``, in ``TOOL_NAMES`` order (spec
    ``mailboxBoardTaskTools``). Compose once per board: two boards, sixteen tools.

    Args:
        board_id: the ledger id (``mailbox_board(mailbox, name).id``).
        workers: the board's worker keys (its workers map) for ``unknown_assignee``;
            default: looked up at call time from the hired drains.
    """
    known = frozenset(workers) if workers is not None else None
    return [
        Tool(
            name=board_tool_name(tool, board_id),
            description=TOOL_DESCRIPTIONS[tool].format(board=board_id),
            parameters=tool_parameters(tool),
            call=_bind(tool, board_id, known),
        )
        for tool in TOOL_NAMES
    ]
