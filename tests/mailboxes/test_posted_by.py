"""Who said what on a mailbox (issue 25 item 9; docs/architecture.md "Who said what"):
each line's ``postedBy`` is the caller the server resolved (a person: the token's user,
or without authentication the ``userId`` named, ``verified: false``) or the seat whose
turn wrote it, in the API, the stream and the page, beside the spec's ``principal`` (the
mailbox's user, the same on every line) and unverified ``author``. No body sets it."""

from __future__ import annotations

import pytest

from mailboxes.models import Line
from tests.conftest import OWNER
from tests.posted_by import ALICE, BOB, MODES, Acting, page_writers, people, seat, stream_events, stream_items, user
from tests.seats.conftest import ECHO_LISTENER, ECHO_POSTER, SEATS_TREE, seats_runtime, wired  # noqa: F401
from workforce.models import Item

TREE = {**SEATS_TREE, "teams/eng/workers/lead/WORKER.md": ECHO_POSTER, "teams/eng/workers/analyst/WORKER.md": ECHO_LISTENER}
MAILBOX = "eng.standup"
LEAD = "eng.lead"


@pytest.fixture(params=MODES)
def mode(request, settings) -> str:
    settings.WORKFORCE_AUTH = request.param
    return request.param


@pytest.fixture
def acting(client, org, mode, wired) -> Acting:
    """The standup mailbox opened by OWNER, eng.lead an echo seat that posts back what it
    heard (``post-to-mailbox``), alice and bob able to call."""
    wired(TREE)
    return Acting(client, people(org), mode)


@pytest.fixture
def post(acting, django_capture_on_commit_callbacks):
    """``post(name, input, **extra) -> response``: ``name`` posts on the standup over the
    API, committed, with the seats' turns it wakes run (sync cluster)."""

    def _post(name: str, input: dict, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return acting.be(name).act("mailbox", MAILBOX, "post", input, **extra)

    return _post


def heard(body: str) -> str:
    """The echo seat's line: what it heard (the writer it is told is the spec's: author,
    else principal)."""
    return f"{LEAD} heard: {OWNER} in {MAILBOX}: {body}"


def transcript(acting: Acting) -> list[dict]:
    answer = acting.client.get(f"/api/mailboxes/{MAILBOX}/transcript{acting.query()}")
    assert answer.status_code == 200
    return answer.json()["lines"]


def test_each_persons_line_names_that_person_the_principal_names_the_mailbox(acting, post, mode):
    first = post(ALICE, {"body": "alice here"})
    assert first.status_code == 202
    assert first.json()["output"]["postedBy"] == user(ALICE, mode)
    assert post(BOB, {"body": "bob here"}).json()["output"]["postedBy"] == user(BOB, mode)
    people_lines = [line for line in transcript(acting) if not line.get("seatAuthored")]
    assert [(line["body"], line["principal"], line["postedBy"]) for line in people_lines] == [
        ("alice here", OWNER, user(ALICE, mode)),
        ("bob here", OWNER, user(BOB, mode)),
    ]
    assert all("author" not in line and line["authorVerified"] is False for line in people_lines)
    # The line's item (what the session's items and its stream carry) says the same.
    items = acting.client.get(f"/api/sessions/{MAILBOX}/items{acting.query()}").json()["items"]
    posts = [item["data"] for item in items if item["component"] == "mailbox-post" and not item["data"].get("seatAuthored")]
    assert [data["postedBy"] for data in posts] == [user(ALICE, mode), user(BOB, mode)]


def test_a_seats_line_names_the_seat(acting, post, mode):
    post(ALICE, {"body": "status please"})
    assert [(line["body"], line.get("author"), line.get("seatAuthored"), line["postedBy"]) for line in transcript(acting)] == [
        ("status please", None, None, user(ALICE, mode)),
        (heard("status please"), LEAD, True, seat(LEAD)),  # the echo seat posted back what it heard
    ]


def test_a_claimed_author_is_a_label_the_line_still_names_its_poster(acting, post, mode):
    answer = post(ALICE, {"body": "I am the lead", "author": LEAD})
    line = answer.json()["output"]
    assert (line["author"], line["authorVerified"], line["postedBy"]) == (LEAD, False, user(ALICE, mode))
    assert "seatAuthored" not in line


@pytest.mark.parametrize(
    "forged",
    [
        {"extra": {"postedBy": {"kind": "user", "id": BOB, "verified": True}}},  # beside userId and input
        {"input": {"postedBy": {"kind": "seat", "id": LEAD, "verified": True}}},  # inside the post's input
    ],
    ids=["body", "input"],
)
def test_a_postedby_a_client_sends_is_refused_and_nothing_is_written(acting, post, forged):
    answer = post(ALICE, {"body": "hi", **forged.get("input", {})}, **forged.get("extra", {}))
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    assert "postedBy" in answer.json()["error"]["message"]
    assert not Line.objects.exists()


def test_naming_another_user_is_refused_with_a_token_and_unverified_without(acting, post, mode):
    answer = post(ALICE, {"body": "as bob"}, userId=BOB) if mode == "token" else None
    if mode == "token":
        assert answer.status_code == 403 and answer.json()["error"]["reason"] == "principal-mismatch"
        assert not Line.objects.exists()
    else:
        # Without authentication a caller is whoever it names: the line says so.
        line = post(BOB, {"body": "as bob"}).json()["output"]
        assert line["postedBy"] == {"kind": "user", "id": BOB, "verified": False}


def test_the_page_shows_who_wrote_each_line(acting, post, mode):
    post(ALICE, {"body": "from alice"})
    post(BOB, {"body": "from bob", "author": "eng.human"})
    page = acting.be(ALICE).client.get(f"/mailboxes/{MAILBOX}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert page_writers(html) == [
        (ALICE, user(ALICE, mode)),
        (LEAD, seat(LEAD)),
        (BOB, user(BOB, mode)),
        (LEAD, seat(LEAD)),
    ]
    assert ("signed in" if mode == "token" else "named, not signed in") in html
    assert '<span class="author" title="a label the poster chose; the server does not check it">as eng.human</span>' in html


def test_a_postedby_field_on_the_pages_form_is_ignored(acting, mode, django_capture_on_commit_callbacks):
    acting.be(ALICE)
    with django_capture_on_commit_callbacks(execute=True):
        answer = acting.client.post(f"/mailboxes/{MAILBOX}/post", {"body": "from the form", "postedBy": BOB})
    assert answer.status_code == 302
    assert Line.objects.get(body="from the form", seat_authored=False).posted_by == user(ALICE, mode)


def test_a_line_written_before_postedby_was_recorded_has_none(acting, post, mode):
    post(ALICE, {"body": "old"})
    # What the migration leaves: lines with no posted_by, items written without the key.
    Line.objects.update(posted_by=None)
    for item in Item.objects.filter(component="mailbox-post"):
        item.data.pop("postedBy")
        item.save(update_fields=["data"])
    assert ["postedBy" in line for line in transcript(acting)] == [False, False]
    html = acting.client.get(f"/mailboxes/{MAILBOX}/").content.decode()
    assert page_writers(html) == [(OWNER, None), (LEAD, None)]  # the spec's fallback: author, else principal


@pytest.mark.django_db(transaction=True)
def test_the_stream_and_the_pages_stream_carry_it(acting, post, mode):
    post(ALICE, {"body": "from alice"})
    post(BOB, {"body": "from bob"})
    acting.be(ALICE)
    stored = Item.objects.filter(session__session_id=MAILBOX).count()
    items = stream_items(acting.client, f"/api/sessions/{MAILBOX}/stream{acting.query() or '?'}&after=0", stored)
    lines = [item["data"] for item in items if item["component"] == "mailbox-post"]
    assert [(line["body"], line["postedBy"]) for line in lines] == [
        ("from alice", user(ALICE, mode)),
        (heard("from alice"), seat(LEAD)),
        ("from bob", user(BOB, mode)),
        (heard("from bob"), seat(LEAD)),
    ]
    html = "\n".join(stream_events(acting.client, f"/mailboxes/{MAILBOX}/events?after=0", Line.objects.count()))
    assert page_writers(html) == [
        (ALICE, user(ALICE, mode)),
        (LEAD, seat(LEAD)),
        (BOB, user(BOB, mode)),
        (LEAD, seat(LEAD)),
    ]


def test_a_seats_conversation_names_the_seat_on_its_reply_and_nobody_on_its_prompt(acting, post, mode):
    """The seat's own conversation in the mailbox: the turn's prompt is the server's
    framing of the post (``<writer> in <mailbox>: <body>``), written on nobody's behalf,
    so it carries no postedBy (the post's line does); the seat's reply names the seat."""
    post(ALICE, {"body": "status please"})
    conversation = f"{MAILBOX}:{LEAD}"
    acting.be(BOB)  # a seat's conversation in a mailbox is the organization's to read
    items = acting.client.get(f"/api/sessions/{conversation}/items{acting.query()}").json()["items"]
    messages = [item["data"] for item in items if item["type"] == "message"]
    assert [(m["role"], m.get("postedBy")) for m in messages] == [("user", None), ("assistant", seat(LEAD))]
    assert messages[0]["text"] == f"{OWNER} in {MAILBOX}: status please"
    html = acting.client.get(f"/sessions/{conversation}/").content.decode()
    assert page_writers(html) == [("user", None), (LEAD, seat(LEAD))]
