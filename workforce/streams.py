"""Live items: a session's items as server-sent events (docs/api.md "Watching a session live").

Every item is stored by ``workforce.sessions.emit_item`` (or ``mailboxes.lines`` for a
post's line). On PostgreSQL the statement that stores it also sends ``pg_notify(
'workforce_items', '<session pk>:<seq>:<item>')`` (``carried_note_sql``), the item as
the row stored it (``[type, component, data, request id, created_at]``, JSON) when that
fits in ``CARRY_BYTES``, else ``'<session pk>:<seq>'``; PostgreSQL delivers it when the
transaction commits and drops it when the transaction (or the savepoint it ran in)
rolls back, so work that rolled back is never announced. The web process holds one
``LISTEN`` connection (``ItemHub``) and wakes the streams of that session. A stream
whose new items all came in notes, with no seq missing after its cursor, sends them as
they came (its caller's ``carried``) and reads nothing; otherwise (a note without its
item, a gap, its first pass, its safety re-read, the listener's reconnection) it reads
the new items from the database after its cursor. On SQLite a stream re-reads every
``WORKFORCE_STREAM_POLL_SECONDS``. Either way an item stored by any process (the web
server or the task cluster) reaches every open stream of its session.

A room's lines (``mailboxes.rooms``) are in no session's history: their writer calls
``notify_topic(room_topic(project pk), seq)`` in its transaction, ``NOTIFY
workforce_items, 'r<project pk>:<seq>'`` that PostgreSQL delivers when it commits, and
the hub wakes the room's page streams (``web.live.state_events``) the same way.

A session's ``seq`` is handed out under the session row's lock and committed in order
(``emit_item``), so "every item with seq above the cursor" loses nothing and repeats
nothing: a client that reconnects with ``Last-Event-ID: <seq>`` resumes exactly there.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

CHANNEL = "workforce_items"
# On PostgreSQL a stream also re-reads this often with no notification, in case one was
# missed while the LISTEN connection was being re-established.
SAFETY_READ_SECONDS = 5.0
# Items read from the database per query while a stream catches up.
PAGE = 500
# Browsers wait this long (milliseconds) before reconnecting a dropped stream.
RETRY_MS = 1000
# An answer being written (``workforce.previews``): the event's name, and the prefix of
# its notes on ``CHANNEL`` (``t<session pk>:<JSON>``).
PARTIAL_TEXT = "partial-text"
NOTE_PREFIX = "t"

# An open stream checks again that its reader may read (``item_events``'s
# ``still_allowed``) before it sends an event, at most this often (seconds): a reader that
# lost access (left the organization, its token deleted) gets nothing past this.
ACCESS_RECHECK_SECONDS = 5.0
# A note carries its item when the item's JSON is at most this many bytes; NOTIFY's
# payload must stay under 8000 bytes, the note's "<session pk>:<seq>:" prefix included.
CARRY_BYTES = 7800
# A subscription keeps at most this many carried items not sent yet; past it a stream
# reads (a note then stops carrying for it: the gap makes it read).
CARRY_KEEP = PAGE

# The libpq settings of DATABASES["default"]["OPTIONS"] the listener's own connection keeps.
LIBPQ_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "options", "connect_timeout", "application_name")


def is_postgres(alias: str = "default") -> bool:
    """True when database ``alias`` is PostgreSQL (streams are woken by NOTIFY)."""
    return connections[alias].vendor == "postgresql"


def release_connection() -> None:
    """Hand this thread's PostgreSQL connection back (to the pool) while a long read
    waits, so a waiting read or an open stream holds none between its reads; inside a
    transaction (a test's) it is kept. Nothing on SQLite."""
    conn = connections["default"]
    if is_postgres() and not conn.in_atomic_block:
        conn.close()


def room_topic(project_pk: int) -> str:
    """The hub's key (and the note's prefix) of a project's room: ``"r<pk>"``."""
    return f"r{project_pk}"


def notify_topic(topic: str, seq: int) -> None:
    """Wake the streams subscribed to ``topic`` (``room_topic``) once the current
    transaction commits: on PostgreSQL one ``pg_notify`` in it, which PostgreSQL delivers
    at the commit and drops with a rollback (of a savepoint too); nothing on SQLite,
    whose streams poll."""
    if not is_postgres():
        return
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, f"{topic}:{seq}"])


def carried_note_sql(item: str, request_id: str | None = None) -> str:
    """The SQL text of a session item's note after its ``"<session pk>:"`` prefix (a
    parameter the caller passes before it): ``<seq>:<JSON>`` where the JSON is
    ``[type, component, data, request id or null, created_at]`` as the row stored them,
    or ``<seq>`` alone when that JSON is longer than ``CARRY_BYTES``.

    Args:
        item: the alias of a row source with the item table's ``seq``, ``type``,
            ``component``, ``data``, ``request_id`` (the foreign key) and ``created_at``
            columns (an INSERT's ``RETURNING`` those, in a CTE).
        request_id: SQL giving the item's request's id (its public ``request_id``):
            by default read by the foreign key, which sees the request only when an
            earlier statement wrote it (pass the writing CTE's column otherwise).
    """
    if request_id is None:
        request_id = f'(SELECT r."request_id" FROM "workforce_request" r WHERE r."id" = {item}.request_id)'
    item_json = f"json_build_array({item}.type, {item}.component, {item}.data, {request_id}, {item}.created_at)::text"
    return (
        f"{item}.seq::text || COALESCE((SELECT ':' || c.t FROM (SELECT {item_json} AS t) AS c "
        f"WHERE octet_length(c.t) <= {CARRY_BYTES}), '')"
    )


# What an item's INSERT returns for ``carried_note_sql``.
CARRIED_COLUMNS = "seq, type, component, data, request_id, created_at"


def parse_note(payload: str) -> tuple[int | str, int] | None:
    """``"<session pk>:<seq>"`` (with its carried item or not) -> ``(pk, seq)``;
    ``"r<project pk>:<seq>"`` (a room's line) -> ``("r<pk>", seq)``; None for anything
    else."""
    parsed = parse_item_note(payload)
    return None if parsed is None else parsed[:2]


def parse_item_note(payload: str) -> tuple[int | str, int, str | None] | None:
    """``parse_note`` and the item's JSON text a session item's note carries
    (``carried_note_sql``; None when it carries none): ``(key, seq, JSON or None)``."""
    key, _, rest = payload.partition(":")
    seq, _, carried = rest.partition(":")
    if not seq.isdigit():
        return None
    if key.isdigit():
        return int(key), int(seq), carried or None
    if key.startswith("r") and key[1:].isdigit() and not carried:
        return key, int(seq), None
    return None


def carried_item(text: str) -> tuple[str, str, Any, str | None, datetime]:
    """A note's carried item (``parse_item_note``) as ``(type, component, data, request
    id or None, created_at)``, the values a read of the row gives (``data`` decoded as
    the model's field decodes it, ``created_at`` aware).

    Raises:
        ValueError: ``text`` is not such an item.
    """
    type_, component, data, request_id, created_at = json.loads(text)
    return str(type_), str(component), data, request_id, datetime.fromisoformat(created_at)


def previews_dir() -> Path:
    """Where SQLite's previews are written: ``<WORKFORCE_VAR_DIR>/previews``."""
    return Path(settings.VAR_DIR) / "previews"


def parse_preview_note(payload: str) -> tuple[int, dict] | None:
    """``"t<session pk>:<JSON>"`` -> ``(session pk, preview)``; None for anything else."""
    if not payload.startswith(NOTE_PREFIX):
        return None
    key, _, body = payload[len(NOTE_PREFIX) :].partition(":")
    if not key.isdigit():
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("requestId"), str):
        return None
    return int(key), data


def read_preview_files(session_pk: int) -> dict[str, dict]:
    """SQLite: the previews written for session ``session_pk`` now, by request id."""
    found: dict[str, dict] = {}
    try:
        entries = list(os.scandir(previews_dir() / str(session_pk)))
    except OSError:
        return found
    for entry in entries:
        if not entry.name.endswith(".json") or entry.name.startswith("."):
            continue
        try:
            data = json.loads(Path(entry.path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # removed meanwhile
        if isinstance(data, dict) and isinstance(data.get("requestId"), str):
            found[data["requestId"]] = data
    return found


def still_running(request_ids: list[str], *, session_pks: Iterable[int] = ()) -> set[str]:
    """Which of ``request_ids`` are still pending or running (one query). The preview
    files of the others under ``session_pks`` (SQLite) are removed (a turn whose process
    died before its end left one)."""
    from .models import Request

    rows = Request.objects.filter(request_id__in=request_ids, status__in=(Request.Status.PENDING, Request.Status.RUNNING))
    running = set(rows.values_list("request_id", flat=True))
    for session_pk in session_pks:
        for request_id in set(request_ids) - running:
            try:
                (previews_dir() / str(session_pk) / f"{request_id}.json").unlink(missing_ok=True)
            except OSError:
                pass
    return running


class _Subscription:
    def __init__(self, key: int | str, event: asyncio.Event | None = None):
        self.key = key
        self.event = event or asyncio.Event()
        # PostgreSQL: the newest preview note per request id since the stream last read
        # (``workforce.previews``), coalesced.
        self.previews: dict[str, dict] = {}
        # PostgreSQL: the newest seq the hub's notes announced for ``key``, and whether
        # the stream must read whatever they say (a wake with no seq: the listener came
        # back and may have missed notes, or a caller's own ``wake``). Set by the hub,
        # taken by ``item_events`` (``take_reread``).
        self.announced = 0
        self.reread = True
        # PostgreSQL: the items the hub's notes carried (``parse_item_note``), by seq, as
        # JSON text; sent by the stream instead of a read when they leave no gap.
        self.carried: dict[int, str] = {}

    def take_carried(self, after: int, upto: int) -> list[tuple[int, str]] | None:
        """The carried items ``after`` < seq <= ``upto``, oldest first, when every one of
        them was carried; None when one was not (the stream reads). Either way the
        carried items up to ``upto`` are dropped."""
        carried = self.carried
        run = [(seq, carried.get(seq)) for seq in range(after + 1, upto + 1)] if upto - after <= CARRY_KEEP else None
        for seq in [seq for seq in carried if seq <= upto]:
            del carried[seq]
        if run is None or any(text is None for _, text in run):
            return None
        return run  # type: ignore[return-value]  # None ruled out above

    def take_reread(self) -> bool:
        """Whether a wake with no seq came since the last call (and clear it)."""
        reread, self.reread = self.reread, False
        return reread


class ItemHub:
    """The web process's one listener: wakes the open streams of a session when one of
    its items is stored, and ends every stream when the server stops.

    On PostgreSQL it keeps one autocommit connection that ``LISTEN``s on ``CHANNEL``
    (reconnecting after a second when it drops, and then waking every stream so that
    each re-reads); on SQLite it listens to nothing and streams poll. Not thread-safe:
    it lives on the server's event loop (``stop`` may be called from any thread).
    """

    def __init__(self) -> None:
        self._subs: dict[int | str, set[_Subscription]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: asyncio.Task | None = None
        self.listening = False
        self.stopping = False

    def subscribe(self, session_pk: int | str, event: asyncio.Event | None = None) -> _Subscription:
        """A subscription to session ``session_pk``'s new items (its ``event`` is set on
        each), or to a room's lines (``room_topic``); starts the listener on first use.
        ``event``: one a stream's other subscriptions set too (a new one by default).
        Release it with ``unsubscribe``."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (a test's): start over on it
            self._loop, self._listener, self._subs, self.listening = loop, None, {}, False
        if self._listener is None and is_postgres():
            self._listener = loop.create_task(self._listen())
        sub = _Subscription(session_pk, event)
        self._subs.setdefault(session_pk, set()).add(sub)
        if self.stopping:
            sub.event.set()
        return sub

    def unsubscribe(self, sub: _Subscription) -> None:
        subs = self._subs.get(sub.key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[sub.key]

    def wake(self, session_pk: int | str | None = None) -> None:
        """Wake the streams of ``session_pk`` or of a room's topic (every stream when None);
        each reads whatever is there, announced or not."""
        groups = self._subs.values() if session_pk is None else [self._subs.get(session_pk, ())]
        for subs in groups:
            for sub in subs:
                sub.reread = True
                sub.event.set()

    def announce(self, session_pk: int | str, seq: int, carried: str | None = None) -> None:
        """A note said ``session_pk``'s item ``seq`` (or a room's line) is committed: wake
        its streams, and remember ``seq`` as the newest they may read (a stream whose
        cursor is already there skips its read: ``item_events``); ``carried``: the item
        the note carried (JSON text), kept for them (at most ``CARRY_KEEP`` each)."""
        for sub in self._subs.get(session_pk, ()):
            if seq > sub.announced:
                sub.announced = seq
            if carried is not None and len(sub.carried) < CARRY_KEEP:
                sub.carried[seq] = carried
            sub.event.set()

    def preview(self, session_pk: int, data: dict) -> None:
        """Hand a preview note (``workforce.previews``) to the streams of ``session_pk``
        and wake them; a newer note of the same request replaces one not read yet."""
        for sub in self._subs.get(session_pk, ()):
            sub.previews[data["requestId"]] = data
            sub.event.set()

    def stop(self) -> None:
        """End every open stream (the server is stopping); safe from a signal handler."""
        self.stopping = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.wake)

    def open_streams(self) -> int:
        """How many streams are subscribed now."""
        return sum(len(subs) for subs in self._subs.values())

    async def _listen(self) -> None:
        import psycopg  # PostgreSQL only: a process on SQLite never loads it (docs/running.md "Memory")

        while not self.stopping:
            try:
                conn = await psycopg.AsyncConnection.connect(_conninfo(), autocommit=True)
            except Exception as exc:  # noqa: BLE001  (the database is down: streams fall back to re-reading)
                logger.warning("stream listener cannot connect (%s); retrying in 1 s", exc)
                await asyncio.sleep(1)
                continue
            try:
                async with conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    self.listening = True
                    self.wake()  # anything stored while nobody listened
                    async for note in conn.notifies():
                        preview = parse_preview_note(note.payload)
                        if preview is not None:
                            self.preview(*preview)
                            continue
                        parsed = parse_item_note(note.payload)
                        if parsed is not None:
                            self.announce(*parsed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001
                logger.warning("stream listener lost its connection (%s); reconnecting", exc)
            finally:
                self.listening = False
            await asyncio.sleep(1)


def _conninfo() -> str:
    import psycopg

    conf = settings.DATABASES["default"]
    params = {
        "dbname": conf.get("NAME") or None,
        "user": conf.get("USER") or None,
        "password": conf.get("PASSWORD") or None,
        "host": conf.get("HOST") or None,
        "port": str(conf["PORT"]) if conf.get("PORT") else None,
    }
    options = conf.get("OPTIONS") or {}
    params.update({key: str(options[key]) for key in LIBPQ_OPTIONS if options.get(key) not in (None, "")})
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v is not None})


hub = ItemHub()


def stop_streams() -> None:
    """End every open stream of this process (``serve`` calls it when it stops)."""
    hub.stop()


def event_text(seq: int, data: dict) -> str:
    """One server-sent event: ``id: <seq>`` and the item as one JSON ``data:`` line."""
    return f"id: {seq}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def partial_text_event(preview: dict, shown: list[dict]) -> str:
    """A ``partial-text`` event: the preview as one JSON ``data:`` line, no ``id`` (the
    item cursor does not move)."""
    return f"event: {PARTIAL_TEXT}\ndata: {json.dumps(preview, separators=(',', ':'))}\n\n"


class PreviewWatch:
    """The answers being written that one stream shows (``workforce.previews``): the
    previews of the sessions its subscriptions are keyed by, each change once, then
    each one's end.

    ``gather`` (before the stream reads its items) takes what arrived: the notes the hub
    handed the subscriptions on PostgreSQL, the preview files on SQLite; and which of the
    shown ones ended: a ``done`` note, or their request no longer running, read (one
    query, only while some preview is shown or present) at each SQLite poll and at each
    PostgreSQL safety read. ``events`` (after the items) gives the events to send.

    Args:
        subs: the stream's subscriptions (``ItemHub.subscribe``) to sessions (pks).
        partial: ``partial(preview, shown)`` -> an event's text (see ``item_events``).
    """

    def __init__(self, subs: list[_Subscription], partial: Callable[[dict, list[dict]], str | None]):
        self.subs = [sub for sub in subs if isinstance(sub.key, int)]
        self.partial = partial
        self.shown: dict[str, dict] = {}
        self.notes: dict[str, dict] = {}
        self.ended: set[str] = set()

    async def gather(self, *, woken: bool) -> None:
        """Take what arrived; ``woken`` False when the stream's wait timed out."""
        postgres = is_postgres()
        self.notes = {}
        for sub in self.subs:
            arrived, sub.previews = sub.previews, {}
            self.notes.update(read_preview_files(int(sub.key)) if not postgres else arrived)
        self.ended = {rid for rid, note in self.notes.items() if note.get("done")}
        asked = [rid for rid in {*self.shown, *self.notes} - self.ended if not postgres or (rid in self.shown and not woken)]
        if asked:
            keys = [] if postgres else [int(sub.key) for sub in self.subs]
            self.ended |= set(asked) - await _running(asked, keys)

    def events(self) -> list[str]:
        """The events for what changed since the last ``gather``: each preview whose
        text changed, then each shown one whose turn ended (``done: true``)."""
        texts = []
        for rid, note in self.notes.items():
            if rid in self.ended or self.shown.get(rid) == note:
                continue
            self.shown[rid] = note
            texts.append(self.partial(note, list(self.shown.values())))
        for rid in self.ended & self.shown.keys():
            last = self.shown.pop(rid)
            texts.append(self.partial({**last, "done": True}, list(self.shown.values())))
        self.notes, self.ended = {}, set()
        return [text for text in texts if text is not None]


class AccessCheck:
    """An open stream's check that its reader still may read: call (``await check()``)
    before each event; True at once until ``ACCESS_RECHECK_SECONDS`` have passed since the
    last check (the first counts from construction: the open checked it), then
    ``still_allowed()`` run in a thread, its connection handed back after it.

    Args:
        still_allowed: a blocking check (``workforce.principals.access_held``); None:
            always True.
    """

    def __init__(self, still_allowed: Callable[[], bool] | None) -> None:
        self.still_allowed = still_allowed
        self.checked = time.monotonic()
        self._check = sync_to_async(self._run) if still_allowed is not None else None

    def _run(self) -> bool:
        assert self.still_allowed is not None
        try:
            return self.still_allowed()
        finally:
            release_connection()

    async def __call__(self) -> bool:
        if self._check is None or time.monotonic() - self.checked < ACCESS_RECHECK_SECONDS:
            return True
        self.checked = time.monotonic()
        return await self._check()


def _carried_texts(
    notes: list[tuple[int, str]] | None,
    carried: Callable[[int, str], Any | None],
    render: Callable[[int, Any], str | None],
) -> list[str] | None:
    """The events of the items notes carried (``item_events``), or None when the stream
    must read them instead: one was not carried, or one cannot be decoded (logged)."""
    if notes is None:
        return None
    texts = []
    try:
        for seq, note in notes:
            item = carried(seq, note)
            text = None if item is None else render(seq, item)
            if text is not None:
                texts.append(text)
    except (ValueError, TypeError, KeyError):
        logger.warning("a stream note's item could not be decoded; reading it instead", exc_info=True)
        return None
    return texts


def _read_running(request_ids: list[str], session_pks: list[int]) -> set[str]:
    try:
        return still_running(request_ids, session_pks=session_pks)
    finally:
        release_connection()


_running = sync_to_async(_read_running)


async def item_events(
    session_pk: int,
    *,
    after: int,
    read: Callable[[int, int], list[tuple[int, Any]]],
    render: Callable[[int, Any], str | None] = event_text,
    heartbeat_seconds: float | None = None,
    poll_seconds: float | None = None,
    partial: Callable[[dict, list[dict]], str | None] | None = partial_text_event,
    carried: Callable[[int, str], Any | None] | None = None,
    still_allowed: Callable[[], bool] | None = None,
) -> AsyncIterator[str]:
    """The text of a session's event stream: every item with ``seq > after``, then each
    new one as it is stored, until the server stops or the client goes away; and the
    answers being written in the session or its child sessions (``workforce.previews``),
    each change as a ``partial`` event, then one with ``done: true`` after the items
    stored when that turn ended.

    Args:
        session_pk: the ``Session`` primary key (already checked readable by the caller).
        after: the cursor (``after=`` or ``Last-Event-ID``).
        read: ``read(after, limit)`` -> at most ``limit`` ``(seq, item)`` pairs with
            ``seq > after``, oldest first; a blocking database read, run in a thread.
        render: ``render(seq, item)`` -> the event's text (default ``event_text``: the
            item as JSON); None skips the item (the cursor still moves past it).
        heartbeat_seconds: a comment line is sent after this long without an event
            (default ``WORKFORCE_STREAM_HEARTBEAT_SECONDS``, 15).
        poll_seconds: how often SQLite re-reads (default ``WORKFORCE_STREAM_POLL_SECONDS``).
        partial: ``partial(preview, shown)`` -> the event's text for a preview that
            changed (``{requestId, sessionId, agentName, text, start, done}``), ``shown``
            being every preview shown now (default ``partial_text_event``); None sends
            no previews.
        carried: ``carried(seq, text)`` -> the item ``read`` would give for the item a
            note carried (``text``, ``carried_item``), or None when the stream does not
            send it (another type); the cursor moves past it either way. PostgreSQL:
            new items that all came in notes are sent so, with no read (None: always
            read).
        still_allowed: a blocking check that the reader still may read (``workforce.
            principals.access_held``), run in a thread before an event is sent when
            ``ACCESS_RECHECK_SECONDS`` have passed since the last (the first counts from
            the open); False ends the stream, with nothing more sent.
    """
    heartbeat = float(settings.WORKFORCE_STREAM_HEARTBEAT_SECONDS if heartbeat_seconds is None else heartbeat_seconds)
    interval = float(settings.WORKFORCE_STREAM_POLL_SECONDS if poll_seconds is None else poll_seconds)
    if is_postgres():
        interval = SAFETY_READ_SECONDS
    fetch = sync_to_async(read)
    postgres = is_postgres()
    sub = hub.subscribe(session_pk)
    cursor = after
    # PostgreSQL: every item up to this seq has been read (sent, or not of the stream's
    # types): a read that came back short saw everything announced before it began,
    # since an item's note is delivered after its commit, and the seqs below it committed
    # before it (``emit_item`` hands them out under the session's lock).
    covered = after
    watch = PreviewWatch([sub], partial) if partial is not None else None
    woken = True
    allowed = AccessCheck(still_allowed)
    try:
        yield f"retry: {RETRY_MS}\n\n"
        last_sent = time.monotonic()
        while not hub.stopping:
            sub.event.clear()
            announced = sub.announced
            # PostgreSQL reads when a note announced an item past what it read, and at its
            # first pass, its safety re-read (a wait that timed out) and a wake with no
            # seq; a wake for an item it already read (in a page) or for a preview reads
            # nothing. SQLite reads at every poll.
            must_read = not postgres or sub.take_reread() or not woken
            reading = must_read or announced > covered
            if watch is not None:
                await watch.gather(woken=woken)  # before the items: a turn seen ended has its items stored
            if carried is not None and reading and not must_read:
                # Every new item came in a note (no seq missing): sent as it came, no read.
                texts = _carried_texts(sub.take_carried(covered, announced), carried, render)
                if texts is not None:
                    reading = False
                    cursor = covered = announced
                    for carried_text in texts:
                        if not await allowed():
                            return
                        last_sent = time.monotonic()
                        yield carried_text
            elif sub.carried:
                sub.take_carried(covered, announced)  # read instead: what the notes carried goes
            while reading:  # catch up, a page at a time
                rows = await fetch(cursor, PAGE)
                for seq, data in rows:
                    text = render(seq, data)
                    cursor = seq
                    if text is not None:
                        if not await allowed():
                            return
                        yield text
                if rows:
                    last_sent = time.monotonic()
                covered = max(covered, cursor)
                if len(rows) < PAGE:
                    covered = max(covered, announced)
                    break
                if hub.stopping:
                    break
            for text in watch.events() if watch is not None else ():
                if not await allowed():
                    return
                last_sent = time.monotonic()
                yield text
            wait = min(interval, max(0.0, last_sent + heartbeat - time.monotonic()))
            woken = True
            try:
                await asyncio.wait_for(sub.event.wait(), timeout=wait)
            except TimeoutError:
                woken = False
            if time.monotonic() - last_sent >= heartbeat:
                yield ": heartbeat\n\n"
                last_sent = time.monotonic()
    finally:
        hub.unsubscribe(sub)
