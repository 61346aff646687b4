"""Board rows (spec "Filing and reading rows", "Working the rows"): the task substrate
rows a mailbox's board ledger holds, and one change record per change.

A row belongs to one ledger (``board_id``, ``<mailbox id>.<board>``) in one organization:
ledgers are organization-scoped, so the same ledger id in two organizations is two
ledgers. What the database can enforce, it does: the status list, attempts never above
max_attempts, a lease exactly while a row is in progress, a finish time on every terminal
row, at most three abandonments, and one dependency edge per pair.
"""

from __future__ import annotations

import itertools
import secrets
import time

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce

from workforce.models import Lease, Organization

DEFAULT_MAX_ATTEMPTS = 3
MAX_ABANDONMENTS = 3

_task_counter = itertools.count(1)
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(n: int) -> str:
    digits = []
    while True:
        n, r = divmod(n, 36)
        digits.append(_BASE36[r])
        if n == 0:
            return "".join(reversed(digits))


def mint_task_id() -> str:
    """A fresh task id shaped like the spec's ``task_ktp2n4x1_1_88a0c3``: the time in
    milliseconds in base 36, a per-process counter, and six random hex digits."""
    return f"task_{_base36(int(time.time() * 1000))}_{next(_task_counter)}_{secrets.token_hex(3)}"


class TaskStatus(models.TextChoices):
    """The seven statuses of a task row; the last three are terminal."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    BLOCKED = "blocked"
    PARKED = "parked"
    COMPLETED = "completed"
    ERRORED = "errored"
    CANCELLED = "cancelled"


TERMINAL_STATUSES = (TaskStatus.COMPLETED, TaskStatus.ERRORED, TaskStatus.CANCELLED)


class BoardTask(Lease):
    """One row on a board ledger.

    ``task_id`` is the wire id (``task_…``, minted, never chosen). ``metadata`` keeps the
    filer's unverified ``author`` beside ``authorVerified: false``. ``run`` names the run
    a seat is working the row in, or last worked it in. ``claim_token`` identifies the
    current claim, so that a drain settling a claim it lost (lease lapsed and re-claimed,
    or cancelled meanwhile) changes nothing. ``lease_until`` (``workforce.models.Lease``) is set exactly while the
    row is in progress; ``abandonments`` counts leases that lapsed.
    """

    task_id = models.CharField(max_length=64, unique=True, default=mint_task_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="board_tasks")
    board_id = models.CharField(max_length=400, help_text="The ledger id: <mailbox id>.<board>.")
    title = models.CharField(max_length=500, null=True, blank=True)
    goal = models.TextField()
    context = models.TextField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=TaskStatus.choices, default=TaskStatus.PENDING)
    assignee = models.CharField(max_length=200, null=True, blank=True, help_text="A key of the board's workers map.")
    run = models.CharField(max_length=200, null=True, blank=True)
    priority = models.IntegerField(null=True, blank=True, help_text="Higher runs first; unset counts as 0.")
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=DEFAULT_MAX_ATTEMPTS)
    deps = models.JSONField(default=list, blank=True, help_text="Task ids on the same board, as filed.")
    labels = models.JSONField(default=list, blank=True)
    error = models.TextField(null=True, blank=True)
    output = models.JSONField(null=True, blank=True)
    input = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    claim_token = models.CharField(max_length=40, null=True, blank=True, editable=False)
    claimed_by = models.CharField(max_length=200, null=True, blank=True, help_text="The worker key of the claim.")
    abandonments = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True, help_text="When the row reached a terminal status.")

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(status__in=TaskStatus.values), name="boardtask_status_known"),
            models.CheckConstraint(condition=Q(max_attempts__gte=1), name="boardtask_max_attempts_positive"),
            models.CheckConstraint(condition=Q(attempts__lte=models.F("max_attempts")), name="boardtask_attempts_within_max"),
            models.CheckConstraint(condition=Q(abandonments__lte=MAX_ABANDONMENTS), name="boardtask_abandonments_within_max"),
            models.CheckConstraint(
                condition=(Q(status=TaskStatus.IN_PROGRESS) & Q(lease_until__isnull=False) & Q(claim_token__isnull=False))
                | (~Q(status=TaskStatus.IN_PROGRESS) & Q(lease_until__isnull=True) & Q(claim_token__isnull=True)),
                name="boardtask_lease_iff_in_progress",
            ),
            models.CheckConstraint(
                condition=~Q(status__in=TERMINAL_STATUSES) | Q(completed_at__isnull=False),
                name="boardtask_terminal_has_completed_at",
            ),
        ]
        indexes = [
            # The claim order (highest priority first, unset as 0; then oldest) within one
            # ledger and status, so a claim's ORDER BY … LIMIT 1 is one index walk.
            models.Index(
                F("organization"),
                F("board_id"),
                F("status"),
                Coalesce(F("priority"), Value(0)).desc(),
                F("created_at"),
                F("id"),
                name="boardtask_claim_order_idx",
            ),
            models.Index(fields=["organization", "board_id", "id"], name="boardtask_ledger_idx"),
        ]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.board_id}/{self.task_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def author(self) -> str | None:
        """The filer's unverified claim, if one was made."""
        return (self.metadata or {}).get("author")


class TaskDep(models.Model):
    """``task`` may run only once ``depends_on`` is completed (``BoardTask.deps`` as
    edges, so that claimability is one SQL query)."""

    task = models.ForeignKey(BoardTask, on_delete=models.CASCADE, related_name="dep_edges")
    depends_on = models.ForeignKey(BoardTask, on_delete=models.CASCADE, related_name="dependent_edges")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task", "depends_on"], name="taskdep_unique_edge"),
            models.CheckConstraint(condition=~Q(task=models.F("depends_on")), name="taskdep_not_self"),
        ]

    def __str__(self) -> str:
        return f"{self.task_id} needs {self.depends_on_id}"


class TaskChangeKind(models.TextChoices):
    """What a ``task-change`` record says happened."""

    ADDED = "added"
    CLAIMED = "claimed"
    COMPLETED = "completed"
    ERRORED = "errored"
    RETRIED = "retried"
    BLOCKED = "blocked"
    UNBLOCKED = "unblocked"
    CANCELLED = "cancelled"
    ASSIGNEE_CHANGED = "assignee_changed"
    UPDATED = "updated"
    PARKED = "parked"
    RESUMED = "resumed"
    ABANDONED = "abandoned"


class TaskChange(models.Model):
    """One change to a row (the spec's ``task-change`` record), oldest first.

    ``actor`` is who made it (a seat id, a caller's user id, a drain's worker key, or
    ``lease`` for a lapse); ``data`` holds what changed (old and new assignee, the
    fields updated, the error)."""

    Kind = TaskChangeKind

    task = models.ForeignKey(BoardTask, on_delete=models.CASCADE, related_name="changes")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    board_id = models.CharField(max_length=400)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    from_status = models.CharField(max_length=16, choices=TaskStatus.choices, null=True, blank=True)
    to_status = models.CharField(max_length=16, choices=TaskStatus.choices, null=True, blank=True)
    actor = models.CharField(max_length=200, null=True, blank=True)
    run = models.CharField(max_length=200, null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task", "id"]
        indexes = [models.Index(fields=["organization", "board_id", "id"], name="taskchange_ledger_idx")]
        constraints = [models.CheckConstraint(condition=Q(kind__in=TaskChangeKind.values), name="taskchange_kind_known")]

    def __str__(self) -> str:
        return f"{self.task_id} {self.kind}"
