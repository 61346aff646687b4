"""Posting and reading (spec "Posting and reading", "What the transcript proves",
"Showing a mailbox on screen", "A room per project": a template is not a mailbox)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mailboxes.models import Line
from mailboxes.roster import load_roster, set_current_roster
from mailboxes.services import do_open_mailboxes
from tests.conftest import MEMBER, OUTSIDER, OWNER, STANDARD_TREE, mailbox_md
from workforce.models import Item, Request, Session

LINE_KEYS = ["id", "at", "principal", "authorVerified", "body"]


def lines_of(mailbox_id: str) -> list[Line]:
    return list(Line.objects.filter(session__session_id=mailbox_id).order_by("seq"))


# --- post input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        {"body": "hi", "seatAuthored": True},
        {"body": "hi", "authorVerified": True},
        {"body": "hi", "principal": "u_other"},
        {"body": "hi", "to": "eng.lead"},
        {"text": "hi"},
    ],
)
def test_post_takes_body_and_author_only(opened, act, payload):
    request = act("eng.standup", "post", payload)
    assert request.status == "failed"
    assert request.error["reason"] == "invalid-input"
    assert request.error["message"].startswith("invalid-input: ")
    assert not Line.objects.exists()


@pytest.mark.parametrize("body", ["", "   ", "\n\t", None, 42, ["hi"], {"text": "hi"}, True])
def test_post_refuses_a_body_that_is_not_non_empty_text(opened, act, body):
    request = act("eng.standup", "post", {"body": body})
    assert request.status == "failed"
    assert request.error["reason"] == "invalid-input"
    assert not Line.objects.exists()


def test_post_refuses_a_missing_body(opened, act):
    assert act("eng.standup", "post", {"author": "eng.lead"}).error["reason"] == "invalid-input"


@pytest.mark.parametrize("author", ["", 42, None])
def test_post_refuses_an_author_that_is_not_text(opened, act, author):
    assert act("eng.standup", "post", {"body": "hi", "author": author}).error["reason"] == "invalid-input"


def test_post_keeps_the_body_verbatim(opened, act):
    body = "  shipped the reader\n\n- and the tests  "
    assert act("eng.standup", "post", {"body": body}).output["body"] == body


# --- the line --------------------------------------------------------------------------------


def test_a_client_post_with_author_is_exactly_the_spec_line(opened, act):
    request = act("eng.standup", "post", {"body": "shipped the reader", "author": "eng.lead"})
    assert request.status == "completed"
    line = request.output
    assert list(line) == ["id", "at", "principal", "author", "authorVerified", "body"]
    assert line["principal"] == OWNER
    assert line["author"] == "eng.lead"
    assert line["authorVerified"] is False
    assert line["body"] == "shipped the reader"
    assert "seatAuthored" not in line
    assert isinstance(line["at"], int) and line["at"] > 1_600_000_000_000  # milliseconds
    assert len(line["id"]) == 36  # a uuid


def test_a_client_post_without_author_has_no_author_key(opened, act):
    line = act("eng.standup", "post", {"body": "hi"}).output
    assert list(line) == LINE_KEYS
    assert line["authorVerified"] is False


def test_principal_is_the_session_owner_on_every_line(opened, act):
    act("eng.standup", "post", {"body": "one"}, user_id=MEMBER)
    act("eng.standup", "post", {"body": "two", "author": "eng.analyst"}, user_id=OUTSIDER)
    act("eng.standup", "post", {"body": "three"}, user_id=OWNER)
    transcript = act("eng.standup", "read", user_id=OUTSIDER).output["transcript"]
    assert [line["principal"] for line in transcript] == [OWNER, OWNER, OWNER]
    assert len({line["id"] for line in transcript}) == 3


def test_an_author_not_a_member_is_refused_and_nothing_is_written(opened, act):
    request = act("eng.standup", "post", {"body": "hi", "author": "eng.intruder"})
    assert request.status == "failed"
    assert request.error["reason"] == "author-not-a-member"
    assert request.error["message"].startswith("author-not-a-member: ")
    assert '"eng.intruder"' in request.error["message"]
    assert not Line.objects.exists()
    assert not Item.objects.exists()
    stored = Request.objects.get(request_id=request.request_id)
    assert stored.status == "failed" and stored.error == request.error
    assert stored.session.session_id == "eng.standup"


# --- unbound ids and templates ------------------------------------------------------------


def test_posting_to_an_id_nobody_opened_is_mailbox_not_bound(opened, act):
    request = act("eng.lounge", "post", {"body": "anyone?"})
    assert request.status == "failed"
    assert request.error["reason"] == "mailbox-not-bound"
    session = Session.objects.get(session_id="eng.lounge")
    assert session.state == {}  # the empty session stays, inert
    assert session.flow_kind == "mailbox"
    assert not Line.objects.exists() and not Item.objects.filter(session=session).exists()
    assert act("eng.lounge", "read").error["reason"] == "mailbox-not-bound"
    assert act("eng.lounge", "post", {"body": "still?"}).error["reason"] == "mailbox-not-bound"
    assert Session.objects.get(session_id="eng.lounge").state == {}


def test_a_template_with_an_old_session_is_refused_as_a_template(make_tree, org, act):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("Once a mailbox.", body="Talk here.")
    before = load_roster(make_tree(files))
    do_open_mailboxes(org, before.mailboxes, user_id=OWNER)
    set_current_roster(before)
    assert act("eng.room", "post", {"body": "old line"}).status == "completed"

    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room.", mintFor="projects", body="Plan.")
    after = load_roster(make_tree(files))
    do_open_mailboxes(org, after.mailboxes, user_id=OWNER)
    set_current_roster(after)
    post = act("eng.room", "post", {"body": "new line"})
    assert post.error["reason"] == "mailbox-is-a-template"
    assert act("eng.room", "read").error["reason"] == "mailbox-is-a-template"
    assert [line.body for line in lines_of("eng.room")] == ["old line"]  # kept, not served
    assert Session.objects.get(session_id="eng.room").state["charter"].strip() == "Talk here."


def test_a_template_id_nobody_opened_is_refused_as_a_template(make_tree, org, act):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room.", mintFor="projects")
    roster = load_roster(make_tree(files))
    do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    set_current_roster(roster)
    assert act("eng.room", "post", {"body": "hi"}).error["reason"] == "mailbox-is-a-template"


# --- items and sequence -------------------------------------------------------------------------


def test_each_post_leaves_one_mailbox_post_item_carrying_the_line(opened, act):
    first = act("eng.standup", "post", {"body": "one", "author": "eng.lead"})
    second = act("eng.standup", "post", {"body": "two"})
    act("eng.standup", "read")
    act("eng.standup", "post", {"body": "x", "author": "nobody.here"})  # refused: no item
    items = list(Item.objects.filter(session__session_id="eng.standup").order_by("seq"))
    assert [(i.type, i.component) for i in items] == [("component", "mailbox-post")] * 2
    assert [i.data for i in items] == [first.output, second.output]
    assert [i.request.request_id for i in items] == [first.request_id, second.request_id]
    assert [i.seq for i in items] == [1, 2]


def test_lines_get_a_gap_free_sequence_per_mailbox(opened, act):
    for n in range(5):
        act("eng.standup", "post", {"body": f"s{n}"})
        if n % 2:
            act("eng.standup", "post", {"body": "x", "author": "eng.intruder"})  # refused: no seq used
            act("eng.incidents", "post", {"body": f"i{n}"})
    assert [line.seq for line in lines_of("eng.standup")] == [1, 2, 3, 4, 5]
    assert [line.body for line in lines_of("eng.standup")] == ["s0", "s1", "s2", "s3", "s4"]
    assert [line.seq for line in lines_of("eng.incidents")] == [1, 2]


# --- read ----------------------------------------------------------------------------------


def test_read_gives_back_the_mailbox(opened, act):
    posted = act("eng.standup", "post", {"body": "shipped the reader", "author": "eng.lead"}).output
    answer = act("eng.standup", "read").output
    assert answer == {
        "id": "eng.standup",
        "description": "Where the engineering team posts daily status.",
        "members": ["eng.lead", "eng.analyst"],
        "transcript": [posted],
    }
    assert "charter" not in answer


def test_read_lists_boards_only_when_the_mailbox_holds_one_sorted(make_tree, org, act):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/ops/MAILBOX.md"] = mailbox_md("Ops.", boards="[zeta, alpha, mid]")
    roster = load_roster(make_tree(files))
    do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    set_current_roster(roster)
    assert "boards" not in act("eng.standup", "read").output
    assert act("eng.incidents", "read").output["boards"] == ["followups"]
    ops = act("eng.ops", "read").output
    assert ops["boards"] == ["alpha", "mid", "zeta"]
    assert list(ops) == ["id", "description", "members", "boards", "transcript"]


def test_read_ignores_an_after_cursor(opened, act):
    act("eng.standup", "post", {"body": "one"})
    act("eng.standup", "post", {"body": "two"})
    answer = act("eng.standup", "read", {"after": 1}).output
    assert [line["body"] for line in answer["transcript"]] == ["one", "two"]


@pytest.mark.parametrize("payload", [{"limit": 5}, {"body": "x"}, {"after": 1, "since": 0}])
def test_read_refuses_any_other_key(opened, act, payload):
    request = act("eng.standup", "read", payload)
    assert request.status == "failed"
    assert request.error["reason"] == "invalid-input"


def test_read_shows_only_lines_inside_the_history_window(opened, act, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 5
    for n in range(1, 7):
        act("eng.standup", "post", {"body": f"p{n}"})
    # 6 posts; the read itself is the 7th request: the window holds p3..p6 and the read.
    answer = act("eng.standup", "read").output
    assert [line["body"] for line in answer["transcript"]] == ["p3", "p4", "p5", "p6"]
    # reads count as requests: two more reads push p3 and p4 out.
    act("eng.standup", "read")
    answer = act("eng.standup", "read").output
    assert [line["body"] for line in answer["transcript"]] == ["p5", "p6"]
    # refused posts count too.
    act("eng.standup", "post", {"body": "x", "author": "eng.intruder"})
    act("eng.standup", "post", {"body": ""})
    answer = act("eng.standup", "read").output
    assert answer["transcript"] == []
    assert Line.objects.filter(session__session_id="eng.standup").count() == 6  # durable


def test_the_default_history_window_is_50_requests(opened, act, settings):
    assert settings.WORKFORCE_HISTORY_WINDOW == 50  # the default, defined once in settings.py
    for n in range(55):
        act("eng.standup", "post", {"body": f"p{n}"})
    transcript = act("eng.standup", "read").output["transcript"]
    assert len(transcript) == 49
    assert transcript[0]["body"] == "p6"


# --- the internal seatPost -------------------------------------------------------------------


def test_seat_post_writes_a_seat_authored_line(opened, act):
    request = act("eng.standup", "seatPost", {"body": "done", "author": "eng.lead"}, internal=True)
    assert request.status == "completed"
    assert request.output["seatAuthored"] is True
    assert request.output["author"] == "eng.lead"
    assert request.output["authorVerified"] is False
    assert request.output["principal"] == OWNER
    assert Line.objects.get().seat_authored is True
    assert Item.objects.get().data == request.output


def test_seat_post_refuses_a_seat_not_a_member(opened, act):
    request = act("eng.standup", "seatPost", {"body": "done", "author": "eng.other"}, internal=True)
    assert request.error["reason"] == "author-not-a-member"
    assert not Line.objects.exists()


def test_seat_post_needs_an_author(opened, act):
    assert act("eng.standup", "seatPost", {"body": "done"}, internal=True).error["reason"] == "invalid-input"


def test_seat_post_is_not_reachable_by_a_client(opened):
    client = APIClient()
    response = client.post(
        "/api/flows/mailbox/eng.standup/actions/seatPost",
        {"userId": MEMBER, "input": {"body": "pretend", "author": "eng.lead"}},
        format="json",
    )
    assert response.status_code == 404
    assert response.json()["error"]["reason"] == "action-not-found"
    assert not Line.objects.exists()


def test_seat_post_is_not_reachable_without_internal(opened, act):
    from workforce.refusals import Refusal

    with pytest.raises(Refusal) as caught:
        act("eng.standup", "seatPost", {"body": "pretend", "author": "eng.lead"})
    assert caught.value.reason == "action-not-found"
