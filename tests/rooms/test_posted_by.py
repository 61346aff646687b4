"""Who said what in a project's room (issue 25 item 9; docs/architecture.md "Who said
what"): a person's room line names the caller the server resolved, a seat's answer the
seat, in the API (``post`` and ``read`` on a talk session), the room page and its stream,
with a token and without authentication. No body sets it."""

from __future__ import annotations

import pytest

from mailboxes.models import RoomLine
from mailboxes.projects import do_create_project
from tests.posted_by import ALICE, BOB, MODES, Acting, page_writers, people, seat, stream_events, user
from tests.rooms.conftest import ANALYST, LEAD, SEATS, room_tree, rooms_runtime  # noqa: F401

PROJECT = "launch"
ALICE_TALK = "talk-alice"
BOB_TALK = "talk-bob"


@pytest.fixture(params=MODES)
def mode(request, settings) -> str:
    settings.WORKFORCE_AUTH = request.param
    return request.param


@pytest.fixture
def acting(client, org, mode, room_tree) -> Acting:
    """A project alice owns with bob as a member, both joined through the API; the room
    template's two echo seats answer each post."""
    room_tree()
    acting = Acting(client, people(org), mode)
    do_create_project(org, owner=ALICE, title="Launch", members=[BOB], project_id=PROJECT)
    for name, talk in ((ALICE, ALICE_TALK), (BOB, BOB_TALK)):
        joined = acting.be(name).act("mailbox", talk, "join", {"projectId": PROJECT})
        assert joined.status_code == 202, joined.json()
    return acting


@pytest.fixture
def post(acting, django_capture_on_commit_callbacks):
    """``post(name, input, **extra) -> response``: ``name`` posts through their own talk
    session, committed, with the seats' answers it wakes run (sync cluster)."""

    def _post(name: str, input: dict, *, talk: str | None = None, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return acting.be(name).act("mailbox", talk or {ALICE: ALICE_TALK, BOB: BOB_TALK}[name], "post", input, **extra)

    return _post


def room(acting: Acting, name: str) -> list[dict]:
    """The room's lines as ``name`` reads them (``read`` through their talk session)."""
    answer = acting.be(name).act("mailbox", {ALICE: ALICE_TALK, BOB: BOB_TALK}[name], "read", {})
    assert answer.status_code == 202
    return answer.json()["output"]["lines"]


def test_each_persons_room_line_names_that_person_and_each_answer_its_seat(acting, post, mode):
    line = post(ALICE, {"body": "What is blocked?"}).json()["output"]
    assert (line["userId"], line["postedBy"]) == (ALICE, user(ALICE, mode))
    post(BOB, {"body": "The release notes."})
    expected = [
        ("What is blocked?", None, user(ALICE, mode)),
        *[(None, answerer, seat(answerer)) for answerer in SEATS],
        ("The release notes.", None, user(BOB, mode)),
        *[(None, answerer, seat(answerer)) for answerer in SEATS],
    ]
    for reader in (ALICE, BOB):  # every member reads the same lines
        lines = room(acting, reader)
        got = [(None if line.get("seatAuthored") else line["body"], line.get("author"), line["postedBy"]) for line in lines]
        assert got[0] == expected[0] and got[3] == expected[3]
        assert sorted(got[1:3], key=lambda g: g[1]) == sorted(expected[1:3], key=lambda g: g[1])
        assert sorted(got[4:6], key=lambda g: g[1]) == sorted(expected[4:6], key=lambda g: g[1])


@pytest.mark.parametrize(
    "forged",
    [{"extra": {"postedBy": {"kind": "user", "id": BOB, "verified": True}}}, {"input": {"postedBy": seat(LEAD)}}],
    ids=["body", "input"],
)
def test_a_postedby_a_client_sends_is_refused_and_nothing_is_written(acting, post, forged):
    answer = post(ALICE, {"body": "hi", **forged.get("input", {})}, **forged.get("extra", {}))
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    assert "postedBy" in answer.json()["error"]["message"]
    assert not RoomLine.objects.exists()


def test_nobody_posts_through_another_members_talk_session(acting, post, mode):
    answer = post(BOB, {"body": "as alice"}, talk=ALICE_TALK)
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
    if mode == "token":
        answer = post(BOB, {"body": "as alice"}, userId=ALICE)
        assert answer.status_code == 403 and answer.json()["error"]["reason"] == "principal-mismatch"
    assert not RoomLine.objects.exists()


def test_the_room_page_shows_who_wrote_each_line(acting, post, mode):
    post(ALICE, {"body": "What is blocked?"})
    post(BOB, {"body": "The release notes."})
    for reader in (ALICE, BOB):
        html = acting.be(reader).client.get(f"/projects/{PROJECT}/").content.decode()
        writers = page_writers(html)
        assert [writers[0], writers[3]] == [(ALICE, user(ALICE, mode)), (BOB, user(BOB, mode))]
        assert sorted(writers[1:3], key=str) == sorted(writers[4:6], key=str) == [(s, seat(s)) for s in sorted(SEATS)]


@pytest.mark.django_db(transaction=True)
def test_the_room_stream_shows_who_wrote_each_line(acting, post, mode):
    post(ALICE, {"body": "What is blocked?"})
    acting.be(BOB)
    [html] = stream_events(acting.client, f"/projects/{PROJECT}/events", 1)
    writers = page_writers(html)
    assert writers[0] == (ALICE, user(ALICE, mode))
    assert sorted(writers[1:], key=str) == [(s, seat(s)) for s in sorted([ANALYST, LEAD])]
