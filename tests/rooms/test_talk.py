"""Talk sessions (spec "A room per project"): join, post and read, and every refusal,
with its reason code and HTTP status."""

from __future__ import annotations

import pytest

from mailboxes.models import Delivery, RoomLine, TalkListing
from mailboxes.projects import do_create_project
from workforce.models import Session
from workforce.refusals import Refusal, http_status_for

from .conftest import ALICE, BOB, CHARTER, OUTSIDER, SEATS


def refused(request, reason: str, status: int, *words: str) -> None:
    assert request.status == "failed", request.output
    assert request.error["reason"] == reason
    assert request.error["message"].startswith(f"{reason}: ")
    assert http_status_for(reason) == status
    for word in words:
        assert word in request.error["message"]


def not_found(call) -> None:
    with pytest.raises(Refusal) as caught:
        call()
    assert caught.value.reason == "session-not-found" and caught.value.http_status == 404


def test_join_binds_and_lists_and_answers_the_listed_session(project, act, org):
    _, alice, bob = project
    assert Session.objects.get(session_id=bob).state == {"talk": {"projectId": "launch"}}
    assert TalkListing.objects.get(user_id=BOB).session.session_id == bob
    again = act(bob, "join", {"projectId": "launch"}, user_id=BOB)
    assert again.output == {"projectId": "launch", "sessionId": bob, "listed": True, "charter": CHARTER, "seats": SEATS}
    # A second session of Bob's binds, but the project keeps listing the first.
    second = act("talk-bob-2", "join", {"projectId": "launch"}, user_id=BOB)
    assert second.output["sessionId"] == bob and second.output["listed"] is False
    assert TalkListing.objects.filter(user_id=BOB).count() == 1


def test_join_refusals(project, act, org):
    _, alice, bob = project
    refused(act("talk-x", "join", {"projectId": "nowhere"}, user_id=BOB), "no-such-project", 404, "nowhere")
    # A project the caller is not in answers as one that does not exist (ids don't leak).
    refused(act("talk-y", "join", {"projectId": "launch"}, user_id=OUTSIDER), "no-such-project", 404, "launch")
    # Bob's unbound talk-x is his own: to anyone else it is no session at all.
    not_found(lambda: act("talk-x", "join", {"projectId": "launch"}, user_id=OUTSIDER))
    do_create_project(org, owner=BOB, title="Other", project_id="other")
    refused(act(bob, "join", {"projectId": "other"}, user_id=BOB), "talk-bound-elsewhere", 409, "launch")
    refused(act("eng.standup", "join", {"projectId": "launch"}, user_id=BOB), "talk-on-a-mailbox", 409, "eng.standup")
    refused(act("eng.elsewhere", "join", {"projectId": "launch"}, user_id=BOB), "talk-on-a-mailbox", 409)
    refused(act("eng.room", "join", {"projectId": "launch"}, user_id=BOB), "mailbox-is-a-template", 409, "eng.room")
    # Another member's talk session is theirs alone: not found, word for word as a missing id.
    not_found(lambda: act(alice, "join", {"projectId": "launch"}, user_id=BOB))
    assert Session.objects.get(session_id="eng.standup").state["members"] == SEATS  # untouched


def test_a_room_action_on_an_unbound_session_is_talk_not_bound(project, act):
    # Bob's own unbound talk session (a join that found no project made it) ...
    refused(act("talk-nobody", "join", {"projectId": "nowhere"}, user_id=BOB), "no-such-project", 404)
    refused(act("talk-nobody", "post", {"body": "hi"}, user_id=BOB), "talk-not-bound", 404, "join")
    refused(act("talk-nobody", "read", user_id=BOB), "talk-not-bound", 404)
    # ... while a talk address nobody holds is no session at all, and stays none.
    not_found(lambda: act("talk-none", "post", {"body": "hi"}, user_id=BOB))
    assert not Session.objects.filter(session_id="talk-none").exists()
    # A mailbox address stays the mailbox's refusal.
    refused(act("eng.nowhere", "post", {"body": "hi"}, user_id=BOB), "mailbox-not-bound", 404)
    assert not RoomLine.objects.exists()


def test_a_person_post_takes_no_author(project, act):
    _, alice, _ = project
    refused(act(alice, "post", {"body": "hi", "author": "eng.lead"}, user_id=ALICE), "author-on-a-person-post", 400)
    assert not RoomLine.objects.exists() and not Delivery.objects.exists()


def test_a_session_that_is_not_the_listed_one_is_refused_and_wakes_nobody(project, act):
    _, alice, bob = project
    act("talk-bob-2", "join", {"projectId": "launch"}, user_id=BOB)
    refused(act("talk-bob-2", "post", {"body": "hi"}, user_id=BOB), "talk-session-not-listed", 403, "talk-bob-2")
    refused(act("talk-bob-2", "read", user_id=BOB), "talk-session-not-listed", 403)
    # Someone else's listed session is not yours either: it is theirs alone, not found.
    not_found(lambda: act(alice, "post", {"body": "hi"}, user_id=BOB))
    not_found(lambda: act(alice, "read", user_id=OUTSIDER))
    assert not RoomLine.objects.exists() and not Delivery.objects.exists()


def test_read_answers_the_room_after_a_cursor(project, act):
    _, alice, bob = project
    mine = act(alice, "post", {"body": "first"}, user_id=ALICE, run=False)
    assert mine.output == {"id": mine.output["id"], "seq": 1, "at": mine.output["at"], "userId": ALICE, "body": "first"}
    act(bob, "post", {"body": "second"}, user_id=BOB, run=False)
    page = act(alice, "read", user_id=ALICE).output
    assert set(page) == {"projectId", "lines", "nextCursor", "charter", "seats"}
    assert (page["projectId"], page["charter"], page["seats"]) == ("launch", CHARTER, SEATS)
    assert [(line["userId"], line["body"]) for line in page["lines"]] == [(ALICE, "first"), (BOB, "second")]
    assert page["nextCursor"] == 2
    later = act(alice, "read", {"after": page["nextCursor"]}, user_id=ALICE).output
    assert later["lines"] == [] and later["nextCursor"] == 2
    act(bob, "post", {"body": "third"}, user_id=BOB, run=False)
    later = act(alice, "read", {"after": 2}, user_id=ALICE).output
    assert [line["body"] for line in later["lines"]] == ["third"] and later["nextCursor"] == 3
    refused(act(alice, "read", {"after": "x"}, user_id=ALICE), "invalid-input", 400, "after")


def test_room_lines_are_in_no_sessions_history(project, act):
    _, alice, _ = project
    act(alice, "post", {"body": "first"}, user_id=ALICE, run=False)
    from workforce.models import Item

    assert not Item.objects.filter(component="mailbox-post").exists()


@pytest.mark.parametrize("action", ["fileTask", "readBoard"])
def test_mailbox_actions_on_a_talk_session_are_not_a_mailboxs(project, act, action):
    _, alice, _ = project
    request = act(alice, action, {"board": "b", "goal": "g"} if action == "fileTask" else {"board": "b"}, user_id=ALICE)
    assert request.status == "failed" and request.error["reason"] == "mailbox-not-bound"


def test_the_http_statuses(project, client):
    _, alice, bob = project
    url = "/api/flows/mailbox/{}/actions/{}"
    answer = client.post(url.format(alice, "post"), {"userId": ALICE, "input": {"body": "hi", "author": "x"}}, format="json")
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "author-on-a-person-post"
    client.post(url.format("talk-bob-2", "join"), {"userId": BOB, "input": {"projectId": "launch"}}, format="json")
    answer = client.post(url.format("talk-bob-2", "post"), {"userId": BOB, "input": {"body": "hi"}}, format="json")
    assert answer.status_code == 403 and answer.json()["error"]["reason"] == "talk-session-not-listed"
    answer = client.post(url.format(alice, "post"), {"userId": BOB, "input": {"body": "hi"}}, format="json")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
    answer = client.post(url.format("talk-new", "join"), {"userId": BOB, "input": {"projectId": "nope"}}, format="json")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "no-such-project"
    answer = client.post(url.format(bob, "post"), {"userId": BOB, "input": {"body": "hello"}}, format="json")
    assert answer.status_code == 202 and answer.json()["output"]["body"] == "hello"


def test_a_talk_session_and_its_seats_conversations_are_read_by_their_member_only(project, act, client):
    _, alice, bob = project
    act(alice, "post", {"body": "private to the room"}, user_id=ALICE)
    for path in (f"/api/sessions/{alice}/requests", f"/api/sessions/{alice}:eng.lead/items", f"/api/sessions/{alice}/items"):
        assert client.get(f"{path}?userId={ALICE}").status_code == 200, path
        for reader in (f"?userId={BOB}", f"?userId={OUTSIDER}", ""):
            answer = client.get(path + reader)
            assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found", (path, reader)
    # Bob reads the room through his own session.
    assert [line["body"] for line in act(bob, "read", user_id=BOB).output["lines"]][0] == "private to the room"
