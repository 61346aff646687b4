"""The pages' streams in the web server (issue 22 item 2): a room page's stream is a
stream (it counts against ``WORKFORCE_STREAM_LIMIT``, not a web slot), every page stream
ends when its client leaves, and a room's stream is woken by the room's new lines (a
NOTIFY on PostgreSQL) rather than a timer. Fifty of them on a real ``serve``:
``tests/e2e/test_admission.py``."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection

from tests.conftest import MEMBER, on_postgres
from tests.rooms.conftest import ALICE, act, project, room_tree, rooms_runtime  # noqa: F401
from tests.workforce.test_asgi_admission import WAIT, Call, close_kept_threads
from web.live import state_events
from web.views import SESSION_USER
from workforce.streams import CHANNEL, hub, parse_note, room_topic

pytestmark = pytest.mark.django_db(transaction=True)  # the requests run on other threads


@pytest.fixture
def server(monkeypatch, settings):
    from workforce_project import admission, asgi

    settings.WORKFORCE_WEB_CONCURRENCY = 2
    monkeypatch.setattr(asgi._server, "slots", None)
    monkeypatch.setattr(asgi._server, "open_streams", 0)
    monkeypatch.setattr(asgi._server, "places", admission.AddressPlaces())
    yield asgi
    close_kept_threads(asgi)


def cookie_of(user_id: str) -> tuple[bytes, bytes]:
    """The ``Cookie`` header of a browser session acting as ``user_id`` (development)."""
    store = SessionStore()
    store[SESSION_USER] = user_id
    store.create()
    return (b"cookie", f"sessionid={store.session_key}".encode())


def test_a_room_stream_is_a_stream():
    from workforce_project.asgi import is_long_lived

    for path in ("/projects/launch/events", "/mailboxes/eng.standup/events", "/boards/b/events", "/sessions/s/events"):
        assert is_long_lived({"type": "http", "method": "GET", "path": path}), path
    assert not is_long_lived({"type": "http", "method": "GET", "path": "/projects/launch/"})


@pytest.mark.parametrize("path", ["/projects/launch/events", "/mailboxes/eng.standup/events"])
def test_a_page_stream_counts_as_a_stream_and_ends_when_its_client_leaves(project, server, settings, path):
    """With one stream place and two web slots: three room visits held two web slots
    each for good (the stream never heard its client leave) and the third waited."""
    settings.WORKFORCE_STREAM_LIMIT = 3
    cookie = cookie_of(ALICE)

    async def go():
        visits = [Call(path, headers=(cookie,)) for _ in range(3)]
        for visit in visits:
            await asyncio.wait_for(visit.started.wait(), WAIT)
        counted = server.open_streams()
        over = await Call(path, headers=(cookie,)).answer()
        for visit in visits:
            visit.leave()
        await asyncio.wait_for(asyncio.gather(*(v.task for v in visits)), WAIT)
        return [v.status for v in visits], counted, over

    statuses, counted, (status, data) = asyncio.run(go())
    assert statuses == [200, 200, 200] and counted == 3
    assert (status, data["error"]["reason"]) == (503, "too-many-streams")
    assert server.open_streams() == 0 and hub.open_streams() == 0


def test_a_board_stream_ends_when_its_client_leaves(open_tree, server):
    open_tree()
    cookie = cookie_of(MEMBER)

    async def go():
        visit = Call("/boards/eng.incidents.followups/events", headers=(cookie,))
        await asyncio.wait_for(visit.started.wait(), WAIT)
        counted = server.open_streams()
        visit.leave()
        await asyncio.wait_for(visit.task, WAIT)
        return visit.status, counted

    assert asyncio.run(go()) == (200, 1)
    assert server.open_streams() == 0


def test_a_room_stream_is_woken_by_its_topic_not_a_timer(monkeypatch):
    """``state_events`` with a topic: no re-read until the hub wakes it (a poll of 60 s)."""
    monkeypatch.setattr("web.live.is_postgres", lambda alias="default": True)
    monkeypatch.setattr("web.live.SAFETY_READ_SECONDS", 60)
    state = {"signature": "1:1", "reads": 0}

    def read():
        state["reads"] += 1
        return state["signature"], f"<p>{state['signature']}</p>"

    async def go():
        stream = state_events(read, since="1:1", event="room", poll_seconds=60, topic=room_topic(7))
        assert await anext(stream) == "retry: 1000\n\n"
        pending = asyncio.ensure_future(anext(stream))
        for _ in range(50):  # on PostgreSQL the hub's listener wakes everyone once it listens
            if hub.listening or not on_postgres():
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)
        settled = state["reads"]
        await asyncio.sleep(0.5)
        quiet = state["reads"] - settled
        state["signature"] = "2:2"
        hub.wake(room_topic(7))
        event = await asyncio.wait_for(pending, WAIT)
        await stream.aclose()
        return quiet, event

    quiet, event = asyncio.run(go())
    assert quiet == 0  # no re-read on a timer
    assert event == "event: room\ndata: <p>2:2</p>\n\n"
    assert hub.open_streams() == 0
    assert parse_note("r7:3") == ("r7", 3) and parse_note("x7:3") is None


@pytest.mark.postgres
def test_a_room_line_notifies_its_room_when_it_commits(project, act):
    assert on_postgres()
    proj, alice_talk, _ = project
    conf = connection.settings_dict
    listener = psycopg.connect(
        dbname=conf["NAME"], user=conf["USER"], host=conf["HOST"], port=conf["PORT"] or None, autocommit=True
    )
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        act(alice_talk, "post", {"body": "What is blocked?"}, user_id=ALICE)
        notes = [n.payload for n in listener.notifies(timeout=1.0, stop_after=None)]
    finally:
        listener.close()
    room = [note for note in notes if note.startswith(room_topic(proj.pk) + ":")]
    # The post (seq 1), then each seat's answer (2, 3): each wakes the room once.
    assert sorted(room) == [f"{room_topic(proj.pk)}:{seq}" for seq in (1, 2, 3)]


def test_a_room_stream_is_still_members_only(project, server):
    """A stream is admitted by its credentials, then the view's rule: not a member, 404."""

    cookie = cookie_of(MEMBER)

    async def go():
        call = Call("/projects/launch/events", headers=(cookie,))
        await asyncio.wait_for(asyncio.shield(call.task), WAIT)
        return call.status

    assert asyncio.run(go()) == 404
    assert server.open_streams() == 0


@pytest.mark.postgres
def test_a_page_stream_shows_a_carried_item_as_its_read_does(project, act):
    """The pages' streams take what a note carried (``web.views.page_stream_items``): for
    every item a room post, its seats' turns and their answers stored, the mailbox
    page's and the conversation page's fragment from the note is the one a read gives."""
    from web.views import MESSAGE_ITEM, _conversation_fragment, _item_fragment, page_stream_items
    from workforce.models import Session
    from workforce.streams import parse_item_note

    assert on_postgres()
    _, alice_talk, _ = project
    conf = connection.settings_dict
    listener = psycopg.connect(
        dbname=conf["NAME"], user=conf["USER"], host=conf["HOST"], port=conf["PORT"] or None, autocommit=True
    )
    try:
        listener.execute(f"LISTEN {CHANNEL}")
        act(alice_talk, "post", {"body": 'What is <b>blocked</b>? "naïve" ✓'}, user_id=ALICE)
        notes = [parse_item_note(n.payload) for n in listener.notifies(timeout=1.0, stop_after=None)]
    finally:
        listener.close()
    carried = [note for note in notes if note is not None and note[2] is not None]
    shown = 0
    for key, seq, text in carried:
        session = Session.objects.get(pk=key)
        for types, fragment in ((["component"], _item_fragment), ([MESSAGE_ITEM, "component"], _conversation_fragment)):
            read, from_note = page_stream_items(session, types, fragment)
            expected = [got for at, got in read(seq - 1, 1) if at == seq]
            assert from_note(seq, text) == (expected[0] if expected else None), (session.session_id, seq, types)
            shown += bool(expected and expected[0])
    assert len(carried) >= 4 and shown >= 3
