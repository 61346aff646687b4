"""Who said what in a coordinator conversation (issue 25 item 9; docs/architecture.md
"Who said what"): the person's message names the caller the server resolved (it read
``user``), each delegate's answer its seat, in the API (the session's items), the stream
and the conversation page, with a token and without authentication. No body sets it."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from coordinators.constants import COORDINATOR_JUDGMENT, KIND
from coordinators.models import Answer, Post
from coordinators.services import do_ensure_worker_session
from tests.coordinators.conftest import ACCOUNTS, DEVICES, HELP
from tests.posted_by import ALICE, BOB, MODES, Acting, page_writers, people, seat, stream_events, stream_items, user
from workforce.models import Item

DELEGATES = (DEVICES, ACCOUNTS)


def conversation(name: str) -> str:
    return f"{HELP}:{name}"


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture(params=MODES)
def mode(request, settings) -> str:
    settings.WORKFORCE_AUTH = request.param
    return request.param


@pytest.fixture
def acting(client, org, mode, desk) -> Acting:
    """A coordinator over two echo delegates (``everyone``), a conversation each for
    alice and bob."""
    desk(routing="everyone", delegates=DELEGATES, open_session=False)
    acting = Acting(client, people(org), mode)
    for name in (ALICE, BOB):
        do_ensure_worker_session(org, name, HELP)
    return acting


@pytest.fixture
def run(acting, django_capture_on_commit_callbacks):
    """``run(name, input, session=None, **extra) -> response``: ``name`` posts to the
    coordinator in their own conversation over the API; the delegates' turns run."""

    def _run(name: str, input: dict, *, session: str | None = None, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return acting.be(name).act(KIND, session or conversation(name), "run", input, **extra)

    return _run


def messages(acting: Acting, name: str) -> list[dict]:
    items = acting.be(name).client.get(f"/api/sessions/{conversation(name)}/items{acting.query()}").json()["items"]
    return [item["data"] for item in items if item["type"] == "message"]


def writers(found: list[dict]) -> list[tuple[str, str, dict]]:
    """``(role, who the item says, postedBy)`` of each message, the answers by agent."""
    said = [(m["role"], m.get("agentName", ""), m.get("postedBy")) for m in found]
    return said[:1] + sorted(said[1:], key=lambda s: s[1])


def test_each_persons_message_names_that_person_and_each_answer_its_delegate(acting, run, mode):
    for name in (ALICE, BOB):
        assert run(name, {"message": "my laptop will not charge"}).status_code == 202
    for name in (ALICE, BOB):
        assert writers(messages(acting, name)) == [
            ("user", "", user(name, mode)),
            *[("assistant", d, seat(d)) for d in sorted(DELEGATES)],
        ]
    assert [p.posted_by for p in Post.objects.order_by("pk")] == [user(ALICE, mode), user(BOB, mode)]
    assert sorted(a.posted_by["id"] for a in Answer.objects.all()) == sorted([*DELEGATES, *DELEGATES])


@pytest.mark.parametrize(
    "forged",
    [{"extra": {"postedBy": {"kind": "user", "id": BOB, "verified": True}}}, {"input": {"postedBy": seat(DEVICES)}}],
    ids=["body", "input"],
)
def test_a_postedby_a_client_sends_is_refused_and_nothing_is_written(acting, run, forged):
    answer = run(ALICE, {"message": "hi", **forged.get("input", {})}, **forged.get("extra", {}))
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    assert "postedBy" in answer.json()["error"]["message"]
    assert not Post.objects.exists()


def test_nobody_posts_in_another_persons_conversation(acting, run, mode):
    answer = run(BOB, {"message": "as alice"}, session=conversation(ALICE))
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
    if mode == "token":
        answer = run(BOB, {"message": "as alice"}, session=conversation(ALICE), userId=ALICE)
        assert answer.status_code == 403 and answer.json()["error"]["reason"] == "principal-mismatch"
    assert not Post.objects.exists()


def test_the_page_names_the_person_not_user(acting, run, mode, django_capture_on_commit_callbacks):
    run(ALICE, {"message": "my laptop will not charge"})
    with django_capture_on_commit_callbacks(execute=True):  # the page's form, a forged field beside it
        acting.client.post(f"/sessions/{conversation(ALICE)}/post", {"message": "and the phone", "postedBy": BOB})
    html = acting.client.get(f"/sessions/{conversation(ALICE)}/").content.decode()
    shown = page_writers(html)
    people_shown = [entry for entry in shown if entry[1] is None or entry[1]["kind"] == "user"]
    assert people_shown == [(ALICE, user(ALICE, mode)), (ALICE, user(ALICE, mode))]
    assert sorted((entry for entry in shown if entry not in people_shown), key=str) == sorted(
        [(d, seat(d)) for d in DELEGATES] * 2, key=str
    )


@pytest.mark.django_db(transaction=True)
def test_the_stream_and_the_pages_stream_carry_it(acting, run, mode):
    run(ALICE, {"message": "my laptop will not charge"})
    session = conversation(ALICE)
    stored = Item.objects.filter(session__session_id=session)
    items = stream_items(acting.client, f"/api/sessions/{session}/stream{acting.query() or '?'}&after=0", stored.count())
    assert writers([i["data"] for i in items if i["type"] == "message"]) == [
        ("user", "", user(ALICE, mode)),
        *[("assistant", d, seat(d)) for d in sorted(DELEGATES)],
    ]
    shown = stored.filter(type__in=["message", "component"]).count()
    html = "\n".join(stream_events(acting.client, f"/sessions/{session}/events?after=0", shown))
    found = page_writers(html)
    assert found[0] == (ALICE, user(ALICE, mode))
    assert sorted(found[1:], key=str) == sorted([(d, seat(d)) for d in DELEGATES], key=str)


def test_each_delegates_own_session_names_the_seat_on_its_reply_and_nobody_on_its_prompt(acting, run, mode):
    """A delegate's own session: the turn's prompt is the server's framing of the post
    (``<from>, through <coordinator>: <post>``): no postedBy; the reply names the seat."""
    run(ALICE, {"message": "my laptop will not charge"})
    own = Item.objects.filter(type="message").exclude(session__session_id=conversation(ALICE)).order_by("session_id", "seq")
    assert sorted((i.session.state["seat"], i.data["role"], i.data.get("postedBy")) for i in own) == sorted(
        [(d, "user", None) for d in DELEGATES] + [(d, "assistant", seat(d)) for d in DELEGATES]
    )


def test_the_coordinators_own_answer_names_its_seat(client, org, mode, desk, django_capture_on_commit_callbacks):
    desk(routing="judgment", delegates=DELEGATES, open_session=False, scripts={HELP: lambda call: "I answer it myself."})
    acting = Acting(client, people(org), mode)
    do_ensure_worker_session(org, ALICE, HELP)
    with django_capture_on_commit_callbacks(execute=True):
        assert acting.be(ALICE).act(KIND, conversation(ALICE), "run", {"message": "who answers?"}).status_code == 202
    judgment = f"{COORDINATOR_JUDGMENT}:{HELP}"
    assert writers(messages(acting, ALICE)) == [("user", "", user(ALICE, mode)), ("assistant", judgment, seat(HELP))]
    html = acting.client.get(f"/sessions/{conversation(ALICE)}/").content.decode()
    assert page_writers(html) == [(ALICE, user(ALICE, mode)), (judgment, seat(HELP))]
