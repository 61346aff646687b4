"""A live stream's read (``workforce.api.views.stream_reader``): the items a mailbox and its
seats' conversations store, read in one statement compiled once, and written as the
same event text ``ItemSerializer`` gives, byte for byte; a stream woken for nothing past
what it read reads nothing (``workforce.streams.item_events`` on PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from django.utils import timezone

from workforce.api.serializers import ItemSerializer
from workforce.api.views import stream_carried, stream_reader
from workforce.models import Item, Request, Session
from workforce.sessions import emit_item
from workforce.streams import (
    CARRY_BYTES,
    CARRY_KEEP,
    CHANNEL,
    PAGE,
    carried_item,
    event_text,
    hub,
    item_events,
    parse_item_note,
    parse_note,
)


def _serializer_events(items) -> list[str]:
    return [event_text(item.seq, ItemSerializer(item).data) for item in items]


def _stream_events(session: Session, types: list[str] | None) -> list[str]:
    return [event_text(seq, data) for seq, data in stream_reader(session.pk, types)(0, PAGE)]


def _every_kind_of_item(wired, post, org) -> None:
    wired()
    post("eng.standup", "can someone look at the refund queue?", author="eng.lead")
    post("eng.standup", 'naïve café ✓ "quoted" \\ back\nslash </script>')
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    request = Request.objects.filter(session=mailbox).order_by("pk").first()
    emit_item(mailbox, "note", {"n": 1, "f": 1.5, "none": None, "list": [1, "two", {"three": [3]}], "e": "😀\u2028"})
    emit_item(mailbox, "", {}, type="message", request=request)
    emit_item(mailbox, "status", {"text": "x" * 2000}, type="custom-type")


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_the_stream_writes_each_item_as_the_serializer_does(wired, post, org, zone):
    """Every item of every session the posts, the seats' turns and ``emit_item`` stored
    (post lines, route notes, seat messages, requests or none, odd text), under every
    ``itemTypes`` a client may ask for: the stream's event text is the serializer's."""
    _every_kind_of_item(wired, post, org)
    sessions = Session.objects.filter(items__isnull=False).distinct()
    types = sorted(set(Item.objects.values_list("type", flat=True)))
    assert {"component", "message", "custom-type"} <= set(types)
    with timezone.override(zone):
        compared = 0
        for session in sessions:
            for asked in (None, ["component"], types, ["message", "custom-type"], ["nothing"]):
                items = Item.objects.filter(session=session).select_related("request").order_by("seq")
                if asked:
                    items = items.filter(type__in=asked)
                expected = _serializer_events(items)
                assert _stream_events(session, asked) == expected, (session.session_id, asked)
                compared += len(expected)
    assert compared > 20


def test_a_read_of_n_new_items_is_one_statement(wired, post, org, django_assert_num_queries):
    _every_kind_of_item(wired, post, org)
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    read = stream_reader(mailbox.pk, ["component", "custom-type"])
    read(0, PAGE)  # the first read of this shape compiles it
    count = Item.objects.filter(session=mailbox, type__in=["component", "custom-type"]).count()
    assert count >= 4
    for after, limit in ((0, PAGE), (1, PAGE), (0, 2)):
        with django_assert_num_queries(1):
            rows = read(after, limit)
        assert len(rows) == min(limit, count - after)
        assert [seq for seq, _ in rows] == sorted(seq for seq, _ in rows)
    other = Session.objects.exclude(pk=mailbox.pk).filter(items__isnull=False).first()
    assert other is not None
    # Only the session the stream was opened on: another session's items are never read.
    assert {data["seq"] for _, data in read(0, PAGE)} == set(
        Item.objects.filter(session=mailbox, type__in=["component", "custom-type"]).values_list("seq", flat=True)
    )


class _Listening:
    """``item_events`` as on PostgreSQL, its hub's notes handed in by the test (no listener)."""

    def __init__(self, monkeypatch):
        monkeypatch.setattr("workforce.streams.is_postgres", lambda alias="default": True)
        hub._loop = asyncio.get_running_loop()
        hub._listener = asyncio.get_running_loop().create_future()  # taken: no listener is started
        hub._subs = {}

    def close(self):
        hub._listener.cancel()
        hub._loop, hub._listener, hub._subs = None, None, {}


def test_a_wake_with_nothing_past_the_announced_seq_reads_nothing(monkeypatch):
    """PostgreSQL: a stream reads when a note announces an item past what it read; a note
    for an item it already read in a page, or a preview, reads nothing (0 statements:
    every statement of the stream is a read, ``test_a_read_of_n_new_items_is_one_statement``);
    a wake with no seq (the listener came back) and the safety re-read still read."""
    store = [(seq, {"seq": seq}) for seq in range(1, 4)]
    reads = []

    def read(after, limit):
        reads.append(after)
        return [row for row in store if row[0] > after][:limit]

    async def run():
        listening = _Listening(monkeypatch)
        try:
            stream = item_events(7, after=0, read=read, heartbeat_seconds=60, poll_seconds=60)
            got = [await anext(stream) for _ in range(4)]  # retry, then 1..3 in the first read
            assert reads == [0]
            store.extend([(4, {"seq": 4}), (5, {"seq": 5})])
            hub.announce(7, 4)
            got += [await anext(stream), await anext(stream)]  # 4 and 5: one read (its page had both)
            assert reads == [0, 3]
            hub.announce(7, 5)  # 5's note, late: already read
            hub.announce(7, 2)
            hub.preview(7, {"requestId": "req_1", "text": "hel", "done": False})
            got.append(await anext(stream))  # the preview, and no read
            assert reads == [0, 3]
            hub.wake(7)  # a wake with no seq: read
            hub.preview(7, {"requestId": "req_1", "text": "hello", "done": False})
            got.append(await anext(stream))
            assert reads == [0, 3, 5]
            await stream.aclose()
            return got
        finally:
            listening.close()

    got = asyncio.run(run())
    assert [text.split("\n")[0] for text in got[1:6]] == ["id: 1", "id: 2", "id: 3", "id: 4", "id: 5"]
    assert got[6].startswith("event: partial-text\ndata: ") and '"text":"hel"' in got[6]
    assert '"text":"hello"' in got[7]
    assert hub.open_streams() == 0


def test_a_stream_of_other_types_reads_once_per_announced_item(monkeypatch):
    """An announced item not of the stream's types moves no cursor; the short read that
    saw it covers it, so a later wake for it (or a preview) reads nothing."""
    store = [(1, {"seq": 1})]
    reads = []

    def read(after, limit):
        reads.append(after)
        return [row for row in store if row[0] > after][:limit]

    async def run():
        listening = _Listening(monkeypatch)
        try:
            stream = item_events(8, after=0, read=read, heartbeat_seconds=60, poll_seconds=60)
            got = [await anext(stream), await anext(stream)]
            hub.announce(8, 2)  # item 2 is of another type: the read finds nothing
            hub.preview(8, {"requestId": "req_2", "text": "a", "done": False})
            got.append(await anext(stream))
            assert reads == [0, 1]
            hub.announce(8, 2)
            hub.preview(8, {"requestId": "req_2", "text": "ab", "done": False})
            got.append(await anext(stream))
            assert reads == [0, 1]
            store.append((3, {"seq": 3}))
            hub.announce(8, 3)
            got.append(await anext(stream))
            assert reads == [0, 1, 1]
            await stream.aclose()
            return got
        finally:
            listening.close()

    got = asyncio.run(run())
    assert got[1].startswith("id: 1\n") and got[4].startswith("id: 3\n")


def _emit_two_and_close(session: Session) -> int:
    from django.db import connection, transaction

    try:
        with transaction.atomic():
            emit_item(session, "note", {"n": 4})
            return emit_item(session, "note", {"n": 5}).seq
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_each_read_is_one_statement_and_a_late_note_none(open_tree, org):
    """The real listener and reader: every read the stream makes is one statement; once
    it has read an item, that item's note (late) and a preview cost none."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    open_tree()
    session = Session.objects.get(organization=org, session_id="eng.standup")
    start = session.item_seq
    for n in range(3):
        emit_item(session, "note", {"n": n})
    reader = stream_reader(session.pk, None)
    statements: list[int] = []

    def read(cursor: int, limit: int):
        with CaptureQueriesContext(connection) as captured:  # this read's thread's connection
            rows = reader(cursor, limit)
        statements.append(len(captured.captured_queries))
        return rows

    async def run():
        stream = item_events(session.pk, after=start, read=read, heartbeat_seconds=60)
        try:
            got = [await anext(stream) for _ in range(4)]
            for _ in range(100):
                if hub.listening:
                    break
                await asyncio.sleep(0.05)
            assert hub.listening
            last = await asyncio.to_thread(_emit_two_and_close, session)
            got += [await anext(stream), await anext(stream)]
            await asyncio.sleep(0.5)  # both notes in
            reads = len(statements)
            hub.announce(session.pk, last)  # its note again, late
            hub.preview(session.pk, {"requestId": "req_x", "text": "hel", "done": False})
            got.append(await anext(stream))
            assert len(statements) == reads  # nothing read
            return got, last
        finally:
            await stream.aclose()

    try:
        got, last = asyncio.run(run())
    finally:
        connection.close()
    assert last == start + 5
    assert [text.split("\n")[0] for text in got[1:6]] == [f"id: {seq}" for seq in range(start + 1, last + 1)]
    assert got[6].startswith("event: partial-text\n")
    assert statements and set(statements) == {1}


# ----------------------------------------------------------------------------- notes that carry their item


def _listener():
    import psycopg
    from django.db import connection

    conf = connection.settings_dict
    conn = psycopg.connect(dbname=conf["NAME"], user=conf["USER"], host=conf["HOST"], port=conf["PORT"] or None, autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata"])
def test_each_note_carries_the_item_a_read_gives(wired, post, org, zone):
    """Every item stored (post lines, seat turns' starts and answers, settles,
    ``emit_item`` of every shape, requests or none, odd text) is noted once; its note
    carries the item, and the stream's event for it (``stream_carried``) is the read's
    (``stream_reader``), byte for byte, under every ``itemTypes``; an item too big to
    carry is noted with its seq alone."""
    listener = _listener()
    try:
        _every_kind_of_item(wired, post, org)
        mailbox = Session.objects.get(organization=org, session_id="eng.standup")
        big = emit_item(mailbox, "note", {"text": "é" * CARRY_BYTES})
        notes = [parse_item_note(n.payload) for n in listener.notifies(timeout=1.0, stop_after=None)]
    finally:
        listener.close()
    assert all(note is not None for note in notes)
    noted = [(note[0], note[1]) for note in notes if note is not None]
    stored = list(Item.objects.values_list("session_id", "seq"))
    assert sorted(noted) == sorted(stored) and len(noted) == len(set(noted))  # each item once
    carried = {(note[0], note[1]): note[2] for note in notes if note is not None}
    assert carried.pop((mailbox.pk, big.seq)) is None  # too big: its seq alone
    assert all(text is not None for text in carried.values())
    types = sorted(set(Item.objects.values_list("type", flat=True)))
    with timezone.override(zone):
        compared = 0
        for (session_pk, seq), text in carried.items():
            for asked in (None, ["component"], types, ["message", "custom-type"], ["nothing"]):
                read = [data for got, data in stream_reader(int(session_pk), asked)(seq - 1, 1) if got == seq]
                assert stream_carried(asked)(seq, text) == (read[0] if read else None), (session_pk, seq, asked)
                compared += bool(read)
    assert len(carried) == len(stored) - 1 >= 10 and compared > 20


def test_a_stream_sends_what_notes_carried_and_reads_only_for_a_gap(monkeypatch):
    """PostgreSQL: new items that all came in notes are sent as they came, with no read;
    a note without its item (too big), one that cannot be decoded, a wake with no seq
    and the first pass read from the cursor; an item not of the stream's types moves
    the cursor past it; the events are the ones a read gives."""
    store: list[tuple[int, dict]] = []
    reads: list[int] = []

    def item(seq: int, kind: str = "component") -> dict:
        return {"seq": seq, "type": kind}

    def add(seq: int, kind: str = "component") -> str:
        store.append((seq, item(seq, kind)))
        return json.dumps([kind, seq])

    def read(after, limit):
        reads.append(after)
        return [row for row in store if row[0] > after and row[1]["type"] == "component"][:limit]

    def carried(seq: int, text: str) -> dict | None:
        kind, number = json.loads(text)  # ValueError for what is not JSON
        assert number == seq
        return item(seq, kind) if kind == "component" else None

    async def run():
        listening = _Listening(monkeypatch)
        try:
            for seq in (1, 2, 3):
                add(seq)
            stream = item_events(7, after=0, read=read, carried=carried, heartbeat_seconds=60, poll_seconds=60)
            got = [await anext(stream) for _ in range(4)]  # retry, then 1..3: the first pass reads
            assert reads == [0]
            hub.announce(7, 4, add(4))
            hub.announce(7, 5, add(5))
            got += [await anext(stream), await anext(stream)]  # both carried: no read
            assert reads == [0]
            add(6)
            hub.announce(7, 6)  # too big to carry
            hub.announce(7, 7, add(7))
            got += [await anext(stream), await anext(stream)]  # a gap at 6: one read from 5
            assert reads == [0, 5]
            hub.announce(7, 8, add(8, "message"))  # not of the stream's types
            hub.announce(7, 9, add(9))
            got.append(await anext(stream))  # 9 only, no read
            assert reads == [0, 5]
            add(10)
            hub.announce(7, 10, "not JSON")
            got.append(await anext(stream))  # undecodable: read from 9
            assert reads == [0, 5, 9]
            hub.announce(7, 10, json.dumps(["component", 10]))  # its note again, late: nothing
            hub.wake(7)  # a wake with no seq reads, whatever the notes carried
            hub.announce(7, 11, add(11))
            got.append(await anext(stream))
            assert reads == [0, 5, 9, 10]
            await stream.aclose()
            return got
        finally:
            listening.close()

    got = asyncio.run(run())
    sent = [text for text in got[1:]]
    assert sent == [event_text(seq, item(seq)) for seq in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)]
    assert hub.open_streams() == 0


def test_a_subscription_keeps_a_bounded_run_of_carried_items(monkeypatch):
    """A subscription keeps at most ``CARRY_KEEP`` carried items; past it (or for a run
    longer than that) the stream reads; a run is taken once."""

    async def run():
        listening = _Listening(monkeypatch)
        try:
            sub = hub.subscribe(9)
            for seq in range(1, CARRY_KEEP + 6):
                hub.announce(9, seq, f"[{seq}]")
            assert len(sub.carried) == CARRY_KEEP and sub.announced == CARRY_KEEP + 5
            assert sub.take_carried(0, CARRY_KEEP + 5) is None  # the last five were not kept
            assert sub.carried == {}
            for seq in (1, 2, 3):
                hub.announce(9, seq, f"[{seq}]")
            assert sub.take_carried(1, 3) == [(2, "[2]"), (3, "[3]")]
            assert sub.take_carried(1, 3) is None and sub.carried == {}
            hub.unsubscribe(sub)
        finally:
            listening.close()

    asyncio.run(run())


def test_a_note_names_its_item_and_may_carry_it():
    assert parse_item_note("12:7") == (12, 7, None)
    assert parse_item_note('12:7:["component","note",{"a":"b:c"},null,"2026-01-01T00:00:00+00:00"]') == (
        12,
        7,
        '["component","note",{"a":"b:c"},null,"2026-01-01T00:00:00+00:00"]',
    )
    assert parse_note('12:7:["component"]') == (12, 7)
    assert parse_item_note("r3:4") == ("r3", 4, None)
    assert parse_item_note("r3:4:[1]") is None  # a room's line carries nothing
    assert parse_item_note("t3:{}") is None and parse_item_note("x:1") is None and parse_item_note("12:") is None
    assert carried_item('["component","note",{"n":1},"req_1","2026-01-01T05:30:00.000123+05:30"]') == (
        "component",
        "note",
        {"n": 1},
        "req_1",
        datetime(2026, 1, 1, 0, 0, 0, 123, tzinfo=UTC),
    )
    with pytest.raises(ValueError):
        carried_item("[1, 2]")


def _emit_and_close(session: Session) -> int:
    from django.db import connection

    try:
        return emit_item(session, "note", {"n": 1}).seq
    finally:
        connection.close()


def _emit_two_and_close_carried(session: Session) -> list[int]:
    from django.db import connection, transaction

    try:
        with transaction.atomic():
            return [emit_item(session, "note", {"n": 4, "text": "naïve ✓"}).seq, emit_item(session, "message", {}).seq]
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_stream_sends_carried_items_with_no_read(open_tree, org):
    """The real listener, reader and converter (the API stream's): past its first read, a
    stream sends the items their notes carried with no statement, the same events a
    read gives."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    open_tree()
    session = Session.objects.get(organization=org, session_id="eng.standup")
    start = session.item_seq
    emit_item(session, "note", {"n": 0})
    reader = stream_reader(session.pk, None)
    statements: list[int] = []

    def read(cursor: int, limit: int):
        with CaptureQueriesContext(connection) as captured:
            rows = reader(cursor, limit)
        statements.append(len(captured.captured_queries))
        return rows

    async def run():
        stream = item_events(session.pk, after=start, read=read, carried=stream_carried(None), heartbeat_seconds=60)
        try:
            got = [await anext(stream) for _ in range(2)]
            for _ in range(100):
                if hub.listening:
                    break
                await asyncio.sleep(0.05)
            assert hub.listening
            await asyncio.to_thread(_emit_and_close, session)
            got.append(await anext(stream))  # read or carried: the listener's first wake reads
            reads = len(statements)
            seqs = await asyncio.to_thread(_emit_two_and_close_carried, session)
            got += [await anext(stream), await anext(stream)]
            assert len(statements) == reads  # carried: no read
            return got, seqs
        finally:
            await stream.aclose()

    try:
        got, seqs = asyncio.run(run())
    finally:
        connection.close()
    assert set(statements) == {1} and len(statements) <= 2  # the first pass, and the listener's first wake
    assert got[1:] == [event_text(seq, data) for seq, data in reader(start, PAGE)]
    assert [seq for seq, _ in reader(start + 2, PAGE)] == seqs
