"""Waking the template's seats (spec "A room per project": "A post wakes each seat once,
as the person who posted ..."), through the mailbox's deliveries, in sync mode."""

from __future__ import annotations

from django.test import override_settings

from mailboxes.deliveries import do_deliver, do_sweep_deliveries
from mailboxes.models import Delivery, RoomLine
from mailboxes.rooms import wake_room_seats
from mailboxes.roster import current_roster, set_current_roster
from tests.conftest import mailbox_md
from workforce.dispatch import dispatch
from workforce.flows import registry
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import ActionContext
from workforce.tools import refusal_code

from .conftest import ALICE, ANALYST, BOB, LEAD, ROOM_TREE, SEATS


def answers(post_id: str) -> list[RoomLine]:
    return list(RoomLine.objects.filter(answer_to__line_id=post_id).order_by("author"))


def test_a_post_wakes_each_seat_once_as_the_poster_and_both_members_read_the_answers(project, act, org):
    _, alice, bob = project
    post = act(alice, "post", {"body": "what is blocked?"}, user_id=ALICE).output
    deliveries = list(Delivery.objects.filter(post_id=post["id"]).order_by("member"))
    assert [(d.member, d.mode, d.status) for d in deliveries] == [(ANALYST, "wake", "done"), (LEAD, "wake", "done")]
    assert {d.mailbox.session_id for d in deliveries} == {alice}  # through the poster's session
    for delivery in deliveries:
        data = delivery.notify_input
        assert (data["principal"], data["projectId"], data["member"]) == (ALICE, "launch", delivery.member)
        assert data["answerToken"].startswith("ans_")
    assert deliveries[0].notify_input["answerToken"] != deliveries[1].notify_input["answerToken"]
    # Each seat's turn ran as Alice, in its conversation for Alice in this room.
    for seat in SEATS:
        conversation = Session.objects.get(session_id=f"{alice}:{seat}")
        assert conversation.user_id == ALICE and conversation.parent.session_id == alice
        (turn,) = Request.objects.filter(session=conversation, action=ON_MAILBOX_POST)
        assert turn.status == "completed"
        assert turn.output["reply"] == f"{seat} heard: {ALICE} in {alice}: what is blocked?"
    landed = answers(post["id"])
    assert [(a.author, a.user_id, a.seat_authored) for a in landed] == [(ANALYST, ALICE, True), (LEAD, ALICE, True)]
    for reader, session in ((ALICE, alice), (BOB, bob)):
        lines = act(session, "read", user_id=reader).output["lines"]
        assert [(line["userId"], line.get("author")) for line in lines] == [(ALICE, None), (ALICE, ANALYST), (ALICE, LEAD)] or [
            (line["userId"], line.get("author")) for line in lines
        ] == [(ALICE, None), (ALICE, LEAD), (ALICE, ANALYST)]
        assert lines[1]["seatAuthored"] is True and lines[1]["body"].endswith("what is blocked?")
    # A seat's answer wakes nobody: the only deliveries are the post's.
    assert Delivery.objects.count() == 2


def test_each_seat_keeps_one_conversation_per_person_per_room(project, act):
    _, alice, bob = project
    act(alice, "post", {"body": "one"}, user_id=ALICE)
    act(alice, "post", {"body": "two"}, user_id=ALICE)
    act(bob, "post", {"body": "three"}, user_id=BOB)
    assert sorted(Session.objects.filter(session_id__contains=":").values_list("session_id", flat=True)) == sorted(
        [f"{alice}:{LEAD}", f"{alice}:{ANALYST}", f"{bob}:{LEAD}", f"{bob}:{ANALYST}"]
    )
    assert Request.objects.filter(session__session_id=f"{alice}:{LEAD}", action=ON_MAILBOX_POST).count() == 2
    assert Request.objects.filter(session__session_id=f"{bob}:{LEAD}", action=ON_MAILBOX_POST).count() == 1


# The earlier posts' tasks are dropped on purpose (run=False): with no bound on deliveries
# in flight (mailboxes.fairness), their unfinished deliveries keep no place from the last post's.
@override_settings(WORKFORCE_DELIVERY_SESSION_TASKS=0, WORKFORCE_DELIVERY_ORG_TASKS=0)
def test_a_seat_gets_the_rooms_last_20_lines_with_the_post(project, act):
    _, alice, bob = project
    for n in range(12):
        act(alice if n % 2 else bob, "post", {"body": f"line {n}"}, user_id=ALICE if n % 2 else BOB, run=False)
    post = act(alice, "post", {"body": "and now?"}, user_id=ALICE).output
    recent = Delivery.objects.get(post_id=post["id"], member=LEAD).notify_input["recent"]
    assert len(recent) == 12 and recent[0] == {"from": BOB, "text": "line 0"}
    for n in range(10):
        act(alice, "post", {"body": f"more {n}"}, user_id=ALICE, run=False)
    post = act(alice, "post", {"body": "last"}, user_id=ALICE).output
    recent = Delivery.objects.get(post_id=post["id"], member=LEAD).notify_input["recent"]
    assert len(recent) == 20 and recent[-1] == {"from": ALICE, "text": "more 9"}
    # The model saw them, for this one answer, and they are not kept in the conversation.
    conversation = Session.objects.get(session_id=f"{alice}:{LEAD}")
    assert not any("more 9" in (item.data.get("text") or "") for item in Item.objects.filter(session=conversation))


def _answer(org, session_id, post_id, author, token, *, user_id):
    return dispatch(
        org=org,
        kind="mailbox",
        session_id=session_id,
        action="answer",
        payload={"postId": post_id, "body": "forged", "author": author, **({"token": token} if token else {})},
        user_id=user_id,
    )


def test_a_forged_author_a_token_for_another_seat_or_through_another_session_lands_nothing(project, act, org):
    _, alice, bob = project
    post = act(alice, "post", {"body": "who answers?"}, user_id=ALICE, run=False).output
    lead_token = Delivery.objects.get(post_id=post["id"], member=LEAD).notify_input["answerToken"]
    before = RoomLine.objects.count()
    for session_id, author, token, user_id in (
        (alice, "eng.quiet", lead_token, ALICE),  # a forged author: no delivery of this post to it
        (alice, ANALYST, lead_token, ALICE),  # the lead's token, for another seat
        (alice, LEAD, None, ALICE),  # no token
        (alice, LEAD, "ans_guess", ALICE),  # a guessed one
        (bob, LEAD, lead_token, BOB),  # the right token, through another member's session
    ):
        request = _answer(org, session_id, post["id"], author, token, user_id=user_id)
        assert request.status == "failed" and request.error["reason"] == "answer-token-refused", (author, token)
    assert RoomLine.objects.count() == before
    # The right token through the poster's session lands, once.
    first = _answer(org, alice, post["id"], LEAD, lead_token, user_id=ALICE)
    second = _answer(org, alice, post["id"], LEAD, lead_token, user_id=ALICE)
    assert first.output["landed"] is True and second.output == {
        "landed": False,
        "postId": post["id"],
        "answerId": first.output["line"]["id"],
    }
    assert [(a.author, a.user_id) for a in answers(post["id"])] == [(LEAD, ALICE)]


def test_a_redelivered_delivery_runs_nothing_twice(project, act):
    _, alice, _ = project
    post = act(alice, "post", {"body": "once"}, user_id=ALICE).output
    for delivery in Delivery.objects.filter(post_id=post["id"]):
        assert do_deliver(delivery.pk) == "not-claimed"
    assert len(answers(post["id"])) == 2
    assert Request.objects.filter(action=ON_MAILBOX_POST).count() == 2


def test_a_pending_delivery_is_woken_once_with_its_recorded_token_after_a_crash(project, act, django_capture_on_commit_callbacks):
    _, alice, _ = project
    post = act(alice, "post", {"body": "after the crash"}, user_id=ALICE, run=False).output  # tasks lost
    tokens = dict(Delivery.objects.filter(post_id=post["id"]).values_list("member", "notify_input__answerToken"))
    assert set(tokens) == set(SEATS) and not answers(post["id"])
    # Their tasks were never sent: no enqueue stamp is a held delivery (mailboxes.fairness),
    # which the sweep releases, each with its task.
    Delivery.objects.filter(post_id=post["id"]).update(enqueued_at=None)
    with django_capture_on_commit_callbacks(execute=True):
        swept = do_sweep_deliveries()
    assert len(swept.released) == 2 and not swept.requeued
    assert {d.member: d.notify_input["answerToken"] for d in Delivery.objects.filter(post_id=post["id"])} == tokens
    assert [a.author for a in answers(post["id"])] == sorted(SEATS)
    with django_capture_on_commit_callbacks(execute=True):
        do_sweep_deliveries()
    assert Request.objects.filter(action=ON_MAILBOX_POST).count() == 2


def test_a_fan_out_run_twice_wakes_each_seat_once(project, act, org, django_capture_on_commit_callbacks):
    _, alice, _ = project
    act(alice, "post", {"body": "fan out"}, user_id=ALICE)
    line = RoomLine.objects.get(body="fan out")
    tokens = dict(Delivery.objects.filter(post_id=line.line_id).values_list("member", "notify_input__answerToken"))
    session = Session.objects.get(session_id=alice)
    request = Request.objects.filter(session=session, action="post").last()
    ctx = ActionContext(org=org, session=session, request=request, user_id=ALICE, flow=registry.require("mailbox"))
    with django_capture_on_commit_callbacks(execute=True):
        wake_room_seats(ctx, line.project, line)
    assert Delivery.objects.filter(post_id=line.line_id).count() == 2
    assert dict(Delivery.objects.filter(post_id=line.line_id).values_list("member", "notify_input__answerToken")) == tokens
    assert Request.objects.filter(action=ON_MAILBOX_POST).count() == 2 and len(answers(line.line_id)) == 2


def test_template_edits_reach_every_room_at_the_next_start_lines_kept(project, act, make_tree, org):
    from mailboxes.roster import load_roster

    _, alice, bob = project
    act(alice, "post", {"body": "before"}, user_id=ALICE)
    files = dict(ROOM_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md(
        "The room.", members=(LEAD,), mintFor="projects", body="Only the lead now."
    )
    set_current_roster(load_roster(make_tree(files)))  # the next start
    assert current_roster().room_template().seats == [LEAD]
    post = act(bob, "post", {"body": "after"}, user_id=BOB).output
    assert list(Delivery.objects.filter(post_id=post["id"]).values_list("member", flat=True)) == [LEAD]
    page = act(bob, "read", user_id=BOB).output
    assert (page["charter"], page["seats"]) == ("Only the lead now.", [LEAD])
    assert [line["body"] for line in page["lines"] if not line.get("seatAuthored")] == ["before", "after"]


def test_no_template_no_wake(room_tree, make_tree, act, org):
    from mailboxes.projects import do_create_project

    files = {k: v for k, v in ROOM_TREE.items() if "room/" not in k}
    room_tree(files)
    _, talk = do_create_project(org, owner=ALICE, title="Plain", ready_talk=True)
    act(talk.session_id, "post", {"body": "anyone?"}, user_id=ALICE)
    assert not Delivery.objects.exists()
    page = act(talk.session_id, "read", user_id=ALICE).output
    assert (page["seats"], page["charter"], len(page["lines"])) == ([], "", 1)


TWICE = (
    "---\ndescription: Answers twice.\nmodel: embedded/echo\ntools: [post-to-mailbox]\n---\n\nAnswer in the room.\n"
    '/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "first: {body}"}\n'
    '/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "second: {body}"}\n'
)


def test_a_seat_that_answers_twice_in_its_turn_lands_one_answer(room_tree, act, org):
    from mailboxes.projects import do_create_project

    files = dict(ROOM_TREE)
    files["teams/eng/workers/lead/WORKER.md"] = TWICE
    room_tree(files)
    _, talk = do_create_project(org, owner=ALICE, title="Twice", ready_talk=True)
    post = act(talk.session_id, "post", {"body": "go"}, user_id=ALICE).output
    landed = [a for a in answers(post["id"]) if a.author == LEAD]
    assert [a.body for a in landed] == ["first: go"]  # the tool's first call is the answer; the reply is not handed over
    calls = [
        i.data
        for i in Item.objects.filter(session__session_id=f"{talk.session_id}:{LEAD}", component="tool-call").order_by("seq")
    ]
    assert calls[0]["result"]["handedOver"] is True
    assert refusal_code(calls[1]["result"]) == "already-answered"
    (turn,) = Request.objects.filter(session__session_id=f"{talk.session_id}:{LEAD}", action=ON_MAILBOX_POST)
    assert turn.status == "completed"
