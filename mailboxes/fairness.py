"""Fair delivery scheduling (docs/architecture.md "Fair scheduling of deliveries"): a
flood of posts in one mailbox (or one organization) never starves another's.

The task queue is first in, first out, and each delivery used to be handed to it when
its post was written: 300 posts on a four-member mailbox put 1,200 tasks ahead of
everyone else's next post. Now a delivery is written **held** (``enqueued_at`` NULL, no
task) and **released** (``enqueued_at`` stamped, its ``deliver_post`` task enqueued in
the same transaction) only while

- its mailbox session has fewer than ``WORKFORCE_DELIVERY_SESSION_TASKS`` deliveries in
  flight (released and not finished: queued, running, or waiting for their seat's turn
  slot), and
- its organization has fewer than ``WORKFORCE_DELIVERY_ORG_TASKS`` in flight.

A post's deliveries are written by ``do_insert_deliveries``, whose INSERT releases each
one itself when the organization has no held delivery and the bounds have room for it
(what the release statement would pick then: the new rows, oldest first, up to that
room); only when it leaves one held does the release statement run after it.

``do_release_deliveries(org_id)`` releases what those bounds allow, in one statement,
oldest first within a session and round-robin across sessions (a held delivery's turn
is its session's deliveries in flight plus its place among the session's held ones;
lower turns go first, then older ids). It runs where a post writes its deliveries and
its INSERT left one held (in the post's transaction), where a delivery settles (in the transaction that settles it:
a finished delivery frees a place, so the next one is released with it), and in the
``deliveries`` sweep, which releases whatever a crash or a race left held with room to
run. So the queue holds at most a session's bound per busy mailbox and an
organization's bound per busy organization, and another mailbox's post waits behind
those few tasks, not behind the flood.

What stays as it was: a delivery row is the durable record (held ones are rows, so
nothing is lost when a process dies); a released delivery's task is re-enqueued by the
sweep only when it is known lost (``workforce.leases.requeue_lost``; a held delivery was
never enqueued, so it is never taken for lost); the task claims its row with a
conditional UPDATE, so a task run twice runs the turn once. A bound of 0 turns that
bound off (every delivery released at once, the old behaviour).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from workforce import rows
from workforce.dispatch import enqueue
from workforce.models import Request

from .models import Delivery

DELIVER_TASK = "mailboxes.tasks.deliver_post"
UNBOUNDED = 1_000_000_000  # a bound of 0: no bound


def session_delivery_limit() -> int:
    """Deliveries one mailbox session may have in flight (``WORKFORCE_DELIVERY_SESSION_TASKS``;
    0: no bound)."""
    return int(settings.WORKFORCE_DELIVERY_SESSION_TASKS) or UNBOUNDED


def org_delivery_limit() -> int:
    """Deliveries one organization may have in flight (``WORKFORCE_DELIVERY_ORG_TASKS``; 0: no bound)."""
    return int(settings.WORKFORCE_DELIVERY_ORG_TASKS) or UNBOUNDED


def _release_sql() -> str:
    """The release statement: ``%(org)s``, ``%(session_limit)s``, ``%(org_limit)s``,
    ``%(now)s``; returns the released ids. One statement on both databases (window
    functions, a data-modifying ``WITH`` and ``RETURNING``); on PostgreSQL the picked
    rows are locked ``SKIP LOCKED``, so two releases at once never wait on each other
    (nor deadlock): a row another transaction is releasing is left to it."""
    qn = connection.ops.quote_name
    table = qn(Delivery._meta.db_table)
    org = qn(Delivery._meta.get_field("organization").column)
    mailbox = qn(Delivery._meta.get_field("mailbox").column)
    status, enqueued = qn("status"), qn("enqueued_at")
    active = f"{status} IN ('{Delivery.Status.PENDING}', '{Delivery.Status.RUNNING}')"
    ctes = f"""
        active AS (
            SELECT "id", {mailbox} AS mailbox, CASE WHEN {enqueued} IS NULL THEN 1 ELSE 0 END AS held
            FROM {table} WHERE {org} = %(org)s AND {active}
        ),
        flying AS (SELECT mailbox, COUNT(*) AS n FROM active WHERE held = 0 GROUP BY mailbox),
        ranked AS (
            SELECT a."id", COALESCE(f.n, 0) + ROW_NUMBER() OVER (PARTITION BY a.mailbox ORDER BY a."id") AS turn
            FROM active a LEFT JOIN flying f ON f.mailbox = a.mailbox
            WHERE a.held = 1
        ),
        ordered AS (
            SELECT "id", turn, ROW_NUMBER() OVER (ORDER BY turn, "id") AS place FROM ranked WHERE turn <= %(session_limit)s
        ),
        picked AS (
            SELECT "id" FROM ordered
            WHERE place <= %(org_limit)s - (SELECT COUNT(*) FROM active WHERE held = 0)
        )"""
    if connection.vendor == "postgresql":
        ctes += f""",
        locked AS (
            SELECT "id" FROM {table}
            WHERE "id" IN (SELECT "id" FROM picked) AND {enqueued} IS NULL AND {status} = '{Delivery.Status.PENDING}'
            ORDER BY "id" FOR UPDATE SKIP LOCKED
        )"""
        chosen = "locked"
    else:
        chosen = "picked"  # SQLite: writers are serialized
    # The gate: with no held delivery in the organization (the common case: every
    # delivery is released by its own INSERT, do_insert_deliveries) the planner's
    # one-time filter is false and none of the CTEs above is run, so a settle's release
    # reads one index entry instead of every unfinished delivery of the organization.
    held = (
        f"EXISTS (SELECT 1 FROM {table} WHERE {org} = %(org)s AND {status} = '{Delivery.Status.PENDING}' AND {enqueued} IS NULL)"
    )
    return (
        f"WITH {ctes} UPDATE {table} SET {enqueued} = %(now)s "
        f'WHERE {held} AND "id" IN (SELECT "id" FROM {chosen}) AND {enqueued} IS NULL '
        f"AND {status} = '{Delivery.Status.PENDING}' "
        'RETURNING "id"'
    )


def do_release_deliveries(org_id: str, *, now=None) -> list[int]:
    """Release the held deliveries of organization ``org_id`` that its bounds allow (the
    module docstring's rule) and enqueue one ``deliver_post`` task for each, with the
    caller's transaction (``workforce.dispatch.enqueue``). Safe to call from several
    processes at once; idempotent (a released delivery is never released again).

    Args:
        org_id: the organization's id.
        now: the release time stamped as ``enqueued_at`` (default now).

    Returns:
        The released deliveries' ids, oldest first.
    """
    params: dict[str, str | int | None] = {
        "org": org_id,
        "session_limit": session_delivery_limit(),
        "org_limit": org_delivery_limit(),
        "now": connection.ops.adapt_datetimefield_value(now or timezone.now()),
    }
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        cursor.execute(_release_sql(), params)
        released = sorted(row[0] for row in cursor.fetchall())
        for pk in released:
            enqueue(DELIVER_TASK, pk)
    return released


def do_insert_deliveries(deliveries: Sequence[Delivery], *, now=None, request: Request | None = None) -> list[int]:
    """INSERT the unsaved deliveries ``deliveries`` (one mailbox session's, one post's,
    written held by ``mailboxes.notify``) in one statement per batch, each one already
    released (``enqueued_at`` stamped ``now``) when the rule allows it without a release
    statement: the organization has no held delivery and, counting the ones before it in
    the statement, the session and the organization still have room for it. Those get
    their ``deliver_post`` task with the caller's transaction, as
    ``do_release_deliveries`` does; when any is left held, ``do_release_deliveries``
    runs after (the release statement that every insert used to need), so the rule is
    the module docstring's either way: with nothing held in the organization, the
    release would have picked the new rows, oldest first, up to the same room.

    Concurrency: like the release statement, the room is read from the statement's
    snapshot, so two posts at once may each see the last place free and both release
    (the bounds can be passed by a few tasks for a moment; nothing is released twice).
    On SQLite, writers are serialized; a subquery there that already saw an earlier row
    of the same statement only counts it, which can leave a row held that the release
    statement after then releases.

    Args:
        deliveries: unsaved ``Delivery`` rows of one mailbox session (``enqueued_at``
            None); each one's primary key is set, and ``enqueued_at`` when released.
        now: the release time (default now).
        request: an unsaved Request written with them (the post's fan-out request,
            ``workforce.sessions.new_request``): on PostgreSQL by the first batch's
            statement (a CTE: one round trip fewer per post), elsewhere by its own
            INSERT after theirs; its primary key is set. Nothing is written for it
            when ``deliveries`` is empty.

    Returns:
        The released deliveries' ids (the new ones and any ``do_release_deliveries``
        released after), oldest first.

    Raises:
        IntegrityError: a constraint refused a row (the caller's transaction rolls back).
    """
    if not deliveries:
        return []
    now = now or timezone.now()
    first = deliveries[0]
    org_id, mailbox_id = first.organization_id, first.mailbox_id
    plan = rows.insert_parts(Delivery, connection.vendor, _RELEASED_AT)[2]
    size = connection.ops.bulk_batch_size([*plan.fields, Delivery._meta.get_field("enqueued_at")], [*deliveries, first])
    if size <= len(deliveries):  # a bounded backend (SQLite): a row's room for the ``room`` CTE's parameters
        size = max(1, size - 1)
    stamp = connection.ops.adapt_datetimefield_value(now)
    room = [mailbox_id, org_id, org_id, *[session_delivery_limit(), org_delivery_limit()] * 2]
    # The request rides the first batch's statement on PostgreSQL (a data-modifying CTE);
    # SQLite has none, and a statement costs it no round trip: its own INSERT below.
    carried = request if request is not None and connection.vendor == "postgresql" else None
    released: list[int] = []
    held = False
    with transaction.atomic(savepoint=False), connection.cursor() as cursor:
        for start in range(0, len(deliveries), size):
            batch = deliveries[start : start + size]
            params: list[Any] = [*room]
            if carried is not None:
                params += rows.insert_params(carried, rows.insert_parts(Request, "postgresql")[2], connection)
            for obj in batch:
                own = plan.params(obj, connection)
                params += [*own[:_RELEASED_AT_INDEX], stamp, *own[_RELEASED_AT_INDEX:]]
            cursor.execute(_insert_released_sql(connection.vendor, len(batch), carried is not None), params)
            answered = cursor.fetchall()
            if carried is not None:
                rows.mark_saved(carried, answered[0][2], connection)
                carried = None
            for obj, (pk, enqueued_at, *_) in zip(batch, answered, strict=True):
                rows.mark_saved(obj, pk, connection)
                if enqueued_at is None:
                    held = True
                else:
                    obj.enqueued_at = now
                    released.append(pk)
                    enqueue(DELIVER_TASK, pk)
        if request is not None and request.pk is None:
            rows.insert(request)
    if held:
        released.extend(do_release_deliveries(org_id, now=now))
    return sorted(released)


# The deliveries' INSERT takes ``enqueued_at`` from its own expression (``_insert_released_sql``),
# whose one parameter comes where the column's own would.
_RELEASED_AT = (("enqueued_at", "{released_at}"),)
_RELEASED_AT_INDEX = [f.attname for f in Delivery._meta.concrete_fields if f is not Delivery._meta.pk].index("enqueued_at")


@cache
def _insert_released_sql(vendor: str, count: int, carries_request: bool = False) -> str:
    """``do_insert_deliveries``' statement for ``count`` rows: a ``room`` CTE (how many
    of them may be released at once: 0 when the organization has a held delivery, else
    the lesser of the session's and the organization's free places; parameters: mailbox,
    org, org, session limit, org limit, session limit, org limit), then the INSERT,
    whose n-th row's ``enqueued_at`` is its release time (a parameter after the row's
    own) when n <= room, else NULL; ``RETURNING`` the id and ``enqueued_at``.
    ``carries_request`` (PostgreSQL): a ``req`` CTE after ``room`` INSERTs one Request
    (its values the parameters after room's), and each row returned ends with its id."""
    qn = connection.ops.quote_name
    table = qn(Delivery._meta.db_table)
    org = qn(Delivery._meta.get_field("organization").column)
    mailbox = qn(Delivery._meta.get_field("mailbox").column)
    status, enqueued = qn("status"), qn("enqueued_at")
    pending, running = Delivery.Status.PENDING, Delivery.Status.RUNNING
    cast = "CAST(%s AS timestamp with time zone)" if vendor == "postgresql" else "%s"
    columns, values, _ = rows.insert_parts(Delivery, vendor, _RELEASED_AT)
    held = f"EXISTS (SELECT 1 FROM {table} WHERE {org} = %s AND {status} = '{pending}' AND {enqueued} IS NULL)"
    room = (
        f"WITH flying AS (SELECT COALESCE(SUM(CASE WHEN {mailbox} = %s THEN 1 ELSE 0 END), 0) AS s, COUNT(*) AS o "
        f"FROM {table} WHERE {org} = %s AND {status} IN ('{pending}', '{running}') AND {enqueued} IS NOT NULL), "
        f"room AS (SELECT CASE WHEN {held} THEN 0 WHEN %s - s < %s - o THEN %s - s ELSE %s - o END AS n FROM flying)"
    )
    tuples = ", ".join(
        "(" + values.format(released_at=f"(SELECT CASE WHEN n >= {n} THEN {cast} END FROM room)") + ")"
        for n in range(1, count + 1)
    )
    carried = returned = ""
    if carries_request:  # data-modifying, so it runs once whether or not it is read
        carried = f", req AS ({rows.insert_sql(Request, vendor)})"
        returned = ", (SELECT id FROM req)"
    return f"{room}{carried} INSERT INTO {table} ({columns}) VALUES {tuples} RETURNING {qn('id')}, {enqueued}{returned}"


def do_release_held_everywhere(*, now=None) -> dict[str, list[int]]:
    """The sweep's part: ``do_release_deliveries`` for every organization that has a held
    delivery (one left held by a race between two releases, or by a process that died
    between settling a delivery and releasing the next). Returns ``{org_id: [ids]}`` of
    what it released."""
    orgs = (
        Delivery.objects.filter(status=Delivery.Status.PENDING, enqueued_at__isnull=True)
        .values_list("organization_id", flat=True)
        .distinct()
    )
    released = {}
    for org_id in list(orgs):
        ids = do_release_deliveries(org_id, now=now)
        if ids:
            released[org_id] = ids
    return released


__all__ = [
    "do_insert_deliveries",
    "do_release_deliveries",
    "do_release_held_everywhere",
    "session_delivery_limit",
    "org_delivery_limit",
]
