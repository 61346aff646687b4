"""Claiming a row of work for one run, under a lease (every task is idempotent: the
broker redelivers).

A mailbox's delivery (``mailboxes.models.Delivery``), a coordinator's delegated post and job
(``coordinators.models.DelegatedPost``, ``Job``) are each run by whichever task claims
it first: ``claim_lease`` is one statement (an UPDATE … RETURNING) that takes a row that is pending, or
running under a lapsed lease, and has had fewer than ``max_attempts()`` claims. The
claim's token then guards everything the run writes: a run whose token no longer
matches lost its claim (``LeaseLost``) to a task that took the row over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from .holders import new_token
from .models import Lease, LeasedWork
from .runtime import Slot

# The two statuses a lease moves a row between: every LeasedWork model's ``Status``
# names both with these values.
PENDING, RUNNING = "pending", "running"

logger = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Our claim on a row lapsed and another task took it over."""


def lease_seconds() -> float:
    """How long a claim holds: the task cluster's ``timeout`` (a task is killed by then)
    plus a small margin."""
    return float(settings.Q_CLUSTER.get("timeout") or 60) + 2


def max_attempts() -> int:
    """Claims a row gets before it is given up (``settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS``)."""
    return int(settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS)


def claim_lease(model: type[LeasedWork], pk: int, *, now: datetime | None = None, stamp_started: bool = True) -> str | None:
    """Claim row ``pk`` of ``model`` for one run, in one statement.

    The row is taken when its status is ``pending``, or ``running`` with
    ``lease_until`` passed, and its ``attempts`` are below ``max_attempts()``. Taking it
    sets it ``running``, counts the attempt, stores a fresh ``claim_token`` and leases it
    for ``lease_seconds()`` from ``now``; with ``stamp_started`` it also sets
    ``started_at`` on the first claim.

    The statement is ``UPDATE … SET status='running', attempts=attempts+1,
    claim_token=…, lease_until=… WHERE id = (SELECT id … FOR UPDATE SKIP LOCKED LIMIT 1)
    RETURNING id`` on PostgreSQL: a row another transaction holds (a claim in flight, the
    holder settling) is skipped, not waited for, so a redelivered task never queues
    behind the run it duplicates. SQLite, whose writers are serialized, runs the same
    conditional UPDATE … RETURNING without the row lock. Called inside a transaction,
    the claim commits with it (``mailboxes.deliveries`` claims and starts a turn in one).

    Args:
        model: a model with ``Status.PENDING``/``Status.RUNNING`` choices on ``status``,
            and ``attempts``, ``claim_token``, ``lease_until`` (and ``started_at``) fields.
        pk: the row's primary key.
        now: the claim's time (default now).

    Returns:
        The claim token, or None when the row was not claimable (done, failed, held by a
        live claim, out of attempts, gone, or locked by another transaction right now).
    """
    token, sql, params = claim_statement(model, pk, now=now, stamp_started=stamp_started)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        claimed = cursor.fetchone()
    return token if claimed else None


def claim_statement(
    model: type[LeasedWork],
    pk: int,
    *,
    now: datetime | None = None,
    stamp_started: bool = True,
    returning: tuple[str, ...] = (),
) -> tuple[str, str, list]:
    """``(token, sql, params)`` of the statement ``claim_lease`` sends (``UPDATE …
    RETURNING`` the primary key, then the columns ``returning`` names), for a caller
    that sends it inside a statement of its own (a CTE that also reads what the claimed
    row's run needs: ``mailboxes.deliveries``). Arguments as ``claim_lease``'s."""
    token = new_token()  # the holder's process identity: released at once if it dies (workforce.holders)
    now = now or timezone.now()
    db = connection.ops
    stamp = db.adapt_datetimefield_value(now)
    table = connection.ops.quote_name(model._meta.db_table)
    pk_col = connection.ops.quote_name(model._meta.pk.column)
    sets = '"status" = %s, "attempts" = "attempts" + 1, "claim_token" = %s, "lease_until" = %s'
    set_params: list = [RUNNING, token, db.adapt_datetimefield_value(now + timedelta(seconds=lease_seconds()))]
    if stamp_started:
        sets += ', "started_at" = COALESCE("started_at", %s)'
        set_params.append(stamp)
    cond = f'{pk_col} = %s AND "attempts" < %s AND ("status" = %s OR ("status" = %s AND "lease_until" < %s))'
    cond_params = [pk, max_attempts(), PENDING, RUNNING, stamp]
    if connection.vendor == "postgresql":
        where = f"{pk_col} = (SELECT {pk_col} FROM {table} WHERE {cond} LIMIT 1 FOR UPDATE SKIP LOCKED)"
    else:
        where = cond
    returned = ", ".join([pk_col, *(connection.ops.quote_name(column) for column in returning)])
    return token, f"UPDATE {table} SET {sets} WHERE {where} RETURNING {returned}", set_params + cond_params


def renew_lease(rows: models.QuerySet[Lease], token: str, seconds: float, *, now: datetime | None = None) -> datetime | None:
    """Push the lease of the ``Lease`` row ``rows`` selects, when ``token`` still holds
    it, to ``seconds`` from ``now`` (a long run's heartbeat: a board row's
    ``do_extend_lease``). One conditional UPDATE. Returns the new ``lease_until``, or
    None when the hold is no longer ``token``'s (lapsed and taken over, settled,
    cancelled): the row is untouched then."""
    until = (now or timezone.now()) + timedelta(seconds=seconds)
    return until if rows.filter(claim_token=token).update(lease_until=until) else None


def give_back_lease(model: type[LeasedWork], pk: int, token: str) -> bool:
    """Hand claim ``token`` on row ``pk`` back untouched: the row is ``pending`` again,
    its attempt uncounted, so the next task claims it as if this one never had (a seat
    whose turn slot was taken: ``seats.turns.take_turn_slot``).

    Raises:
        LeaseLost: the claim was no longer ours.
    """
    # ``objects``: the concrete model's manager (LeasedWork declares it for the type
    # checker), whose ``status`` the abstract model does not have.
    if not model.objects.filter(pk=pk, claim_token=token, status=RUNNING).update(
        status=PENDING, attempts=F("attempts") - 1, claim_token="", lease_until=None
    ):
        raise LeaseLost()
    return True


# ----------------------------------------------------------------------------- re-enqueueing lost work
#
# The rule every sweep follows: a row of work is enqueued again only when its task is
# known lost, never merely because it is old, so a backlog in the queue never multiplies
# itself.
#
# - *Lost*: it was claimed and its lease lapsed with no enqueue since (the task running it
#   died: the cluster kills a task by its ``timeout``). Enqueued again at once, once
#   (with the ORM broker, only when the broker no longer holds its task to hand out again).
# - *Waiting*: enqueued and not yet run (pending, or lapsed and enqueued again). Its task
#   is in the queue unless the broker dropped it (Redis has no receipts). It is enqueued
#   again only when the queue is known to have passed it: a row of any registered table
#   enqueued *after* it, once and only once (``requeues == 0``), started running more
#   than ``requeue_grace_seconds()`` ago (the queue is first in, first out, and a task
#   popped before that one has finished or been killed by then), or the broker holds no
#   waiting task at all and no task started within that grace (none is on its way from
#   the workers' prefetch). And never sooner than ``requeue_delay(requeues)`` after its
#   last enqueue: ``B``, ``2B``, ``4B`` ... capped. The ORM broker hands tasks out in no
#   guaranteed order, but keeps each in its table until acknowledged: there a row the
#   queue passed is lost only when its task is no longer in that table.
#
# - Known lost at once: a claim whose holder process is gone (``workforce.holders`` lets it
#   lapse now), and, after the Redis broker lost its queue (``note_broker_lost``), a row
#   enqueued before the loss whose task is not in the broker's list.
#
# Each re-enqueue is a conditional UPDATE on ``(enqueued_at, requeues)``, so sweeps from
# several processes enqueue a row at most once per state; claims still decide who runs it.

_witnesses: dict[str, tuple[type[models.Model], str]] = {}


def register_work_table(model: type[models.Model], ran_field: str) -> None:
    """Let ``model``'s rows witness the queue's progress for every sweep.

    Args:
        model: a table of work rows with ``enqueued_at`` and ``requeues`` fields, one
            task enqueued per row (``requeues`` counts the sweeps' extra ones).
        ran_field: the datetime field set when the row's task started running (its first
            claim, ``started_at``) or, failing that, when it finished.
    """
    _witnesses[model._meta.label] = (model, ran_field)


def requeue_after_seconds() -> float:
    """``B``: the least time between a row's enqueue and its re-enqueue
    (``WORKFORCE_REQUEUE_SECONDS``, default the broker's ``Q_CLUSTER["retry"]``)."""
    default = settings.Q_CLUSTER.get("retry") or 60
    return float(settings.WORKFORCE_REQUEUE_SECONDS or default)


def requeue_cap_seconds() -> float:
    """The longest backoff between re-enqueues of one row (``WORKFORCE_REQUEUE_MAX_SECONDS``,
    default ``16 * B``)."""
    return float(settings.WORKFORCE_REQUEUE_MAX_SECONDS or 16 * requeue_after_seconds())


def requeue_delay(requeues: int) -> float:
    """Seconds a row enqueued ``requeues`` extra times waits before the next:
    ``min(B * 2**requeues, cap)``."""
    return min(requeue_after_seconds() * (2 ** min(requeues, 30)), requeue_cap_seconds())


def requeue_grace_seconds() -> float:
    """How long after the queue passed a row's task that task must have started: the
    cluster's ``timeout`` plus a margin (``lease_seconds()``)."""
    return lease_seconds()


def queue_mark(after: datetime, *, now: datetime) -> datetime | None:
    """The latest ``enqueued_at`` after ``after`` of a row enqueued once whose task started
    more than ``requeue_grace_seconds()`` before ``now``, over the registered tables: every
    task enqueued before it has run, or was dropped. None when there is none."""
    horizon = now - timedelta(seconds=requeue_grace_seconds())
    mark = None
    for model, ran_field in _witnesses.values():
        latest = model._default_manager.filter(
            requeues=0,
            enqueued_at__gt=after,
            **{f"{ran_field}__lt": horizon, f"{ran_field}__gte": F("enqueued_at")},
        ).aggregate(latest=models.Max("enqueued_at"))["latest"]
        if latest is not None and (mark is None or latest > mark):
            mark = latest
    return mark


def queue_passed(after: datetime) -> bool:
    """True when a task enqueued after ``after`` has started, in any registered table:
    the queue is first in, first out, so every task the cluster had taken from the
    broker before that one has been handed to a worker by then."""
    return any(
        model._default_manager.filter(enqueued_at__gt=after, **{f"{ran_field}__gte": F("enqueued_at")}).exists()
        for model, ran_field in _witnesses.values()
    )


def cluster_quiet(*, now: datetime) -> bool:
    """True when no task of a registered table started in the last
    ``requeue_grace_seconds()``: a task the cluster already took from the broker (its
    workers prefetch a few) would have started by then."""
    since = now - timedelta(seconds=requeue_grace_seconds())
    return not any(
        model._default_manager.filter(**{f"{ran_field}__gte": since}).exists() for model, ran_field in _witnesses.values()
    )


def orm_broker() -> bool:
    """True when the broker is django-q2's ORM one (outside sync mode): a task stays in
    its table until acknowledged, so whether one is still queued can be read there. It
    hands tasks out in no guaranteed order, so the queue having passed a row is no proof
    there."""
    from django_q.conf import Conf

    return bool(Conf.ORM) and not Conf.SYNC


def orm_queued(func: str) -> dict:
    """The first argument of every ``func`` task in the ORM broker's table (waiting or
    handed out and not yet acknowledged), each with the ids of its rows there."""
    from django_q.models import OrmQ
    from django_q.signing import SignedPackage

    queued: dict = {}
    for pk, payload in OrmQ.objects.values_list("pk", "payload").iterator():
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # not ours to judge; the cluster will refuse it
            continue
        if task.get("func") == func and task.get("args"):
            queued.setdefault(task["args"][0], []).append(pk)
    return queued


def orm_hand_out_now(ids: list[int], *, now: datetime) -> int:
    """Make the ORM broker hand its tasks ``ids`` out again now rather than after
    ``Q_CLUSTER["retry"]``: a task handed out to a worker whose claim then lapsed (the
    worker died or was killed) waits in the broker's table with its ``lock`` in the
    future. Its lock is moved to the past, and on PostgreSQL the pushers are woken. The
    task keeps its id, so nothing is enqueued twice. Returns the tasks moved."""
    from django_q.models import OrmQ

    moved = OrmQ.objects.filter(pk__in=ids, lock__gt=now).update(lock=now - timedelta(seconds=1))
    if moved and connection.vendor == "postgresql":
        from .broker import notify_pushers

        notify_pushers()
    return moved


# When this process saw the Redis broker lose its queue (``workforce.broker_watch``): a row
# enqueued before it that is still waiting, and whose task is not in the broker's list,
# is known lost.
BROKER_LOST_AT: Slot[datetime | None] = Slot("workforce.broker_lost_at", empty=lambda: None)


def note_broker_lost(at: datetime) -> None:
    """Record that the broker lost what it held before ``at`` (its queue was flushed, or
    it restarted empty); the next ``requeue_lost`` calls enqueue such rows again at once."""
    BROKER_LOST_AT.set(at)


def broker_lost_at() -> datetime | None:
    """When this process last saw the broker lose its queue (``note_broker_lost``)."""
    return BROKER_LOST_AT.get()


def broker_idle() -> bool:
    """True when the broker holds no task waiting to be handed out (a task still queued
    there cannot be the one we look for). False when the broker can't say."""
    from django_q.brokers import get_broker
    from django_q.conf import Conf

    if Conf.SYNC:
        return True  # tests: every task already ran, inline
    try:
        return get_broker().queue_size() == 0
    except Exception:
        logger.warning("could not read the task queue's size; no waiting row is taken for lost", exc_info=True)
        return False


@dataclass
class Requeue:
    """What ``requeue_lost`` enqueued: ``lost`` (a lapsed claim) and ``waiting`` (a task
    the queue passed or the broker no longer holds), by primary key."""

    lost: list[int] = field(default_factory=list)
    waiting: list[int] = field(default_factory=list)

    @property
    def all(self) -> list[int]:
        return self.lost + self.waiting


def requeue_lost(
    model: type[models.Model],
    *,
    waiting: Q,
    send: Callable[[int], None],
    lost: Q | None = None,
    task: str | None = None,
    now: datetime | None = None,
) -> Requeue:
    """Enqueue again the rows of ``model`` whose task is known lost (the rule above).

    Args:
        model: a work table with ``enqueued_at`` and ``requeues`` fields.
        waiting: selects the rows enqueued and not run since (pending; lapsed and
            enqueued again).
        lost: selects the rows claimed whose lease lapsed with no enqueue since
            (``lapsed_claim_q``); None when the table has no leases.
        send: ``send(pk)`` enqueues the row's task; called inside the transaction of
            the conditional UPDATE (``workforce.dispatch.enqueue``).
        task: the dotted path of the row's task when its first argument is the row's
            pk: with the ORM broker, whose order is not first in, first out, a row the
            queue passed is taken for lost only when no such task is in its table. None:
            with the ORM broker only an empty, quiet queue says a task was lost.
        now: the clock (tests).

    Returns:
        The rows enqueued again. Each got ``enqueued_at = now`` and ``requeues + 1``.
    """
    now = now or timezone.now()
    done = Requeue()

    def again(pk: int, enqueued_at, requeues: int, into: list[int]) -> None:
        with transaction.atomic():
            if model._default_manager.filter(pk=pk, enqueued_at=enqueued_at, requeues=requeues).update(
                enqueued_at=now, requeues=requeues + 1
            ):
                send(pk)
                into.append(pk)

    orm = orm_broker()
    queued = None
    if lost is not None:
        for pk, enqueued_at, requeues in model._default_manager.filter(lost).values_list("pk", "enqueued_at", "requeues"):
            if orm and task is not None:  # the ORM broker hands a task out again itself, if it still has it
                if queued is None:
                    queued = orm_queued(task)
                if pk in queued:
                    # Now, not after the broker's retry: its worker is gone (the claim lapsed).
                    orm_hand_out_now(queued[pk], now=now)
                    continue
            again(pk, enqueued_at, requeues, done.lost)
    due = []
    lost_at = None if orm else broker_lost_at()
    in_broker = None
    for pk, enqueued_at, requeues in model._default_manager.filter(waiting).values_list("pk", "enqueued_at", "requeues"):
        if enqueued_at is None:  # written before enqueues were stamped: nothing says it is queued
            again(pk, enqueued_at, requeues, done.waiting)
        elif lost_at is not None and enqueued_at < lost_at:
            # The broker lost its queue after this was enqueued: lost unless its task is
            # still (or again) in the broker's list.
            if in_broker is None:
                from .broker import redis_queued

                in_broker = redis_queued(task) if task is not None else set()
            if pk not in in_broker:
                again(pk, enqueued_at, requeues, done.waiting)
        elif enqueued_at <= now - timedelta(seconds=requeue_delay(requeues)):
            due.append((pk, enqueued_at, requeues))
    if not due:
        return done
    mark = None if orm and task is None else queue_mark(min(row[1] for row in due), now=now)
    idle = None
    for pk, enqueued_at, requeues in due:
        if mark is not None and enqueued_at < mark:  # the queue passed it
            if orm and task is not None:  # (with the ORM broker, a mark means a task was named)
                if queued is None:
                    queued = orm_queued(task)
                if pk in queued:
                    continue
            again(pk, enqueued_at, requeues, done.waiting)
            continue
        if idle is None:
            idle = broker_idle() and cluster_quiet(now=now)
        if idle:
            again(pk, enqueued_at, requeues, done.waiting)
    return done


def lapsed_claim_q(now: datetime) -> tuple[Q, Q]:
    """``(lost, waiting_again)`` for a leased table (``status``, ``lease_until``,
    ``attempts``, ``enqueued_at``): running with a lapsed lease and attempts left, and not
    enqueued since the lapse (lost) or enqueued since (waiting)."""
    lapsed = Q(status="running", lease_until__lt=now, attempts__lt=max_attempts())
    return (
        lapsed & (Q(enqueued_at__isnull=True) | Q(enqueued_at__lt=F("lease_until"))),
        lapsed & Q(enqueued_at__gte=F("lease_until")),
    )
