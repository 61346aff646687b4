"""Write side of board rows (spec "Filing and reading rows", "Working the rows"):
filing a row and the task operations the eight tools and board actions call.

Every change to a row is one conditional UPDATE guarded on what the decision was made
from (status, attempts and the current claim), plus one ``TaskChange`` record, in one
transaction. A writer that loses a race re-reads the row and decides again, so two
writers never both move one row, on SQLite or on PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from workforce.models import Organization

from ..errors import (
    ILLEGAL_STATUS_TRANSITION,
    INVALID_ARGUMENTS,
    TASK_CONFLICT,
    TASK_NOT_FOUND,
    TASK_TERMINAL,
    UNKNOWN_ASSIGNEE,
    TaskError,
)
from ..models import DEFAULT_MAX_ATTEMPTS, BoardTask, TaskChange, TaskDep, TaskStatus
from ..naming import tool_suffix
from ..queries import access_task
from ..transitions import can_transition, describe_calls_from, is_terminal

S = TaskStatus
K = TaskChange.Kind

logger = logging.getLogger(__name__)

_RACE_RETRIES = 8

# --- applying one change -------------------------------------------------------------


def _apply(
    task: BoardTask,
    *,
    kind: str,
    actor: str | None,
    to_status: str | None = None,
    fields: dict[str, Any] | None = None,
    data: dict | None = None,
    now: datetime | None = None,
) -> bool:
    """Move ``task`` (as read) to ``to_status`` and/or set ``fields``, and record it.

    The UPDATE is guarded on the status, attempts and claim the caller decided from; it
    answers False (nothing written) when another writer got there first. Leaving
    ``in_progress`` clears the lease and the claim; reaching a terminal status stamps
    ``completed_at``. On success ``task`` is updated in place.
    """
    now = now or timezone.now()
    from_status = task.status
    updates: dict[str, Any] = dict(fields or {})
    updates["updated_at"] = now
    if to_status is not None and to_status != from_status:
        if not can_transition(from_status, to_status):  # pragma: no cover - callers check first
            raise AssertionError(f"{from_status} -> {to_status} is not a transition")
        updates["status"] = to_status
        if to_status != S.IN_PROGRESS:
            updates.update(lease_until=None, claim_token=None, claimed_by=None)
        if is_terminal(to_status):
            updates["completed_at"] = now
    won = BoardTask.objects.filter(pk=task.pk, status=from_status, attempts=task.attempts, claim_token=task.claim_token).update(
        **updates
    )
    if won != 1:
        return False
    for key, value in updates.items():
        setattr(task, key, value)
    moved = "status" in updates
    _record(task, kind, from_status if moved else None, updates["status"] if moved else None, actor=actor, data=data)
    if moved and updates["status"] == S.ERRORED:
        # One line for operators, once the row is really errored (after commit).
        reason = task.error or (data or {}).get("error") or kind
        transaction.on_commit(
            lambda: logger.warning(
                "board row given up: board %s, row %s, after %d of %d attempts: %s",
                task.board_id,
                task.task_id,
                task.attempts,
                task.max_attempts,
                reason,
            )
        )
    return True


def _record(
    task: BoardTask, kind: str, from_status: str | None, to_status: str | None, *, actor: str | None, data: dict | None = None
) -> TaskChange:
    return TaskChange.objects.create(
        task=task,
        organization_id=task.organization_id,
        board_id=task.board_id,
        kind=kind,
        from_status=from_status,
        to_status=to_status,
        actor=actor,
        run=task.run,
        data=data or {},
    )


def _with_row(org: Organization, board_id: str, task_id: object, step: Callable[[BoardTask], BoardTask | None]) -> BoardTask:
    """Read the row, let ``step`` decide and apply; on a lost race read again and retry.

    Raises:
        TaskError: whatever ``step`` raises, ``task_not_found``, or ``task_conflict``
            when the row kept changing underneath (very unlikely).
    """
    for _ in range(_RACE_RETRIES):
        with transaction.atomic():
            task = access_task(org, board_id, task_id)
            done = step(task)
            if done is not None:
                return done
    raise TaskError(TASK_CONFLICT, f"{task_id} kept changing while it was being updated; try again.")


def _terminal_error(task: BoardTask) -> TaskError:
    return TaskError(TASK_TERMINAL, f"{task.task_id} is {task.status}, a terminal status: no call changes it.")


def _illegal(task: BoardTask, call: str) -> TaskError:
    suffix = tool_suffix(task.board_id)
    return TaskError(
        ILLEGAL_STATUS_TRANSITION,
        f"{call}_{suffix} can't move {task.task_id}: it is {task.status}, and {describe_calls_from(task.status, suffix)}.",
    )


def _require_movable(task: BoardTask, call: str, from_statuses: Iterable[str]) -> None:
    if is_terminal(task.status):
        raise _terminal_error(task)
    if task.status not in from_statuses:
        raise _illegal(task, call)


# --- arguments -----------------------------------------------------------------------


def check_assignee(board_id: str, assignee: str | None, known_workers: Iterable[str] | None) -> None:
    """Refuse an assignee that is not a key of the board's workers map.

    Args:
        assignee: a worker key, or None (unassigned, always accepted).
        known_workers: the keys the board's drains declare; None when nothing is known
            about the board's workers, and then any key is accepted.

    Raises:
        TaskError("unknown_assignee").
    """
    if assignee is None or known_workers is None:
        return
    known = sorted(set(known_workers))
    if assignee not in known:
        names = ", ".join(known) if known else "none"
        raise TaskError(
            UNKNOWN_ASSIGNEE,
            f'"{assignee}" is not a worker of board {board_id}; its workers are {names}.',
        )


def _check_max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TaskError(INVALID_ARGUMENTS, f"maxAttempts must be a whole number of at least 1, not {value!r}.")
    return value


def _check_labels(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskError(INVALID_ARGUMENTS, "labels must be a list of strings.")
    return list(value)


def _resolve_deps(org: Organization, board_id: str, deps: Any, *, task: BoardTask | None = None) -> list[BoardTask]:
    """The dep rows named by ``deps`` (task ids on the same board), checked for cycles."""
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise TaskError(INVALID_ARGUMENTS, "deps must be a list of task ids.")
    if len(set(deps)) != len(deps):
        raise TaskError(INVALID_ARGUMENTS, "deps names a task twice.")
    rows = {t.task_id: t for t in BoardTask.objects.filter(organization=org, board_id=board_id, task_id__in=deps)}
    missing = [d for d in deps if d not in rows]
    if missing:
        raise TaskError(TASK_NOT_FOUND, f"deps names {', '.join(missing)}, not on board {board_id}.")
    if task is not None:
        if task.task_id in rows:
            raise TaskError(INVALID_ARGUMENTS, f"{task.task_id} can't depend on itself.")
        # A cycle: some dep already (transitively) depends on ``task``.
        frontier = {rows[d].pk for d in deps}
        seen: set[int] = set()
        while frontier:
            if task.pk in frontier:
                raise TaskError(INVALID_ARGUMENTS, f"those deps would make {task.task_id} wait on itself (a cycle).")
            seen |= frontier
            frontier = set(TaskDep.objects.filter(task_id__in=frontier).values_list("depends_on_id", flat=True)) - seen
    return [rows[d] for d in deps]


def _set_dep_edges(task: BoardTask, dep_rows: list[BoardTask]) -> None:
    TaskDep.objects.filter(task=task).delete()
    TaskDep.objects.bulk_create([TaskDep(task=task, depends_on=d) for d in dep_rows])


# --- filing --------------------------------------------------------------------------


def do_file_task(
    org: Organization,
    board_id: str,
    *,
    goal: str,
    title: str | None = None,
    context: str | None = None,
    assignee: str | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    labels: list[str] | None = None,
    input: Any = None,
    deps: list[str] | None = None,
    author: str | None = None,
    actor: str | None = None,
    known_workers: Iterable[str] | None = None,
) -> BoardTask:
    """File one pending row on ledger ``board_id`` in ``org`` (spec "Filing and reading
    rows"); records an ``added`` change.

    Args:
        goal: what the row is for (non-empty text).
        assignee: a key of the board's workers map; checked only when ``known_workers``
            is given (fileTask and the task tools pass the hired drains' keys).
        priority: higher is claimed first; None counts as 0.
        max_attempts: claims allowed before a failing row is errored (default 3).
        deps: task ids on the same board that must complete first.
        author: the unverified claim, stored as ``metadata = {"author": ...,
            "authorVerified": false}``; the caller checks it against the members.
        actor: who filed it, for the change record (defaults to the author).

    Raises:
        TaskError("invalid_arguments" | "unknown_assignee" | "task_not_found" (a dep)).
    """
    if not isinstance(goal, str) or not goal.strip():
        raise TaskError(INVALID_ARGUMENTS, "goal must be non-empty text.")
    check_assignee(board_id, assignee, known_workers)
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise TaskError(INVALID_ARGUMENTS, f"priority must be a whole number, not {priority!r}.")
    max_attempts = DEFAULT_MAX_ATTEMPTS if max_attempts is None else _check_max_attempts(max_attempts)
    labels = _check_labels(labels) if labels is not None else []
    metadata: dict[str, Any] = {"authorVerified": False}
    if author is not None:
        metadata = {"author": author, "authorVerified": False}
    with transaction.atomic():
        dep_rows = _resolve_deps(org, board_id, deps) if deps else []
        task = BoardTask.objects.create(
            organization=org,
            board_id=board_id,
            goal=goal,
            title=title,
            context=context,
            assignee=assignee,
            priority=priority,
            max_attempts=max_attempts,
            labels=labels,
            deps=[d.task_id for d in dep_rows],
            input=input,
            metadata=metadata,
        )
        if dep_rows:
            _set_dep_edges(task, dep_rows)
        _record(task, K.ADDED, None, S.PENDING, actor=actor or author, data={"author": author} if author else {})
    return task


# --- the task operations ---------------------------------------------------------------


def do_assign_task(
    org: Organization,
    board_id: str,
    task_id: object,
    assignee: str | None,
    *,
    actor: str | None = None,
    known_workers: Iterable[str] | None = None,
) -> BoardTask:
    """Set (or clear, with None) a row's assignee; records ``assignee_changed`` when it
    changes. Any non-terminal row, including one a seat is working on.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "unknown_assignee").
    """
    check_assignee(board_id, assignee, known_workers)

    def step(task: BoardTask) -> BoardTask | None:
        if is_terminal(task.status):
            raise _terminal_error(task)
        if task.assignee == assignee:
            return task
        old = task.assignee
        ok = _apply(task, kind=K.ASSIGNEE_CHANGED, actor=actor, fields={"assignee": assignee}, data={"from": old, "to": assignee})
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


UPDATABLE_FIELDS = ("title", "goal", "context", "priority", "max_attempts", "labels", "input", "deps")


def do_update_task(
    org: Organization, board_id: str, task_id: object, changes: dict[str, Any], *, actor: str | None = None
) -> BoardTask:
    """Edit a non-terminal row's fields (``UPDATABLE_FIELDS``, snake_case keys); never
    its status or assignee. Records ``updated`` with the names of the fields changed.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "invalid_arguments" |
            "task_not_found" for a dep not on the board).
    """
    unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
    if unknown:
        raise TaskError(INVALID_ARGUMENTS, f"can't update {', '.join(unknown)}.")
    if not changes:
        raise TaskError(INVALID_ARGUMENTS, "nothing to update: name at least one field.")
    if "goal" in changes and (not isinstance(changes["goal"], str) or not changes["goal"].strip()):
        raise TaskError(INVALID_ARGUMENTS, "goal must be non-empty text.")
    if "max_attempts" in changes:
        _check_max_attempts(changes["max_attempts"])
    if "labels" in changes:
        _check_labels(changes["labels"])

    def step(task: BoardTask) -> BoardTask | None:
        if is_terminal(task.status):
            raise _terminal_error(task)
        fields = dict(changes)
        dep_rows = None
        if "max_attempts" in fields and fields["max_attempts"] < task.attempts:
            raise TaskError(
                INVALID_ARGUMENTS,
                f"maxAttempts can't go below the {task.attempts} attempt(s) {task.task_id} has already used.",
            )
        if "deps" in fields:
            dep_rows = _resolve_deps(org, board_id, fields["deps"], task=task)
            fields["deps"] = [d.task_id for d in dep_rows]
        changed = sorted(k for k, v in fields.items() if getattr(task, k) != v)
        if not _apply(task, kind=K.UPDATED, actor=actor, fields=fields, data={"fields": changed}):
            return None
        if dep_rows is not None:
            _set_dep_edges(task, dep_rows)
        return task

    return _with_row(org, board_id, task_id, step)


def do_complete_task(
    org: Organization, board_id: str, task_id: object, *, output: Any = None, actor: str | None = None
) -> BoardTask:
    """Settle a row as completed (from in_progress or parked), keeping ``output``.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "illegal_status_transition").
    """

    def step(task: BoardTask) -> BoardTask | None:
        _require_movable(task, "completeTask", (S.IN_PROGRESS, S.PARKED))
        ok = _apply(task, kind=K.COMPLETED, actor=actor, to_status=S.COMPLETED, fields={"output": output, "error": None})
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


def _fail_decision(task: BoardTask, error: str) -> tuple[str, str, dict]:
    """(to status, change kind, fields) for a failed run of ``task``: back to pending
    while attempts remain under max_attempts, otherwise errored."""
    if task.attempts < task.max_attempts:
        return S.PENDING, K.RETRIED, {"error": error}
    return S.ERRORED, K.ERRORED, {"error": error}


def do_fail_task(org: Organization, board_id: str, task_id: object, *, error: str, actor: str | None = None) -> BoardTask:
    """Settle a row's run as failed (from in_progress or parked): it goes back to pending
    (``retried``) while ``attempts < max_attempts``, otherwise it is ``errored``.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "illegal_status_transition").
    """

    def step(task: BoardTask) -> BoardTask | None:
        _require_movable(task, "failTask", (S.IN_PROGRESS, S.PARKED))
        to, kind, fields = _fail_decision(task, error)
        ok = _apply(task, kind=kind, actor=actor, to_status=to, fields=fields, data={"error": error, "attempts": task.attempts})
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


def do_block_task(
    org: Organization, board_id: str, task_id: object, *, reason: str | None = None, actor: str | None = None
) -> BoardTask:
    """Block a pending row (a drain won't claim it) until it is unblocked.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "illegal_status_transition").
    """

    def step(task: BoardTask) -> BoardTask | None:
        _require_movable(task, "blockTask", (S.PENDING,))
        ok = _apply(task, kind=K.BLOCKED, actor=actor, to_status=S.BLOCKED, data={"reason": reason} if reason else {})
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


def do_unblock_task(org: Organization, board_id: str, task_id: object, *, actor: str | None = None) -> BoardTask:
    """Move a blocked row back to pending (``unblocked``).

    Raises:
        TaskError("task_not_found" | "task_terminal" | "illegal_status_transition").
    """

    def step(task: BoardTask) -> BoardTask | None:
        if is_terminal(task.status):
            raise _terminal_error(task)
        if task.status != S.BLOCKED:
            suffix = tool_suffix(task.board_id)
            raise TaskError(
                ILLEGAL_STATUS_TRANSITION,
                f"blockTask_{suffix} with unblock: true can't move {task.task_id}: it is {task.status}, not blocked, "
                f"and {describe_calls_from(task.status, suffix)}.",
            )
        ok = _apply(task, kind=K.UNBLOCKED, actor=actor, to_status=S.PENDING)
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


def do_cancel_task(
    org: Organization, board_id: str, task_id: object, *, reason: str | None = None, actor: str | None = None
) -> BoardTask:
    """Cancel any non-terminal row (including one a seat is working on: its drain's
    later settle changes nothing).

    Raises:
        TaskError("task_not_found" | "task_terminal").
    """

    def step(task: BoardTask) -> BoardTask | None:
        _require_movable(task, "cancelTask", (S.PENDING, S.IN_PROGRESS, S.BLOCKED, S.PARKED))
        ok = _apply(task, kind=K.CANCELLED, actor=actor, to_status=S.CANCELLED, data={"reason": reason} if reason else {})
        return task if ok else None

    return _with_row(org, board_id, task_id, step)


def do_resume_task(org: Organization, board_id: str, task_id: object, *, actor: str | None = None) -> BoardTask:
    """Move a parked row back to pending (``resumed``), claimable again. Attempts are
    not touched; the next claim counts one.

    Raises:
        TaskError("task_not_found" | "task_terminal" | "illegal_status_transition").
    """

    def step(task: BoardTask) -> BoardTask | None:
        _require_movable(task, "resume", (S.PARKED,))
        if task.attempts >= task.max_attempts:
            raise TaskError(
                ILLEGAL_STATUS_TRANSITION,
                f"{task.task_id} has used all {task.max_attempts} attempt(s), so it can't go back to pending; "
                "raise maxAttempts with updateTask first, or settle it.",
            )
        ok = _apply(task, kind=K.RESUMED, actor=actor, to_status=S.PENDING)
        return task if ok else None

    return _with_row(org, board_id, task_id, step)
