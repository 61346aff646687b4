"""Claiming, settling and leases, and the drain (spec "Working the rows": the
``taskBoard`` drain a seat runs).

On PostgreSQL a claim is one statement: the best claimable row is read ``FOR UPDATE SKIP
LOCKED`` (concurrent drainers skip each other's rows instead of queueing on them),
claimed, and its change records written, in one ``UPDATE … RETURNING`` with CTEs
(``_CLAIM_SQL``). Elsewhere (SQLite) the candidate is read and the UPDATE is conditional
on the row still being as read, so exactly one claimer wins on any database. Settling
only counts for the current claim (its ``claim_token``). The drain claims the next row in
the same call until none is left or its ``max_rows``/``max_seconds`` bound stops it.
"""

from __future__ import annotations

import functools
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from workforce import rows as row_sql
from workforce.holders import new_token
from workforce.leases import renew_lease
from workforce.models import Organization
from workforce.refusals import failure_text

from ..models import MAX_ABANDONMENTS, BoardTask, TaskChange, TaskStatus
from ..queries import claim_sort_key, claimable_lapsed, claimable_pending, list_lapsed_tasks
from .rows import _apply, _fail_decision, _record

logger = logging.getLogger(__name__)

S = TaskStatus
K = TaskChange.Kind

DEFAULT_LEASE_SECONDS = 300
_SETTLED_OUTCOME: dict[str, str] = {S.COMPLETED: "completed", S.PENDING: "retried", S.ERRORED: "errored", S.PARKED: "parked"}
_CLAIM_RETRIES = 64


def mint_run_id() -> str:
    """A fresh run id (``run_`` and 16 hex digits) for a drain that was given none."""
    return f"run_{secrets.token_hex(8)}"


def _mint_claim_token() -> str:
    # The holder's process identity and 12 random digits (workforce.holders): a drain
    # that dies lets go of its row at once.
    return new_token()


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
    settle it with ``do_settle_claim``), and records a ``claimed`` change. Exactly one
    claimer wins a row.

    On PostgreSQL the claim is one statement (``_claim_in_one_statement``): the candidate
    is read ``FOR UPDATE SKIP LOCKED`` and updated, and its change records written, in
    the same ``UPDATE … RETURNING`` (one round trip, its own transaction when the caller
    has none). Elsewhere (SQLite has no row locks) the candidate is read, then the UPDATE
    is conditional on the row still being as read, and a lost race reads again.

    A lapsed row counts an abandonment first (``abandoned``): on its third, or when it has
    no attempts left, it is errored and the next row is tried.

    Args:
        worker_key: the key this drain runs rows for (None: any row).
        run: the run working the row (``run`` on the wire); lease_seconds: seconds.
        now: the clock (tests).

    Returns:
        The claimed row (status in_progress), or None when nothing is claimable.
    """
    features = connection.features
    if connection.vendor == "postgresql" and features.has_select_for_update_skip_locked:
        return _claim_in_one_statement(org, board_id, worker_key=worker_key, run=run, lease_seconds=lease_seconds, now=now)
    return _claim_read_then_update(org, board_id, worker_key=worker_key, run=run, lease_seconds=lease_seconds, now=now)


def _claim_read_then_update(
    org: Organization,
    board_id: str,
    *,
    worker_key: str | None,
    run: str | None,
    lease_seconds: float,
    now: datetime | None,
) -> BoardTask | None:
    """``do_claim_task`` where a claim can't be one locked statement (SQLite): read the
    best candidate of the lapsed and the pending rows (``FOR UPDATE SKIP LOCKED`` where
    the database has it), then an UPDATE conditional on the row still being as read,
    then the change records, in one transaction per attempt."""
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
                lease_until=at + timedelta(seconds=lease_seconds),
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


# The candidate columns the one-statement claim reads from each locked candidate.
_CANDIDATE_COLUMNS = ("id", "priority", "created_at", "status", "attempts", "max_attempts", "abandonments", "claimed_by")


def _locked_candidate_sql(qs) -> tuple[str, tuple]:
    """``qs`` (a claimable query in claim order, ``boards.queries``) as the SQL of its
    first row's candidate columns, ``… ORDER BY … LIMIT 1 FOR UPDATE SKIP LOCKED``.

    The SQL is compiled from the queryset, so what is claimable is defined once
    (``claimable_pending``, ``claimable_lapsed``); the lock clause is appended as text
    because Django's compiler refuses ``select_for_update`` outside a transaction, and
    the statement it goes into is its own transaction. The outer query reads only
    ``boards_boardtask`` (the deps check is a subquery), so only the candidate is locked.
    """
    sql, params = qs.values(*_CANDIDATE_COLUMNS)[:1].query.sql_with_params()
    return f"{sql} FOR UPDATE SKIP LOCKED", tuple(params)


class _Arg(str):
    """A placeholder in a compiled candidate query's parameters, named for the value a
    claim puts there (``org``, ``board``, ``key``, ``now``)."""


# Values no real claim uses, compiled into the candidate queries once and found again in
# their parameters by equality (see _claim_sql_for).
_ORG, _BOARD, _KEY = "\x00org\x00", "\x00board\x00", "\x00key\x00"
_NOW = datetime(1999, 12, 31, 23, 59, 58, 987654, tzinfo=UTC)


@functools.lru_cache(maxsize=8)
def _compiled_claim(
    keyed: bool, lapsed_query: Callable, pending_query: Callable, candidate_sql: Callable, template: str
) -> tuple[str, tuple]:
    """The one claim statement with its candidate queries compiled (Django's compile
    costs more than the statement itself): ``(sql, params)`` whose parameters are the
    values of any claim, or an ``_Arg`` naming what a claim puts there. One entry per
    shape (with or without a worker key) and per definition of the candidate queries,
    their locking and the statement around them (``template``)."""
    org = Organization(pk=_ORG)
    key = _KEY if keyed else None
    lapsed_sql, lapsed_params = candidate_sql(lapsed_query(org, _BOARD, now=_NOW, worker_key=key))
    pending_sql, pending_params = candidate_sql(pending_query(org, _BOARD, worker_key=key))
    names = {_ORG: "org", _BOARD: "board", _KEY: "key"}

    def slot(value):
        if isinstance(value, str) and value in names:
            return _Arg(names[value])
        if isinstance(value, datetime) and value == _NOW:
            return _Arg("now")
        return value

    sql = template.format(
        lapsed=lapsed_sql,
        pending=pending_sql,
        returning=row_sql.select_columns(BoardTask, "t"),
        claimed_columns=row_sql.select_columns(BoardTask, "c"),
        tasks=row_sql.quote(BoardTask._meta.db_table),
        changes=row_sql.quote(TaskChange._meta.db_table),
    )
    return sql, tuple(slot(v) for v in (*lapsed_params, *pending_params))


def _claim_sql_for(org: Organization, board_id: str, *, worker_key: str | None, at: datetime) -> tuple[str, list]:
    """The claim statement for this claim and its candidate queries' parameters (the
    claim's own values follow them, see ``_claim_in_one_statement``)."""
    sql, template = _compiled_claim(
        worker_key is not None, claimable_lapsed, claimable_pending, _locked_candidate_sql, _CLAIM_SQL
    )
    values = {"org": org.pk, "board": board_id, "key": worker_key, "now": at}
    return sql, [values[p] if isinstance(p, _Arg) else p for p in template]


# One claim, one statement (PostgreSQL). {lapsed} and {pending} are the two candidate
# queries (``_locked_candidate_sql``); ``lapsed`` and ``pending`` lock the first row of
# each (SKIP LOCKED: a row another claimer holds is passed over, never waited on).
# ``pick`` takes the better of the two in claim order and says whether it is a lapsed
# row on its last abandonment or attempt (``doomed``: the caller errors it instead, see
# ``_abandon_fields``). ``claimed`` is the claim; its guard on status and attempts is the
# same as the read-then-update path's, and cannot fail while the row is locked.
# ``changes`` writes the ``abandoned`` record (a lapsed row) and then the ``claimed``
# one. The result is one row when there was a candidate (its id, ``doomed``, then the
# claimed row's columns, NULL when it was not claimed) and no row when nothing is
# claimable.
_CLAIM_SQL = """
WITH lapsed AS MATERIALIZED ({lapsed}),
pending AS MATERIALIZED ({pending}),
pick AS (
    SELECT c.*, (c.status = 'in_progress' AND (c.abandonments + 1 >= %s OR c.attempts >= c.max_attempts)) AS doomed
    FROM (SELECT * FROM lapsed UNION ALL SELECT * FROM pending) AS c
    ORDER BY COALESCE(c.priority, 0) DESC, c.created_at, c.id
    LIMIT 1
),
claimed AS (
    UPDATE {tasks} AS t SET
        status = 'in_progress',
        attempts = t.attempts + 1,
        abandonments = t.abandonments + (CASE WHEN p.status = 'in_progress' THEN 1 ELSE 0 END),
        lease_until = %s,
        claim_token = %s,
        claimed_by = %s,
        started_at = %s,
        run = %s,
        updated_at = %s
    FROM pick AS p
    WHERE t.id = p.id AND t.status = p.status AND t.attempts = p.attempts AND NOT p.doomed
    RETURNING {returning}, p.status AS was_status, p.claimed_by AS was_claimed_by
),
changes AS (
    INSERT INTO {changes} (task_id, organization_id, board_id, kind, from_status, to_status, actor, run, data, at)
    SELECT c.id, c.organization_id, c.board_id, e.kind, e.from_status, e.to_status, e.actor, c.run, e.data, %s
    FROM claimed AS c
    CROSS JOIN LATERAL (
        VALUES
            (1, 'abandoned', 'in_progress', 'pending', 'lease',
             jsonb_build_object('abandonments', c.abandonments, 'claimedBy', c.was_claimed_by),
             c.was_status = 'in_progress'),
            (2, 'claimed', 'pending', 'in_progress', %s::varchar, jsonb_build_object('attempt', c.attempts), TRUE)
    ) AS e (ord, kind, from_status, to_status, actor, data, wanted)
    WHERE e.wanted
    ORDER BY e.ord
)
SELECT p.id, p.doomed, {claimed_columns} FROM pick AS p LEFT JOIN claimed AS c ON c.id = p.id
"""


def _claim_in_one_statement(
    org: Organization,
    board_id: str,
    *,
    worker_key: str | None,
    run: str | None,
    lease_seconds: float,
    now: datetime | None,
) -> BoardTask | None:
    """``do_claim_task`` on PostgreSQL: one ``UPDATE … WHERE id = (the best of the two
    locked candidates) RETURNING …`` with its change records in the same statement
    (``_CLAIM_SQL``), run without a transaction of its own, so it is one round trip and
    commits by itself when the caller holds no transaction.

    A doomed lapsed row (its third abandonment, or no attempts left) is errored by
    ``_release`` in its own short transaction, as the other path does, and the claim
    goes on to the next row; a lost guard (which the row lock rules out) tries again.
    """
    lost = 0
    while lost < _CLAIM_RETRIES:
        at = now or timezone.now()
        sql, candidate_params = _claim_sql_for(org, board_id, worker_key=worker_key, at=at)
        params = (
            *candidate_params,
            MAX_ABANDONMENTS,
            at + timedelta(seconds=lease_seconds),
            _mint_claim_token(),
            worker_key,
            at,
            run,
            at,
            timezone.now(),
            worker_key,
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            row = cursor.fetchone()
        if row is None:
            return None
        pk, doomed, *task_columns = row
        if task_columns[0] is not None:
            return row_sql.instance(BoardTask, task_columns)
        if doomed:
            with transaction.atomic():
                task = BoardTask.objects.filter(pk=pk, status=S.IN_PROGRESS, lease_until__lt=at).first()
                if task is not None and not _release(task, at):
                    lost += 1
            continue
        lost += 1  # pragma: no cover - the candidate is locked until the UPDATE
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
    expires = renew_lease(BoardTask.objects.filter(pk=task.pk, status=S.IN_PROGRESS), task.claim_token or "", lease_seconds)
    if expires is not None:
        task.lease_until = expires
    return expires is not None


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
    ``lost`` counts claims that were no longer current when settled (cancelled meanwhile);
    ``drained`` is True when it stopped because nothing was claimable (False: its
    ``max_rows`` or ``max_seconds`` stopped it, and rows may remain)."""

    board_id: str
    run: str
    claimed: int = 0
    completed: int = 0
    retried: int = 0
    errored: int = 0
    parked: int = 0
    lost: int = 0
    task_ids: list[str] = field(default_factory=list)
    drained: bool = False

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
            "drained": self.drained,
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
    max_seconds: float | None = None,
) -> DrainReport:
    """Claim and run rows of ledger ``board_id`` until none is claimable (spec "Working
    the rows": the ``taskBoard`` drain a seat runs), or until a bound stops it.

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
        max_seconds: claim no further row once this many seconds have passed since the
            drain began (None: no time bound); a row already claimed is run to its end.

    ``DrainReport.drained`` says whether the drain stopped because nothing was left to
    claim (False: a bound stopped it, and rows may remain).
    """
    report = DrainReport(board_id=board_id, run=run or mint_run_id())
    started = time.monotonic()
    do_release_lapsed_tasks(org, board_id)
    while max_rows is None or report.claimed < max_rows:
        if max_seconds is not None and report.claimed and time.monotonic() - started >= max_seconds:
            break
        task = do_claim_task(org, board_id, worker_key=worker_key, run=report.run, lease_seconds=lease_seconds)
        if task is None:
            report.drained = True
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
            settled = do_settle_claim(task, error=failure_text(exc))
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
