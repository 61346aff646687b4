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


# ----------------------------------------------------------------------------- access, again, while open


class _Request:
    """What ``access_held`` reads of the request that opened a stream."""

    def __init__(self, user, auth=None, session=None):
        self.user, self.auth, self.session = user, auth, session


@override_settings(WORKFORCE_AUTH="token")
def test_a_stream_holds_only_while_its_account_keeps_its_access(org, other_org):
    """``access_held``: True while the account is active, a member of the organization the
    stream was opened in and holds the token (or login) it came with; False once it is
    moved to another organization, deactivated, deleted, its token deleted or its login
    ended; and False when the read's own rule (a recheck) refuses."""
    from django.contrib.sessions.backends.db import SessionStore
    from django.http import Http404
    from rest_framework.authtoken.models import Token

    from workforce.principals import Principal, access_held
    from workforce.refusals import Refusal

    bob = User.objects.create_user("bob")
    membership = Membership.objects.create(user=bob, organization=org)
    token = Token.objects.create(user=bob)
    principal = Principal(user_id="bob", org=org, authenticated=True)

    held = access_held(_Request(bob, auth=token), principal)
    assert held()
    membership.organization = other_org
    membership.save()
    assert not held()  # moved to another organization
    membership.organization = org
    membership.save()
    assert held()
    bob.is_active = False
    bob.save()
    assert not held()
    bob.is_active = True
    bob.save()
    Token.objects.filter(user=bob).delete()
    assert not held()  # its token deleted (a new one is not the one it came with)
    Token.objects.create(user=bob)
    assert not held()

    login = SessionStore()
    login["_auth_user_id"] = str(bob.pk)
    login.create()
    by_login = access_held(_Request(bob, session=login), principal)
    assert by_login()
    login.delete()
    assert not by_login()  # logged out

    def refused() -> None:
        raise Refusal("session-not-found", "gone")

    def missing() -> None:
        raise Http404("gone")

    fresh = Token.objects.get(user=bob)
    assert access_held(_Request(bob, auth=fresh), principal, lambda: None)()
    assert not access_held(_Request(bob, auth=fresh), principal, refused)()
    assert not access_held(_Request(bob, auth=fresh), principal, missing)()
    bob.delete()
    assert not access_held(_Request(bob, auth=fresh), principal)()  # deleted


def test_without_authentication_only_the_reads_own_rule_is_checked_again(org):
    from workforce.principals import Principal, access_held
    from workforce.refusals import Refusal

    principal = Principal(user_id="u_42", org=org)
    assert access_held(_Request(None), principal)()

    def refused() -> None:
        raise Refusal("session-not-found", "gone")

    assert not access_held(_Request(None), principal, refused)()


def test_a_stream_whose_reader_lost_access_ends_before_its_next_event(monkeypatch):
    """Checked before an event once ``ACCESS_RECHECK_SECONDS`` passed since the last
    check: while it holds, events flow; once it fails, the stream ends, sending nothing
    more (neither the items read nor an answer's preview)."""
    monkeypatch.setattr("workforce.streams.is_postgres", lambda alias="default": False)
    monkeypatch.setattr("workforce.streams.ACCESS_RECHECK_SECONDS", 0.0)
    monkeypatch.setattr("workforce.streams.release_connection", lambda: None)
    store = [(1, {"seq": 1}), (2, {"seq": 2})]
    allowed = [True]
    checks = []

    def still_allowed() -> bool:
        checks.append(allowed[0])
        return allowed[0]

    def read(after, limit):
        return [row for row in store if row[0] > after][:limit]

    async def run():
        stream = item_events(
            5, after=0, read=read, still_allowed=still_allowed, poll_seconds=0.01, heartbeat_seconds=60, partial=None
        )
        got = [await anext(stream) for _ in range(3)]  # retry, 1, 2
        allowed[0] = False
        store.append((3, {"seq": 3}))
        with pytest.raises(StopAsyncIteration):
            await anext(stream)
        return got

    got = asyncio.run(run())
    assert [text.split("\n")[0] for text in got[1:]] == ["id: 1", "id: 2"]
    assert checks == [True, True, False]


@override_settings(WORKFORCE_AUTH="token")
def test_a_head_of_a_stream_answers_its_headers_and_holds_nothing(client, open_tree, org):
    open_tree()
    bob = User.objects.create_user("bob")
    Membership.objects.create(user=bob, organization=org)
    client.force_authenticate(bob)
    answer = client.head("/api/sessions/eng.standup/stream")
    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    assert not getattr(answer, "streaming", False) and answer.content == b""
    assert hub.open_streams() == 0
    client.force_authenticate(None)
    assert client.head("/api/sessions/eng.standup/stream").status_code == 401
