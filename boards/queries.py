"""Read side of boards (spec "Filing and reading rows", "Showing a board on screen"):
rows of one ledger, always through the organization (ledgers are org-scoped)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from workforce.models import Organization

from .errors import TASK_NOT_FOUND, TaskError
from .models import BoardTask, TaskDep, TaskStatus

# What crosses to a browser (spec "Showing a board on screen"), in the spec's order.
SAFE_FIELDS = (
    "id",
    "title",
    "goal",
    "status",
    "assignee",
    "run",
    "priority",
    "attempts",
    "maxAttempts",
    "deps",
    "labels",
    "error",
    "createdAt",
    "updatedAt",
    "startedAt",
    "completedAt",
)


def _ms(value: datetime | None) -> int | None:
    return int(value.timestamp() * 1000) if value is not None else None


def task_wire(task: BoardTask) -> dict:
    """The browser-safe row: exactly ``SAFE_FIELDS``; times in milliseconds since the
    epoch (null when unset). Context, input, output and metadata never cross."""
    return {
        "id": task.task_id,
        "title": task.title,
        "goal": task.goal,
        "status": task.status,
        "assignee": task.assignee,
        "run": task.run,
        "priority": task.priority,
        "attempts": task.attempts,
        "maxAttempts": task.max_attempts,
        "deps": list(task.deps or []),
        "labels": list(task.labels or []),
        "error": task.error,
        "createdAt": _ms(task.created_at),
        "updatedAt": _ms(task.updated_at),
        "startedAt": _ms(task.started_at),
        "completedAt": _ms(task.completed_at),
    }


def access_task(org: Organization, board_id: str, task_id: object) -> BoardTask:
    """The row ``task_id`` on ledger ``board_id`` in ``org``.

    A row on another board, or in another organization, is not found: ids don't leak.

    Raises:
        TaskError("task_not_found").
    """
    if isinstance(task_id, str):
        task = BoardTask.objects.filter(organization=org, board_id=board_id, task_id=task_id).first()
        if task is not None:
            return task
    raise TaskError(TASK_NOT_FOUND, f"No task {task_id!r} on board {board_id}.")


def list_board_tasks(
    org: Organization,
    board_id: str,
    *,
    status: str | None = None,
    assignee: str | None = None,
    label: str | None = None,
    after: str | None = None,
    limit: int | None = None,
) -> list[BoardTask]:
    """Rows of ledger ``board_id`` in ``org``, oldest filed first.

    Args:
        status: only rows with this status; assignee: only rows assigned to this key;
        label: only rows carrying this label.
        after: a task id; only rows filed after it (a page cursor). An id not on the
            board gives an empty page.
        limit: at most this many rows (None: all).
    """
    qs = BoardTask.objects.filter(organization=org, board_id=board_id).order_by("id")
    if status is not None:
        qs = qs.filter(status=status)
    if assignee is not None:
        qs = qs.filter(assignee=assignee)
    if after is not None:
        anchor = BoardTask.objects.filter(organization=org, board_id=board_id, task_id=after).values_list("pk", flat=True).first()
        if anchor is None:
            return []
        qs = qs.filter(pk__gt=anchor)
    if label is None:
        return list(qs[:limit] if limit is not None else qs)
    # Labels are a JSON list; SQLite has no JSON containment, so filter here.
    rows: list[BoardTask] = []
    for task in qs.iterator(chunk_size=500):
        if label in (task.labels or []):
            rows.append(task)
            if limit is not None and len(rows) >= limit:
                break
    return rows


def open_deps_exist() -> Exists:
    """``Exists(...)``: the outer row has a dep that is not completed yet."""
    return Exists(TaskDep.objects.filter(task=OuterRef("pk")).exclude(depends_on__status=TaskStatus.COMPLETED))


CLAIM_ORDER = (Coalesce("priority", Value(0)).desc(), "created_at", "id")


def claim_sort_key(task: BoardTask) -> tuple:
    """``CLAIM_ORDER`` in Python: to pick between candidates of two queries."""
    return (-(task.priority or 0), task.created_at, task.pk)


def _claim_scope(org: Organization, board_id: str, worker_key: str | None) -> QuerySet[BoardTask]:
    qs = BoardTask.objects.filter(organization=org, board_id=board_id)
    if worker_key is not None:
        qs = qs.filter(Q(assignee__isnull=True) | Q(assignee=worker_key))
    return qs


def claimable_pending(org: Organization, board_id: str, *, worker_key: str | None = None) -> QuerySet[BoardTask]:
    """Pending rows a drain may claim, in claim order: attempts left, every dep
    completed, unassigned or assigned to ``worker_key`` (when given). One equality on
    status, so the claim-order index serves the ORDER BY … LIMIT 1."""
    return (
        _claim_scope(org, board_id, worker_key)
        .filter(status=TaskStatus.PENDING, attempts__lt=F("max_attempts"))
        .filter(~open_deps_exist())
        .order_by(*CLAIM_ORDER)
    )


def claimable_lapsed(org: Organization, board_id: str, *, now: datetime, worker_key: str | None = None) -> QuerySet[BoardTask]:
    """Rows in progress whose lease lapsed before ``now`` that a drain may claim again,
    in claim order (every dep completed; ``worker_key`` as for pending rows)."""
    return (
        _claim_scope(org, board_id, worker_key)
        .filter(status=TaskStatus.IN_PROGRESS, lease_until__lt=now)
        .filter(~open_deps_exist())
        .order_by(*CLAIM_ORDER)
    )


def claimable_tasks(org: Organization, board_id: str, *, now: datetime, worker_key: str | None = None) -> QuerySet[BoardTask]:
    """Every row a drain may claim now, in claim order (spec "Working the rows").

    Claimable: pending with attempts left, or in progress with a lease that lapsed
    before ``now``; every dep completed; and, when ``worker_key`` is given, unassigned
    or assigned to that key. Order: highest priority first (unset counts as 0), then
    oldest filed first. (A claim asks ``claimable_pending`` and ``claimable_lapsed``
    separately, so that each is one index walk.)
    """
    qs = _claim_scope(org, board_id, worker_key).filter(
        Q(status=TaskStatus.PENDING, attempts__lt=F("max_attempts")) | Q(status=TaskStatus.IN_PROGRESS, lease_until__lt=now)
    )
    return qs.filter(~open_deps_exist()).order_by(*CLAIM_ORDER)


def list_lapsed_tasks(org: Organization | None, board_id: str | None, *, now: datetime) -> QuerySet[BoardTask]:
    """Rows in progress whose lease lapsed before ``now`` (all boards when ``board_id``
    is None, all organizations when ``org`` is None), oldest first."""
    qs = BoardTask.objects.filter(status=TaskStatus.IN_PROGRESS, lease_until__lt=now)
    if org is not None:
        qs = qs.filter(organization=org)
    if board_id is not None:
        qs = qs.filter(board_id=board_id)
    return qs.order_by("id")
