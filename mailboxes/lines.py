"""Writing one transcript line and its ``mailbox-post`` item: the post's hot path
(docs/architecture.md "A post end to end").

``do_post_line`` holds the mailbox session's row lock when it calls ``insert_line``.
One locked row gives both numbers: ``UPDATE workforce_session SET item_seq = item_seq
+ 1, line_seq = line_seq + 1 ... RETURNING`` increments the session's item counter and
its line counter at once, so the line's ``seq`` is gap-free per mailbox and the item's
per session, in the order the posts commit (the lock is held to the commit). Nothing
that was just written is read back: the line's id and the numbers come back from the
write itself.

One function per database:

- PostgreSQL (``_insert_postgresql``): one statement, a CTE that bumps the counters,
  inserts the line and inserts the item (a round trip is most of a statement's cost
  there);
- SQLite (``_insert_sqlite``, 3.35 or newer for ``RETURNING``): the same three writes
  as three statements (SQLite has no data-modifying CTE; a statement costs no round
  trip, and the write transaction is already serialized);
- any other database: the ORM (``_insert_orm``).

The streams are told of the item: on PostgreSQL by the same statement
(``pg_notify`` in its last SELECT, queued in the post's transaction and delivered
by PostgreSQL when it commits, dropped when it rolls back: no round trip and no
transaction of its own, where the after-commit ``NOTIFY`` of
``workforce.streams.note_item_stored`` cost both); on SQLite, whose streams poll, by
nothing.
"""

from __future__ import annotations

import json

from django.db import connection
from django.db.models import F
from django.utils import timezone

from workforce.models import Item, Session
from workforce.sessions import ActionContext, emit_item
from workforce.streams import CHANNEL as STREAM_CHANNEL

from .models import Line

POST_ITEM = "mailbox-post"

_SESSION = Session._meta.db_table
_LINE = Line._meta.db_table
_ITEM = Item._meta.db_table

_LINE_COLUMNS = "session_id, seq, line_id, at, principal, author, seat_authored, body, request_id, answer_to_id, posted_by"
_ITEM_COLUMNS = "session_id, request_id, seq, type, component, data, created_at"

# The counters' UPDATE locks nothing new (the session's row lock is held) and hands out
# both numbers; the line and the item take them from it; ``{settle}`` is the request's
# completion when the handler asked for it (``ActionContext.completion_statement``).
_POSTGRESQL = f"""
WITH counters AS (
    UPDATE "{_SESSION}" SET item_seq = item_seq + 1, line_seq = line_seq + 1
    WHERE id = %s
    RETURNING item_seq, line_seq
), line AS (
    INSERT INTO "{_LINE}" ({_LINE_COLUMNS})
    SELECT %s, counters.line_seq, %s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb
    FROM counters
    RETURNING id
), item AS (
    INSERT INTO "{_ITEM}" ({_ITEM_COLUMNS})
    SELECT %s, %s, counters.item_seq, 'component', %s, %s::jsonb, %s
    FROM counters
){{settle}}
SELECT line.id, counters.line_seq, counters.item_seq, pg_notify(%s, %s || counters.item_seq::text) FROM line, counters
"""

_SQLITE_COUNTERS = (
    f'UPDATE "{_SESSION}" SET item_seq = item_seq + 1, line_seq = line_seq + 1 WHERE id = %s RETURNING item_seq, line_seq'
)
_SQLITE_LINE = f'INSERT INTO "{_LINE}" ({_LINE_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id'
_SQLITE_ITEM = f'INSERT INTO "{_ITEM}" ({_ITEM_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)'


def insert_line(ctx: ActionContext, line: Line, *, settle: bool = False) -> int:
    """Write ``line`` (not saved yet: ``seq`` and ``pk`` unset) and its ``mailbox-post``
    item (``line.as_wire()``, by ``ctx.request``) on the locked mailbox ``ctx.session``.

    Sets ``line.seq`` (the session's next line number) and ``line.pk``; returns the
    item's ``seq``. Must run inside the post's transaction with the session's row lock
    held (``ctx.lock_session()``), which is what makes both numbers gap-free.

    ``settle``: the action answers ``line.as_wire()``; on PostgreSQL the same statement
    completes ``ctx.request`` with it (``ActionContext.completion_statement``), so the
    post's last write is this one.

    Raises:
        IntegrityError: ``line.answer_to`` already has an answer (a unique constraint;
            call inside a savepoint when that can happen).
    """
    vendor = connection.vendor
    if vendor == "postgresql":
        line_pk, line_seq, item_seq = _insert_postgresql(ctx, line, settle=settle)  # and its NOTIFY
    elif vendor == "sqlite":
        line_pk, line_seq, item_seq = _insert_sqlite(ctx, line)
    else:
        return _insert_orm(ctx, line)
    line.pk, line.seq = line_pk, line_seq
    line._state.adding = False
    return item_seq


def _insert_postgresql(ctx: ActionContext, line: Line, *, settle: bool) -> tuple[int, int, int]:
    session, request = ctx.session.pk, ctx.request.pk
    wire = line.as_wire()
    params = [
        session,
        *(session, line.line_id, line.at, line.principal, line.author, line.seat_authored, line.body, request),
        line.answer_to_id,
        _json_or_null(line.posted_by),
        *(session, request, POST_ITEM, json.dumps(wire), timezone.now()),
    ]
    settle_cte = ""
    if settle:
        completion, completion_params = ctx.completion_statement(wire)
        settle_cte = f", settled AS ({completion})"
        params += completion_params
    params += [STREAM_CHANNEL, f"{session}:"]  # the streams' note: "<session pk>:<item seq>"
    with connection.cursor() as cursor:
        cursor.execute(_POSTGRESQL.format(settle=settle_cte), params)
        line_pk, line_seq, item_seq, _ = cursor.fetchone()
    return line_pk, line_seq, item_seq


def _insert_sqlite(ctx: ActionContext, line: Line) -> tuple[int, int, int]:
    session, request = ctx.session.pk, ctx.request.pk
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(_SQLITE_COUNTERS, [session])
        item_seq, line_seq = cursor.fetchone()
        cursor.execute(
            _SQLITE_LINE,
            [
                session,
                line_seq,
                line.line_id,
                line.at,
                line.principal,
                line.author,
                line.seat_authored,
                line.body,
                request,
                line.answer_to_id,
                _json_or_null(line.posted_by),
            ],
        )
        (line_pk,) = cursor.fetchone()
        cursor.execute(_SQLITE_ITEM, [session, request, item_seq, "component", POST_ITEM, json.dumps(line.as_wire()), now])
    return line_pk, line_seq, item_seq


def _json_or_null(value: object) -> str | None:
    """A JSON column's parameter (``Line.posted_by``): its JSON text, or SQL NULL for None."""
    return None if value is None else json.dumps(value)


def _insert_orm(ctx: ActionContext, line: Line) -> int:
    Session.objects.filter(pk=ctx.session.pk).update(line_seq=F("line_seq") + 1)
    line.seq = Session.objects.filter(pk=ctx.session.pk).values_list("line_seq", flat=True).get()
    line.save(force_insert=True)
    return emit_item(ctx.session, POST_ITEM, line.as_wire(), request=ctx.request).seq
