"""Live streams in process (``workforce.streams``, ``GET /api/sessions/{id}/stream``):
who may open one, the NOTIFY the one place items are stored sends after commit, and the
event text a stream writes. The streams themselves, over HTTP, are in
``tests/e2e/test_streams.py``."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import override_settings
from rest_framework.test import APIClient

from tests.conftest import MEMBER, on_postgres
from workforce.models import Item, Membership, Session
from workforce.sessions import do_run_action, emit_item
from workforce.streams import CHANNEL, carried_item, event_text, hub, item_events, parse_item_note, parse_note


def post(org, body: str, session_id: str = "eng.standup"):
    return do_run_action(org=org, kind="mailbox", session_id=session_id, action="post", input={"body": body}, user_id=MEMBER)


@pytest.fixture
def client():
    return APIClient()


@override_settings(WORKFORCE_AUTH="token")
def test_another_organizations_stream_is_404_as_its_items_are(client, open_tree, org, other_org):
    open_tree()
    post(org, "in default")
    bob = User.objects.create_user("bob")
    Membership.objects.create(user=bob, organization=org)
    alice = User.objects.create_user("alice")
    Membership.objects.create(user=alice, organization=other_org)

    client.force_authenticate(alice)
    for path in ("/api/sessions/eng.standup/stream", "/api/sessions/eng.standup/items"):
        answer = client.get(path, HTTP_ACCEPT="text/event-stream" if path.endswith("stream") else "application/json")
        assert answer.status_code == 404, path
        assert answer["Content-Type"] == "application/json"
        assert answer.json()["error"]["reason"] == "session-not-found"

    client.force_authenticate(None)
    answer = client.get("/api/sessions/eng.standup/stream", HTTP_ACCEPT="text/event-stream")
    assert answer.status_code == 401 and answer.json()["error"]["reason"] == "not-authenticated"

    client.force_authenticate(bob)
    answer = client.get("/api/sessions/eng.standup/stream", HTTP_ACCEPT="text/event-stream")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    answer.close()


def test_a_bad_cursor_is_400(client, open_tree):
    open_tree()
    for headers, query in (({"HTTP_LAST_EVENT_ID": "x1"}, ""), ({}, "?after=-1"), ({}, "?after=soon")):
        answer = client.get("/api/sessions/eng.standup/stream" + query, **headers)
        assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"


def test_an_event_is_its_seq_and_one_json_line():
    text = event_text(7, {"seq": 7, "data": {"body": "two\nlines"}})
    assert text == 'id: 7\ndata: {"seq":7,"data":{"body":"two\\nlines"}}\n\n'
    assert parse_note("12:7") == (12, 7)
    assert parse_note("12") is None and parse_note("a:b") is None


def test_a_stream_sends_the_backlog_in_pages_then_what_is_woken(monkeypatch):
    """``item_events`` over a fake store: every row after the cursor, a page at a time,
    then each new row once the hub wakes the session, then a heartbeat when idle."""
    monkeypatch.setattr("workforce.streams.PAGE", 2)
    monkeypatch.setattr("workforce.streams.is_postgres", lambda alias="default": False)
    store = [(seq, {"seq": seq}) for seq in range(1, 6)]
    reads = []

    def read(after, limit):
        reads.append((after, limit))
        return [row for row in store if row[0] > after][:limit]

    async def run():
        stream = item_events(99, after=1, read=read, heartbeat_seconds=0.3, poll_seconds=60)
        got = [await anext(stream)]
        for _ in range(4):
            got.append(await anext(stream))
        store.append((6, {"seq": 6}))
        hub.wake(99)
        got.append(await anext(stream))
        got.append(await anext(stream))  # nothing new: the heartbeat after 0.3 s
        await stream.aclose()
        return got

    got = asyncio.run(run())
    assert got[0] == "retry: 1000\n\n"
    assert [line.split("\n")[0] for line in got[1:6]] == ["id: 2", "id: 3", "id: 4", "id: 5", "id: 6"]
    assert got[6] == ": heartbeat\n\n"
    assert reads[:3] == [(1, 2), (3, 2), (5, 2)]  # pages of 2 until one comes back short
    assert hub.open_streams() == 0  # closing the stream unsubscribed it


def _listen():
    conf = connection.settings_dict
    conn = psycopg.connect(dbname=conf["NAME"], user=conf["USER"], host=conf["HOST"], port=conf["PORT"] or None, autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    return conn


def _notes(conn, timeout: float = 1.0) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=timeout, stop_after=None)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_items_notify_their_ids_and_rows_only_after_commit(open_tree, org):
    assert on_postgres()
    open_tree()
    session = Session.objects.get(organization=org, session_id="eng.standup")
    listener = _listen()
    try:
        with transaction.atomic():
            emit_item(session, "note", {"n": 1})
            emit_item(session, "note", {"n": 2})
            assert _notes(listener, 0.5) == []  # nothing before the commit
        # Each item's note rides its own statement (workforce.sessions.emit_item): its
        # ids and the item as stored, delivered in order at the commit, none before it
        # and none for a rollback.
        notes = [parse_item_note(note) for note in _notes(listener)]
        assert [note[:2] for note in notes] == [(session.pk, 1), (session.pk, 2)]  # type: ignore[index]
        stored = {item.seq: item for item in Item.objects.filter(session=session)}
        assert [carried_item(note[2]) for note in notes] == [  # type: ignore[index, arg-type]
            ("component", "note", {"n": n}, None, stored[n].created_at) for n in (1, 2)
        ]

        with pytest.raises(RuntimeError):
            with transaction.atomic():
                emit_item(session, "note", {"n": 3})
                raise RuntimeError("rolled back")
        assert _notes(listener, 0.5) == []

        post(org, "a post")  # through an action: its mailbox-post item
        session.refresh_from_db()
        item = Item.objects.select_related("request").get(session=session, seq=session.item_seq)
        (note,) = [parse_item_note(note) for note in _notes(listener)]
        assert note is not None and note[:2] == (session.pk, session.item_seq)
        assert carried_item(note[2]) == (  # type: ignore[arg-type]
            "component",
            "mailbox-post",
            item.data,
            item.request.request_id,
            item.created_at,
        )
    finally:
        listener.close()


def emit_and_close(session) -> int:
    try:
        return emit_item(session, "note", {"n": 1}).seq
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_hub_wakes_a_stream_from_a_notify(open_tree, org):
    """The web process's listener turns a committed item into a wake-up of its session's
    streams, with no polling (the safety re-read is seconds away)."""
    open_tree()
    session = Session.objects.get(organization=org, session_id="eng.standup")

    async def run():
        sub = hub.subscribe(session.pk)
        try:
            for _ in range(100):
                if hub.listening:
                    break
                await asyncio.sleep(0.05)
            assert hub.listening
            sub.event.clear()
            seq = await asyncio.to_thread(emit_and_close, session)
            await asyncio.wait_for(sub.event.wait(), timeout=3)
            assert sub.announced == seq  # the note's seq: a stream that read it skips its read
        finally:
            hub.unsubscribe(sub)

    try:
        asyncio.run(run())
    finally:
        connection.close()
