"""Claiming, settling and leases, and the drain (spec "Working the rows": the
``taskBoard`` drain a seat runs).

A claim reads its candidate ``SELECT … FOR UPDATE SKIP LOCKED`` where the database has
it, so concurrent drainers skip each other's rows instead of queueing on them, and its
UPDATE is conditional on the row still being as read, so exactly one claimer wins on any
database. Settling only counts for the current claim (its ``claim_token``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from workforce.models import Organization

from ..models import MAX_ABANDONMENTS, BoardTask, TaskChange, TaskStatus
from ..queries import claim_sort_key, claimable_lapsed, claimable_pending, list_lapsed_tasks
from .rows import _apply, _fail_decision, _record

logger = logging.getLogger(__name__)

S = TaskStatus
K = TaskChange.Kind

DEFAULT_LEASE_SECONDS = 300
_SETTLED_OUTCOME = {S.COMPLETED: "completed", S.PENDING: "retried", S.ERRORED: "errored", S.PARKED: "parked"}
_CLAIM_RETRIES = 64


def mint_run_id() -> str:
    """A fresh run id (``run_`` and 16 hex digits) for a drain that was given none."""
    return f"run_{secrets.token_hex(8)}"


def _mint_claim_token() -> str:
    return secrets.token_hex(16)


# --- claiming, settling and leases ------------------------------------------------------


def _abandon_fields(task: BoardTask) -> tuple[str, str, dict]:
    """Where a row whose lease lapsed goes: errored on its third abandonment or when it
    has no attempts left, otherwise pending."""
    abandonments = task.abandonments + 1
    if abandonments >= MAX_ABANDONMENTS:
        error = f"abandoned {abandonments} times: its lease lapsed before a drain settled it"
        return S.ERRORED, error, {"abandonments": abandonments, "error": error}
    if task.attempts >= task.max_attempts:
        error = f"its lease lapsed on its last attempt ({task.attempts} of {task.max_attempts})"
        return S.ERRORED, error, {"abandonments": abandonments, "error": error}
    return S.PENDING, "", {"abandonments": abandonments}


def _release(task: BoardTask, now: datetime) -> bool:
    to, error, fields = _abandon_fields(task)
    data = {"abandonments": fields["abandonments"], "claimedBy": task.claimed_by}
    if error:
        data["error"] = error
    return _apply(task, kind=K.ABANDONED, actor="lease", to_status=to, fields=fields, data=data, now=now)


def do_claim_task(
    org: Organization,
    board_id: str,
    *,
    worker_key: str | None = None,
    run: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    now: datetime | None = None,
) -> BoardTask | None:
    """Claim the next claimable row of ledger ``board_id`` (spec "Working the rows").

    Claimable: pending, or in progress with a lapsed lease, every dep completed, and
    unassigned or assigned to ``worker_key``. Order: highest priority first (unset is 0),
    then oldest. The claim sets in_progress, attempts + 1, a lease of ``lease_seconds``
    seconds, ``started_at``, ``run`` and a fresh ``claim_token`` (keep the returned row:
    settle it with ``do_settle_claim``). Exactly one claimer wins a row: on PostgreSQL the
    candidate is read ``FOR UPDATE SKIP LOCKED``; everywhere the UPDATE is conditional on
    the row still being as read.

    A lapsed row counts an abandonment first (``abandoned``): on its third, or when it has
    no attempts left, it is errored and the next row is tried.

    Args:
        worker_key: the key this drain runs rows for (None: any row).
        run: the run working the row (``run`` on the wire); lease_seconds: seconds.
        now: the clock (tests).

    Returns:
        The claimed row (status in_progress), or None when nothing is claimable.
    """
    skip_locked = connection.features.has_select_for_update_skip_locked
    lost = 0
    while lost < _CLAIM_RETRIES:  # each lost race means another claimer moved a row
        with transaction.atomic():
            at = now or timezone.now()
            candidates = []
            for qs in (
                claimable_lapsed(org, board_id, now=at, worker_key=worker_key),
                claimable_pending(org, board_id, worker_key=worker_key),
            ):
                if skip_locked:
                    qs = qs.select_for_update(skip_locked=True)
                row = qs.first()
                if row is not None:
                    candidates.append(row)
            if not candidates:
                return None
            task = min(candidates, key=claim_sort_key)
            extra: list = []
            fields: dict[str, Any] = {}
            if task.status == S.IN_PROGRESS:  # its lease lapsed
                to, error, abandon = _abandon_fields(task)
                if to == S.ERRORED:
                    if not _release(task, at):
                        lost += 1
                    continue
                fields["abandonments"] = abandon["abandonments"]
                extra.append(
                    (
                        K.ABANDONED,
                        S.IN_PROGRESS,
                        S.PENDING,
                        {"abandonments": abandon["abandonments"], "claimedBy": task.claimed_by},
                    )
                )
            token = _mint_claim_token()
            fields.update(
                status=S.IN_PROGRESS,
                attempts=F("attempts") + 1,
                lease_expires_at=at + timedelta(seconds=lease_seconds),
                claim_token=token,
                claimed_by=worker_key,
                started_at=at,
                run=run,
                updated_at=at,
            )
            won = BoardTask.objects.filter(
                pk=task.pk, status=task.status, attempts=task.attempts, claim_token=task.claim_token
            ).update(**fields)
            if won != 1:
                lost += 1  # another claimer got it (SQLite, or a lost conditional UPDATE)
                continue
            fields["attempts"] = task.attempts + 1  # exact: the UPDATE was guarded on attempts
            for key, value in fields.items():
                setattr(task, key, value)
            for kind, from_status, to_status, data in extra:
                _record(task, kind, from_status, to_status, actor="lease", data=data)
            _record(task, K.CLAIMED, S.PENDING, S.IN_PROGRESS, actor=worker_key, data={"attempt": task.attempts})
            return task
    return None


def do_release_lapsed_tasks(org: Organization | None = None, board_id: str | None = None, *, now: datetime | None = None) -> int:
    """Process rows whose lease lapsed: each counts an abandonment and goes back to
    pending, or is errored on its third abandonment or with no attempts left.

    A drain claims lapsed rows directly; this sweep makes the board show them as they
    are between drains. Returns how many rows it moved.
    """
    now = now or timezone.now()
    moved = 0
    for task in list_lapsed_tasks(org, board_id, now=now):
        with transaction.atomic():
            if _release(task, now):
                moved += 1
    return moved


def do_extend_lease(task: BoardTask, *, lease_seconds: float = DEFAULT_LEASE_SECONDS) -> bool:
    """Push a claimed row's lease ``lease_seconds`` seconds from now (a long run's
    heartbeat). False when the claim is no longer current (lapsed and re-claimed,
    settled or cancelled); the row is untouched then."""
    expires = timezone.now() + timedelta(seconds=lease_seconds)
    won = BoardTask.objects.filter(pk=task.pk, status=S.IN_PROGRESS, claim_token=task.claim_token).update(
        lease_expires_at=expires
    )
    if won == 1:
        task.lease_expires_at = expires
    return won == 1


def do_settle_claim(
    task: BoardTask,
    *,
    output: Any = None,
    error: str | None = None,
    park: str | None = None,
) -> BoardTask | None:
    """Settle the claim ``task`` came back with from ``do_claim_task``.

    Exactly one of: ``error`` given -> failed (pending while attempts < max_attempts,
    else errored); ``park`` given (a reason) -> parked; otherwise completed with
    ``output``. Only the current claim settles: when the row was cancelled, settled or
    re-claimed meanwhile, nothing changes and None is returned.
    """
    if task.claim_token is None:
        raise ValueError("do_settle_claim needs the row do_claim_task returned")
    actor = task.claimed_by
    with transaction.atomic():
        if error is not None:
            to, kind, fields = _fail_decision(task, error)
            ok = _apply(
                task, kind=kind, actor=actor, to_status=to, fields=fields, data={"error": error, "attempts": task.attempts}
            )
        elif park is not None:
            ok = _apply(task, kind=K.PARKED, actor=actor, to_status=S.PARKED, data={"reason": park})
        else:
            ok = _apply(task, kind=K.COMPLETED, actor=actor, to_status=S.COMPLETED, fields={"output": output, "error": None})
    return task if ok else None


# --- the drain ------------------------------------------------------------------------


class ParkTask(Exception):
    """Raised by a drain's ``run_row`` to park the row (in_progress -> parked) instead
    of settling it, e.g. while it waits on a person. ``reason`` is recorded."""

    def __init__(self, reason: str = "parked"):
        self.reason = reason
        super().__init__(reason)


class Settled:
    """What a drain's ``run_row`` returns when it settled its claim itself, with
    ``do_settle_claim`` inside the transaction that wrote the run's own records (a seat's
    turn), so that a crash can never leave the run recorded and the row unsettled. The
    drain only counts it. ``task`` is what ``do_settle_claim`` returned (None: the claim
    was no longer current)."""

    def __init__(self, task: BoardTask | None):
        self.task = task


@dataclass
class DrainReport:
    """What one drain did: counts per outcome, and the task ids it claimed in order.
    ``lost`` counts claims that were no longer current when settled (cancelled meanwhile)."""

    board_id: str
    run: str
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    errored: int = 0
    parked: int = 0
    lost: int = 0
    task_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "boardId": self.board_id,
            "run": self.run,
            "claimed": self.claimed,
            "completed": self.completed,
            "retried": self.retried,
            "errored": self.errored,
            "parked": self.parked,
            "lost": self.lost,
            "taskIds": list(self.task_ids),
        }


def do_drain_board(
    org: Organization,
    board_id: str,
    *,
    worker_key: str | None,
    run_row: Callable[[BoardTask], Any],
    run: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    max_rows: int | None = None,
) -> DrainReport:
    """Claim and run rows of ledger ``board_id`` until none is claimable (spec "Working
    the rows": the ``taskBoard`` drain a seat runs).

    For each claim, ``run_row(task)`` runs outside any claim transaction and its return
    value (JSON) becomes the row's ``output`` (completed), unless it is ``Settled``: the
    run settled the row itself. An exception fails the row
    (``"<ExceptionType>: <message>"`` as its error): it goes back to pending while
    attempts remain, else errored. ``ParkTask`` parks it. Lapsed leases on the board are
    swept first. Safe to run from several processes at once and to redeliver.

    Args:
        worker_key: the workers-map key this drain runs (claims rows assigned to it or
            unassigned); None claims any row.
        run_row: ``run_row(task) -> output``; may call ``do_extend_lease(task)``.
        run: the run id stored on each claimed row (default: a fresh ``run_…``).
        lease_seconds: how long a claim holds before it lapses, in seconds.
        max_rows: stop after this many claims (None: until the board is drained).
    """
    report = DrainReport(board_id=board_id, run=run or mint_run_id())
    do_release_lapsed_tasks(org, board_id)
    while max_rows is None or report.claimed < max_rows:
        task = do_claim_task(org, board_id, worker_key=worker_key, run=report.run, lease_seconds=lease_seconds)
        if task is None:
            break
        report.claimed += 1
        report.task_ids.append(task.task_id)
        try:
            output = run_row(task)
        except ParkTask as parked:
            settled = do_settle_claim(task, park=parked.reason)
            outcome = "parked"
        except Exception as exc:  # the row's run failed; the drain goes on
            logger.info(
                "board %s: run of %s failed (attempt %d of %d): %s: %s",
                board_id,
                task.task_id,
                task.attempts,
                task.max_attempts,
                type(exc).__name__,
                exc,
            )
            logger.debug("board %s: run of %s failed", board_id, task.task_id, exc_info=True)
            settled = do_settle_claim(task, error=f"{type(exc).__name__}: {exc}")
            outcome = "retried" if settled is not None and settled.status == S.PENDING else "errored"
        else:
            if isinstance(output, Settled):  # the run settled the row in its own transaction
                settled = output.task
                outcome = _SETTLED_OUTCOME.get(settled.status, "errored") if settled is not None else "completed"
                if settled is not None and settled.status in (S.PENDING, S.ERRORED) and settled.error:
                    # The run failed and settled its own failure: the same line as above.
                    logger.info(
                        "board %s: run of %s failed (attempt %d of %d): %s",
                        board_id,
                        task.task_id,
                        task.attempts,
                        task.max_attempts,
                        settled.error,
                    )
            else:
                settled = do_settle_claim(task, output=output)
                outcome = "completed"
        if settled is None:
            report.lost += 1
        else:
            setattr(report, outcome, getattr(report, outcome) + 1)
    return report
