"""Reads of seats and their conversations (``access_*`` raise, ``list_*`` return what
there is)."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from workforce.models import Item, Organization, Request, Session
from workforce.prepared import Prepared
from workforce.refusals import Refusal
from workforce.sessions import history_window

from .constants import NOT_ON_ROSTER, no_worker_on_roster
from .models import Seat

SCOPE_ORDER: dict[str, int] = {Seat.Scope.OWN: 0, Seat.Scope.ORG: 1, Seat.Scope.SHARED: 2}
MESSAGE_ITEM = "message"


def _reaches(seat: Seat, *, org_id: str, user_id: str) -> bool:
    if seat.scope == Seat.Scope.SHARED:
        return True
    if seat.organization_id != org_id:
        return False
    return seat.scope == Seat.Scope.ORG or seat.owner_user_id == user_id


def reachable_rows(org_id: str, user_id: str) -> QuerySet[Seat]:
    """Every seat row ``user_id`` in organization ``org_id`` may reach: the shared
    seats, the organization's and the user's own (several rows may share one seat id;
    ``reachable_seats`` picks the one that wins)."""
    return Seat.objects.filter(
        Q(scope=Seat.Scope.SHARED)
        | Q(organization_id=org_id, scope=Seat.Scope.ORG)
        | Q(organization_id=org_id, scope=Seat.Scope.OWN, owner_user_id=user_id)
    )


def reachable_seats(
    org_id: str, user_id: str, seat_ids: Iterable[str], *, among: Iterable[Seat] | None = None
) -> dict[str, Seat]:
    """The scope rule (spec "Waking agent seats"): ``{seat id: seat}`` for each of
    ``seat_ids`` that ``user_id`` in organization ``org_id`` reaches, their own seat
    first, then their organization's, then a shared one. A seat nobody hired, another
    user's or another organization's, or one that was fired is absent.

    Args:
        among: the seats to choose from (the hired seats a notify block or a route was
            built with); None reads the hired seats, in one query.
    """
    wanted = set(seat_ids)
    if not wanted:
        return {}
    if among is None:
        among = reachable_rows(org_id, user_id).filter(seat_id__in=wanted)
    found: dict[str, Seat] = {}
    for seat in among:
        if seat.seat_id not in wanted or not _reaches(seat, org_id=org_id, user_id=user_id):
            continue
        best = found.get(seat.seat_id)
        if best is None or SCOPE_ORDER[seat.scope] < SCOPE_ORDER[best.scope]:
            found[seat.seat_id] = seat
    return found


def fired_seats(seats: Iterable[Seat]) -> set[int]:
    """The primary keys of ``seats`` whose rows are gone: a person's own (or the
    organization's) seat fired since the list was read (spec "Waking agent seats": a
    process holds the seats it was handed at start). A standard (shared) seat is the
    tree's and is never fired while the app runs, so a list of those costs no query;
    otherwise one query."""
    candidates = {seat.pk for seat in seats if seat.scope != Seat.Scope.SHARED and seat.pk is not None}
    if not candidates:
        return set()
    return candidates - set(Seat.objects.filter(pk__in=candidates).values_list("pk", flat=True))


def access_seat(org: Organization, user_id: str, seat_id: str) -> Seat:
    """The seat ``seat_id`` as ``user_id`` in ``org`` reaches it (``reachable_seats``).

    Raises:
        Refusal("seat-not-found"): no reachable seat has that id (another user's or
            organization's seat is not found either).
    """
    seat = reachable_seats(org.pk, user_id, [seat_id]).get(seat_id)
    if seat is None:
        raise Refusal("seat-not-found", f'No worker "{seat_id}" on your roster.')
    return seat


def access_worker(org: Organization, user_id: str, worker_id: str) -> Seat:
    """The worker ``worker_id`` on ``user_id``'s roster in ``org`` (``reachable_seats``):
    their own, else the organization's, else a standard one.

    Raises:
        Refusal("worker-not-on-roster"): 404, ``No worker "<id>" on your roster.`` for
            one nobody holds, another user's, or another organization's (spec 004 "Who can
            be a delegate", "What it won't do": the same answer as a worker that doesn't
            exist).
    """
    seat = reachable_seats(org.pk, user_id, [worker_id]).get(worker_id)
    if seat is None:
        raise Refusal(NOT_ON_ROSTER, no_worker_on_roster(worker_id))
    return seat


def own_worker(org: Organization, user_id: str, worker_id: str) -> Seat | None:
    """``user_id``'s own worker ``worker_id`` in ``org``, or None."""
    return Seat.objects.filter(scope=Seat.Scope.OWN, organization=org, owner_user_id=user_id, seat_id=worker_id).first()


def list_roster(org: Organization, user_id: str) -> list[Seat]:
    """``user_id``'s roster in ``org``, one seat per worker id as the scope rule picks it
    (``reachable_seats``): their own workers first, then the organization's, then the
    standard (shared) ones, each group by id. One query."""
    rows = list(reachable_rows(org.pk, user_id))
    found = reachable_seats(org.pk, user_id, {row.seat_id for row in rows}, among=rows)
    return sorted(found.values(), key=lambda seat: (SCOPE_ORDER[seat.scope], seat.seat_id))


def list_seats(*, scope: str | None = None) -> QuerySet[Seat]:
    """Every hired seat (optionally of one scope), by seat id."""
    qs = Seat.objects.all().order_by("seat_id", "scope", "pk")
    return qs.filter(scope=scope) if scope else qs


def conversation_id(mailbox_id: str, seat_id: str) -> str:
    """The session id of ``seat_id``'s conversation in ``mailbox_id``:
    ``<mailbox id>:<seat id>`` (``support.desk:support.devices``). A mailbox id has no
    colon, so it never collides with a mailbox."""
    return f"{mailbox_id}:{seat_id}"


def conversation_history(session: Session, *, speaker: str, exclude_request_id: int | None = None) -> list[dict]:
    """A session's messages inside its history window, oldest first, as chat messages
    (spec: "a seat remembers only as far back as its history window reaches"): what a
    turn's model sees before the turn text.

    A user message item is ``{"role": "user", "content": text}``; an assistant message
    item is ``{"role": "assistant", "content": text}`` when ``speaker`` (the turn's own
    ``agentName``) or nobody said it, and ``<agentName>: <text>`` when another did (a
    delegate's answer in a coordinator's conversation). A turn aborted by a crashed
    worker is left out (its work was run again), and so is ``exclude_request_id``'s.

    PostgreSQL builds the messages in the statement (``_history_postgresql``: one JSON
    text decoded once, not each item's data); SQLite reads the items' data
    (``window_messages``) and builds them here (``_chat_messages``).
    """
    if connection.vendor == "postgresql":
        return _history_postgresql(session, speaker, exclude_request_id)
    return _chat_messages(window_messages(session, exclude_request_id=exclude_request_id), session.pk, speaker)


def _chat_messages(rows: Iterable[tuple[int, dict]], session_pk: int, speaker: str) -> list[dict]:
    """The chat messages of message items' ``(session pk, data)`` rows as ``speaker``
    hears them (``conversation_history``'s rules): rows of another session, without text,
    or neither a user's nor an assistant's are left out."""
    messages = []
    for item_session, data in rows:
        if item_session != session_pk:
            continue
        text = data.get("text") or ""
        if not text:
            continue
        if data.get("role") == "user":
            messages.append({"role": "user", "content": text})
        elif data.get("role") == "assistant":
            name = data.get("agentName") or ""
            messages.append({"role": "assistant", "content": text if name in ("", speaker) else f"{name}: {text}"})
    return messages


def window_messages(session: Session, *, exclude_request_id: int | None = None) -> list[tuple[int, dict]]:
    """``(session pk, data)`` of the message items of ``session``'s history window (its
    last ``history_window()`` requests, less aborted ones and ``exclude_request_id``),
    in ``seq`` order, in one statement that reads about the window's rows however long
    the conversation is and whatever the planner's statistics say
    (``tests/seats/test_wake_queries.py`` holds the rows read). SQLite's path of
    ``conversation_history`` (PostgreSQL's is ``_history_postgresql``, the same window).

    The window's requests by the ``(session, id)`` index, newest first, then their items
    by ``request_id``. The request table has no index on ``session`` alone (one would let
    a planner that believes the session small read all its requests and sort them), and
    an item's session is returned, not filtered in SQL (a filter on it lets such a
    planner walk the whole session by its ``(session, seq)`` index).
    """
    exclude = -1 if exclude_request_id is None else exclude_request_id
    return _WINDOW_MESSAGES.all(session.pk, history_window(), exclude)


def _window_messages_query(session_pk: int, window: int, exclude: int):
    requests = connection.ops.quote_name(Request._meta.db_table)
    in_window = RawSQL(
        f'SELECT "w"."id" FROM (SELECT "r"."id", "r"."status" FROM {requests} "r" WHERE "r"."session_id" = %s '
        'ORDER BY "r"."id" DESC LIMIT %s) "w" WHERE "w"."status" <> %s AND "w"."id" <> %s',
        [session_pk, window, Request.Status.ABORTED, exclude],
    )
    return Item.objects.filter(type=MESSAGE_ITEM, request_id__in=in_window).order_by("seq").values_list("session_id", "data")


# Compiled once per process (every turn reads its window): sentinels for session, window, excluded request.
_WINDOW_MESSAGES = Prepared(_window_messages_query, sentinels=(-7_300_011, -7_300_012, -7_300_013))


# A session's window floor: the oldest request of a full window this process read. A
# request is never deleted nor moved and ids only grow, so every later window of the
# session starts at or above it: the next read's range can start there. Per process (a
# hint, not state: a floor that names no request of the session is ignored in SQL, and
# a process without one reads from the session's start once), at most this many sessions.
_WINDOW_FLOORS: OrderedDict[tuple[str, int], int] = OrderedDict()
_WINDOW_FLOORS_MAX = 10_000
_WINDOW_FLOORS_LOCK = threading.Lock()

# PostgreSQL: a table no ANALYZE has seen makes its planner estimate any session at a
# handful of requests, read them all with a bitmap scan and sort them, and hash-join the
# whole item table; so the window's range starts at its floor (_WINDOW_FLOORS) and its
# items are read per request (a lateral join on request_id behind OFFSET 0, which keeps
# the planner from flattening it into a hash join over the whole item table, and from
# pushing the session filter into it, which would let it walk the session's
# (session, seq) index), which no estimate can turn into a scan of the session.
#
# The statement shapes the chat messages itself (conversation_history's rules, as
# _chat_messages) and aggregates them, in seq order, into one JSON text: Python decodes
# one string per call, not each item's whole data (an assistant reply's carries its tool
# calls and results). An item whose text or (an assistant's) agentName is not a JSON
# string or null is rare and left to Python: its element is [data] (_chat_messages), so
# what a non-string value turns into stays Python's.
_HISTORY_POSTGRESQL = """
WITH w AS MATERIALIZED (
    SELECT r.id, r.status FROM {requests} r
    WHERE r.session_id = %(session)s
      AND r.id >= COALESCE((SELECT f.id FROM {requests} f WHERE f.id = %(floor)s AND f.session_id = %(session)s), 0)
    ORDER BY r.id DESC LIMIT %(window)s
), m AS (
    SELECT i.seq, i.data, i.role, i.text, COALESCE(i.name, '') AS name,
           COALESCE(jsonb_typeof(i.data -> 'text'), 'null') NOT IN ('string', 'null')
           OR (i.role = 'assistant' AND COALESCE(jsonb_typeof(i.data -> 'agentName'), 'null') NOT IN ('string', 'null'))
           AS odd
    FROM w CROSS JOIN LATERAL (
        SELECT it.session_id, it.seq, it.data, it.data ->> 'role' AS role,
               CASE WHEN jsonb_typeof(it.data -> 'text') = 'string' THEN it.data ->> 'text' END AS text,
               CASE WHEN jsonb_typeof(it.data -> 'agentName') = 'string' THEN it.data ->> 'agentName' END AS name
        FROM {items} it WHERE it.request_id = w.id AND it.type = %(type)s OFFSET 0
    ) i
    WHERE w.status <> %(aborted)s AND w.id <> %(exclude)s
      AND i.session_id = %(session)s AND i.role IN ('user', 'assistant')
)
SELECT (SELECT MIN(id) FROM w), (SELECT COUNT(*) FROM w), (
    SELECT json_agg(
        CASE WHEN m.odd THEN json_build_array(m.data)
             ELSE json_build_object('role', m.role, 'content',
                  CASE WHEN m.role = 'user' OR m.name IN ('', %(speaker)s) THEN m.text ELSE m.name || ': ' || m.text END)
        END ORDER BY m.seq)::text
    FROM m WHERE m.odd OR m.text <> ''
), (SELECT bool_or(m.odd) FROM m)
"""


def _history_postgresql(session: Session, speaker: str, exclude_request_id: int | None) -> list[dict]:
    """``conversation_history`` on PostgreSQL: one statement (``_HISTORY_POSTGRESQL``), one
    JSON text decoded; notes the window's floor (``_WINDOW_FLOORS``) when the window is full."""
    key, window = (connection.alias, session.pk), history_window()
    with _WINDOW_FLOORS_LOCK:
        floor = _WINDOW_FLOORS.get(key, 0)
    sql = _HISTORY_POSTGRESQL.format(
        requests=connection.ops.quote_name(Request._meta.db_table), items=connection.ops.quote_name(Item._meta.db_table)
    )
    params: dict[str, int | str] = {
        "session": session.pk,
        "floor": floor,
        "window": window,
        "type": MESSAGE_ITEM,
        "aborted": Request.Status.ABORTED,
        "exclude": -1 if exclude_request_id is None else exclude_request_id,
        "speaker": speaker,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        oldest, size, shaped, odd = cursor.fetchone()
    if oldest is not None and size == window and oldest > floor:
        with _WINDOW_FLOORS_LOCK:
            _WINDOW_FLOORS[key] = max(oldest, _WINDOW_FLOORS.get(key, 0))
            _WINDOW_FLOORS.move_to_end(key)
            while len(_WINDOW_FLOORS) > _WINDOW_FLOORS_MAX:
                _WINDOW_FLOORS.popitem(last=False)
    if shaped is None:
        return []
    messages = json.loads(shaped)
    if odd:
        # Rare (see _HISTORY_POSTGRESQL): each [data] element becomes what Python's rules make of it, in place.
        shaped_ones = messages
        messages = []
        for element in shaped_ones:
            if isinstance(element, dict):
                messages.append(element)
            else:
                messages += _chat_messages([(session.pk, element[0])], session.pk, speaker)
    return messages


def tool_call_counts(org: Organization | None = None, *, user_id: str | None = None) -> list[dict]:
    """Tool-server calls counted per seat and per server, for operators (docs/tools.md):
    ``[{"seatId", "server", "calls", "failed", "denied"}]`` sorted by seat then server;
    ``calls`` counts every call that ran (``tool.called`` and ``tool.failed``), ``failed``
    those the server did not answer, ``denied`` the ungranted ones refused (``run.denied``).
    One query; ``org`` None counts every organization (the admin's view).

    Args:
        user_id: with ``org``, count only the seats this user reaches (``reachable_rows``:
            the shared ones, the organization's and the user's own); another user's own
            worker is not named (as ``GET /api/workers/<id>`` answers it 404). None with
            an ``org``: the organization's and the shared seats only.
    """
    from django.db.models import Count

    from .models import ToolCallEntry

    if org is None:
        rows = ToolCallEntry.objects.all()
    else:
        seats = reachable_rows(org.pk, user_id or "").values("seat_id")
        rows = ToolCallEntry.objects.filter(organization=org, seat_id__in=seats)
    counted = (
        rows.values("seat_id", "server")
        .annotate(
            calls=Count("pk", filter=Q(event__in=[ToolCallEntry.Event.CALLED, ToolCallEntry.Event.FAILED])),
            failed=Count("pk", filter=Q(event=ToolCallEntry.Event.FAILED)),
            denied=Count("pk", filter=Q(event=ToolCallEntry.Event.DENIED)),
        )
        .order_by("seat_id", "server")
    )
    return [
        {"seatId": r["seat_id"], "server": r["server"], "calls": r["calls"], "failed": r["failed"], "denied": r["denied"]}
        for r in counted
    ]
