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
  trip, and the write transaction is already serialized).

Both take their column lists from the models (``workforce.rows.insert_parts``).

The streams are told of the item: on PostgreSQL by the same statement
(``pg_notify`` in its last SELECT, queued in the post's transaction and delivered
by PostgreSQL when it commits, dropped when it rolls back: no round trip and no
transaction of its own), as ``workforce.sessions.emit_item`` tells of every other item;
on SQLite, whose streams poll, by nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from workforce import rows
from workforce.models import Item, Request, Session
from workforce.sessions import ActionContext
from workforce.streams import CARRIED_COLUMNS, carried_note_sql
from workforce.streams import CHANNEL as STREAM_CHANNEL

from .models import Line, RouteLedger

POST_ITEM = "mailbox-post"

_LINE_SEQ = (("seq", "counters.line_seq"),)
_ITEM_SEQ = (("seq", "counters.item_seq"),)
_COUNTERS = (
    f"UPDATE {rows.quote(Session._meta.db_table)} SET item_seq = item_seq + 1, line_seq = line_seq + 1 "
    "WHERE id = %s RETURNING item_seq, line_seq"
)


@dataclass
class LedgerAppend:
    """The route ledger's append, written by the line's statement on PostgreSQL
    (``mailboxes.routing.MailboxRoute.ledger_append`` makes it, ``record_line`` reads it).

    ``entry``: the line's ledger entry without its ``seq`` (the statement adds the
    number it hands out); ``keep``: how many entries the ledger keeps; ``client``: the
    line is a client post (the ledger's ``last_post`` becomes it); ``recent``: the
    statement also answers the ledger's lines and last post as they were (the routed
    path's ``record_line`` result). ``appended`` is set by ``insert_line``: ``(lines
    before the line, last client post's pk)`` when the ledger was appended to, None when
    there was none or the line did not follow its last (the caller starts it afresh)."""

    entry: dict
    keep: int
    client: bool
    recent: bool = False
    appended: tuple[list[dict], int | None] | None = None


# The ledger's append as two more CTEs: ``ledger_old`` reads its row as it was (one
# snapshot for the whole statement), ``ledger`` appends the entry (with the line's seq
# from ``counters``) and keeps the last ``keep``, only when the line follows the last
# one recorded; the last post becomes the line's pk (``line``) for a client post.
_LEDGER_CTES = (
    ', ledger_old AS (SELECT "lines", "last_seq", "last_post_id" FROM {table} WHERE "session_id" = %s), '
    "ledger AS (UPDATE {table} AS l SET "
    "\"lines\" = (SELECT COALESCE(jsonb_agg(t.e ORDER BY t.o), '[]'::jsonb) "
    "FROM jsonb_array_elements(ledger_old.\"lines\" || jsonb_build_array(%s::jsonb || jsonb_build_object('seq', counters.line_seq))) "
    'WITH ORDINALITY AS t(e, o) WHERE t.o > jsonb_array_length(ledger_old."lines") + 1 - %s), '
    '"last_seq" = counters.line_seq, '
    '"last_post_id" = CASE WHEN %s THEN line.id ELSE ledger_old."last_post_id" END, '
    '"updated_at" = %s '
    "FROM ledger_old, counters, line "
    'WHERE l."session_id" = %s AND ledger_old."last_seq" = counters.line_seq - 1 RETURNING 1)'
)


@cache
def _postgresql_sql(carries_request: bool = False, appends_ledger: bool = False, returns_recent: bool = False) -> str:
    """The post's one statement on PostgreSQL. The counters' UPDATE locks nothing new (the
    session's row lock is held) and hands out both numbers; the line and the item take
    them from it; ``{settle}`` is the request's completion when the handler asked for it
    (``ActionContext.completion_statement``). ``carries_request``: a ``req`` CTE after
    it INSERTs one Request (its values the parameters after settle's), and the answer
    ends with its id. ``appends_ledger``: the route ledger's append (``_LEDGER_CTES``,
    its parameters after the request's), and the answer ends with whether it wrote;
    ``returns_recent``: then also the ledger's lines and last post as they were."""
    line_columns, line_values, _ = rows.insert_parts(Line, "postgresql", _LINE_SEQ)
    item_columns, item_values, _ = rows.insert_parts(Item, "postgresql", _ITEM_SEQ)
    return (
        f"WITH counters AS ({_COUNTERS}), "
        f"line AS (INSERT INTO {rows.quote(Line._meta.db_table)} ({line_columns}) "
        f"SELECT {line_values} FROM counters RETURNING id), "
        f"item AS (INSERT INTO {rows.quote(Item._meta.db_table)} ({item_columns}) SELECT {item_values} FROM counters "
        f"RETURNING {CARRIED_COLUMNS})"
        "{settle}"
        + (f", req AS ({rows.insert_sql(Request, 'postgresql')})" if carries_request else "")
        + (_LEDGER_CTES.format(table=rows.quote(RouteLedger._meta.db_table)) if appends_ledger else "")
        + f" SELECT line.id, counters.line_seq, counters.item_seq, pg_notify(%s, %s || {carried_note_sql('item')})"
        + (", (SELECT id FROM req)" if carries_request else "")
        + (", EXISTS (SELECT 1 FROM ledger)" if appends_ledger else "")
        + (', (SELECT "lines" FROM ledger_old), (SELECT "last_post_id" FROM ledger_old)' if returns_recent else "")
        + " FROM line, counters, item"
    )


def _item_values(ctx: ActionContext, wire: dict) -> dict[str, Any]:
    # By id, and no instance: the item is only written, never read back here.
    return {"session_id": ctx.session.pk, "request_id": ctx.request.pk, "type": "component", "component": POST_ITEM, "data": wire}


def insert_line(
    ctx: ActionContext,
    line: Line,
    *,
    settle: bool = False,
    request: Request | None = None,
    ledger: LedgerAppend | None = None,
) -> int:
    """Write ``line`` (not saved yet: ``seq`` and ``pk`` unset) and its ``mailbox-post``
    item (``line.as_wire()``, by ``ctx.request``) on the locked mailbox ``ctx.session``.

    Sets ``line.seq`` (the session's next line number) and ``line.pk``; returns the
    item's ``seq``. Must run inside the post's transaction with the session's row lock
    held (``ctx.lock_session()``), which is what makes both numbers gap-free.

    ``settle``: the action answers ``line.as_wire()``; on PostgreSQL the same statement
    completes ``ctx.request`` with it (``ActionContext.completion_statement``), so the
    post's last write is this one.

    ``request``: an unsaved Request written with the line (a post's fan-out request
    when the fan-out writes no delivery: ``mailboxes.notify.plan_fan_out``): on
    PostgreSQL by the same statement (a CTE), elsewhere by its own INSERT after the
    line's; its primary key is set.

    ``ledger``: PostgreSQL only, the route ledger's append written by the same statement
    (``LedgerAppend``; its ``appended`` is set). Not written elsewhere: the caller keeps
    the ledger itself (``mailboxes.routing.record_line``).

    Raises:
        IntegrityError: ``line.answer_to`` already has an answer (a unique constraint;
            call inside a savepoint when that can happen).
    """
    conn = connections[DEFAULT_DB_ALIAS]  # once: each use of the ``connection`` proxy is a context-local lookup
    if conn.vendor == "postgresql":
        return _insert_postgresql(conn, ctx, line, settle=settle, request=request, ledger=ledger)  # and its NOTIFY
    item_seq = _insert_sqlite(conn, ctx, line)
    if request is not None:
        rows.insert(request)
    return item_seq


def _insert_postgresql(
    conn: BaseDatabaseWrapper,
    ctx: ActionContext,
    line: Line,
    *,
    settle: bool,
    request: Request | None = None,
    ledger: LedgerAppend | None = None,
) -> int:
    session = ctx.session.pk
    wire = line.as_wire()
    params = [
        session,
        *rows.insert_parts(Line, "postgresql", _LINE_SEQ)[2].params(line, conn),
        *rows.insert_parts(Item, "postgresql", _ITEM_SEQ)[2].values(_item_values(ctx, wire), conn),
    ]
    settle_cte = ""
    if settle:
        completion, completion_params = ctx.completion_statement(wire, conn)
        settle_cte = f", settled AS ({completion})"
        params += completion_params
    if request is not None:
        params += rows.insert_parts(Request, "postgresql")[2].params(request, conn)
    if ledger is not None:
        params += [session, json.dumps(ledger.entry), ledger.keep, ledger.client, timezone.now(), session]
    params += [STREAM_CHANNEL, f"{session}:"]  # the streams' note: "<session pk>:<item seq>[:<item>]"
    sql = _postgresql_sql(request is not None, ledger is not None, ledger is not None and ledger.recent)
    with conn.cursor() as cursor:
        cursor.execute(sql.format(settle=settle_cte), params)
        line_pk, line.seq, item_seq, _, *carried = cursor.fetchone()
    rows.mark_saved(line, line_pk, conn)
    if request is not None:
        rows.mark_saved(request, carried.pop(0), conn)
    if ledger is not None and carried.pop(0):
        recent: list[dict] = []
        previous_id = None
        if ledger.recent:
            recent, previous_id = carried
            if isinstance(recent, str | bytes):  # jsonb handed back as text
                recent = json.loads(recent)
            recent = list(recent)[-ledger.keep :]
        ledger.appended = (recent, previous_id)
    return item_seq


def _insert_sqlite(conn: BaseDatabaseWrapper, ctx: ActionContext, line: Line) -> int:
    # One cursor for the three statements: a cursor each costs more than a statement here.
    with conn.cursor() as cursor:
        cursor.execute(_COUNTERS, [ctx.session.pk])
        item_seq, line.seq = cursor.fetchone()
        cursor.execute(rows.insert_sql(Line, "sqlite"), rows.insert_parts(Line, "sqlite")[2].params(line, conn))
        (line_pk,) = cursor.fetchone()
        item = _item_values(ctx, line.as_wire())
        item["seq"] = item_seq
        cursor.execute(rows.insert_sql(Item, "sqlite"), rows.insert_parts(Item, "sqlite")[2].values(item, conn))
    rows.mark_saved(line, line_pk, conn)
    return item_seq
