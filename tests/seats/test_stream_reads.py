"""A live stream's read (``workforce.api.views.stream_reader``): the items a mailbox and its
seats' conversations store, read in one statement compiled once, and written as the
same event text ``ItemSerializer`` gives, byte for byte; a stream woken for nothing past
what it read reads nothing (``workforce.streams.item_events`` on PostgreSQL)."""

from __future__ import annotations

import asyncio

import pytest
from django.utils import timezone

from workforce.api.serializers import ItemSerializer
from workforce.api.views import stream_reader
from workforce.models import Item, Request, Session
from workforce.sessions import emit_item
from workforce.streams import PAGE, event_text, hub, item_events


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
