"""How a post finds its member (spec "How a post finds its member", "What routing can't
do"): the hold and its release, one evaluator call, the fallback and its reasons, one
``mailbox-route`` item per client post, only the chosen member told."""

from __future__ import annotations

import pytest

from mailboxes.models import Delivery, Route, RouteLedger
from mailboxes.routing import do_route_post
from seats.models import Seat
from workforce.dispatch import dispatch
from workforce.llm import ModelError, set_model_resolver
from workforce.models import Request
from workforce.testing import mock_evaluation_model

from .conftest import ACCOUNTS, DESK, DEVICES, GENERAL, OWNER, desk_md, lines, ok, route_items, route_of, routed_tree


def silent(call):
    """A seat's model that never answers (its turn fails, so no answer lands)."""
    return ModelError("the model is busy")


def choose(member):
    return {"member": {"type": "choice", "choice": member}}


def deliveries(body: str) -> list[tuple[str, bool]]:
    post_id = route_of(body).post.line_id
    return [(d.member, d.notify_input.get("routed", False)) for d in Delivery.objects.filter(post_id=post_id)]


# --- step 2: one evaluator call ---------------------------------------------------------------


def test_a_post_goes_to_the_member_the_evaluator_picks_and_only_to_it(routed, post):
    routed()
    assert post("my printer is jammed").status == "completed"
    assert deliveries("my printer is jammed") == [(DEVICES, True)]  # nobody else is told
    (item,) = route_items()
    assert item == {"postId": route_of("my printer is jammed").post.line_id, "member": DEVICES, "by": "evaluated"}
    post_line, answer = lines()
    assert (answer.author, answer.seat_authored, answer.answer_to_id) == (DEVICES, True, post_line.pk)


def test_the_evaluator_asks_member_among_members_that_hear_and_have_a_description(routed, post):
    _, resolver = routed()
    route = resolver.evaluators["mailbox-route"]
    post("my printer is jammed")
    (call,) = route.calls
    assert call.block == "mailbox-route" and call.question.name == "member"
    assert call.question.values() == [DEVICES, ACCOUNTS, GENERAL]  # a fallback with a description is a choice too
    assert call.question.choices[0].description.startswith("Phones, laptops, printers")
    assert call.state == {"recent": [], "post": {"from": OWNER, "text": "my printer is jammed"}}


def test_the_evaluator_sees_the_recent_lines_as_from_and_text(routed, post):
    _, resolver = routed()
    post("I forgot my password", author=ACCOUNTS)
    post("my printer is jammed")
    recent = resolver.evaluators["mailbox-route"].calls[1].state["recent"]
    assert recent == [
        {"from": ACCOUNTS, "text": "I forgot my password"},
        {"from": ACCOUNTS, "text": f"{ACCOUNTS} heard: {ACCOUNTS} in {DESK}: I forgot my password"},
    ]


def test_a_client_post_is_routed_by_what_it_says_whatever_author_it_sets(routed, post):
    routed()
    post("my printer is jammed", author=ACCOUNTS)
    assert route_items()[0]["member"] == DEVICES


# --- step 1: the hold ---------------------------------------------------------------------------


def test_the_member_still_on_the_last_client_post_takes_the_next_with_no_model_call(routed, post):
    _, resolver = routed(scripts={DEVICES: silent, "*": ok})
    route = resolver.evaluators["mailbox-route"]
    post("my printer is jammed")  # evaluated -> devices, which doesn't answer
    post("and my password is wrong too")  # held: devices hasn't answered
    assert len(route.calls) == 1  # a held post shows up as no call at all
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (DEVICES, "held")]
    assert deliveries("and my password is wrong too") == [(DEVICES, True)]
    # A post held this way holds nothing: the one after it is routed by what it says.
    post("still locked out of my password")
    assert len(route.calls) == 2
    assert route_items()[-1] == {**route_items()[-1], "member": ACCOUNTS, "by": "evaluated"}


def test_the_hold_is_released_once_the_member_answers(routed, post):
    _, resolver = routed()
    post("my printer is jammed")  # devices answers (echo)
    post("what about my password?")
    assert len(resolver.evaluators["mailbox-route"].calls) == 2
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (ACCOUNTS, "evaluated")]


def test_the_fallback_holds_too(routed, post):
    _, resolver = routed(route=mock_evaluation_model(answers={"member": {"type": "none"}}), scripts={GENERAL: silent, "*": ok})
    post("hello?")
    post("anyone?")
    assert [(i["member"], i["by"]) for i in route_items()] == [(GENERAL, "fallback"), (GENERAL, "held")]
    assert len(resolver.evaluators["mailbox-route"].calls) == 1


def test_a_post_whose_route_is_not_recorded_yet_holds_nothing(routed, post, django_capture_on_commit_callbacks):
    _, resolver = routed(scripts={DEVICES: silent, "*": ok})
    post("my printer is jammed", run=False)  # its route task hasn't run yet
    post("my password expired")  # routed by what it says, not held
    first = route_of("my printer is jammed")
    with django_capture_on_commit_callbacks(execute=True):
        assert do_route_post(first.pk) == "evaluated"
    assert [(i["member"], i["by"]) for i in route_items()] == [(ACCOUNTS, "evaluated"), (DEVICES, "evaluated")]
    assert len(resolver.evaluators["mailbox-route"].calls) == 2


# --- step 3: the fallback and its reasons --------------------------------------------------------


def test_a_failed_call_sends_the_post_to_the_fallback_with_the_reason(routed, post):
    def broken(call):
        raise RuntimeError("evaluator down")

    routed(route=mock_evaluation_model(answers=broken))
    post("my printer is jammed")
    (item,) = route_items()
    assert (item["member"], item["by"], item["reason"]) == (GENERAL, "fallback", "evaluator-failed")
    assert "evaluator down" in item["detail"]
    assert deliveries("my printer is jammed") == [(GENERAL, True)]


def test_an_answer_outside_the_choices_goes_to_the_fallback(routed, post):
    routed(route=mock_evaluation_model(answers=choose("support.lead")))
    post("my printer is jammed")
    (item,) = route_items()
    assert (item["member"], item["by"], item["reason"]) == (GENERAL, "fallback", "choice-not-offered")
    assert '"support.lead"' in item["detail"]


def test_an_answer_of_none_goes_to_the_fallback(routed, post):
    routed(route=mock_evaluation_model(answers={"member": {"type": "none"}}))
    post("hello?")
    assert route_items()[0] | {"detail": ""} == {
        "postId": route_of("hello?").post.line_id,
        "member": GENERAL,
        "by": "fallback",
        "reason": "no-choice",
        "detail": "",
    }


def test_a_model_that_cannot_evaluate_sends_every_post_to_the_fallback(routed, post):
    routed(model="embedded/echo")
    set_model_resolver(None)  # the default resolver: echo answers the seats, and can't evaluate
    post("my printer is jammed")
    post("I forgot my password")
    assert [(i["member"], i["by"], i["reason"]) for i in route_items()] == [
        (GENERAL, "fallback", "evaluator-failed"),
        (GENERAL, "fallback", "evaluator-failed"),
    ]
    assert "embedded/echo cannot evaluate" in route_items()[0]["detail"]


def test_when_no_member_has_a_description_there_is_no_call_and_the_fallback_takes_it(routed, post):
    seats, resolver = routed()
    for seat in seats:
        seat.description = ""
    post("my printer is jammed")
    assert resolver.evaluators["mailbox-route"].calls == []
    assert (route_items()[0]["member"], route_items()[0]["reason"]) == (GENERAL, "no-choices")


def test_when_the_poster_reaches_no_seat_of_the_fallbacks_nobody_answers_and_the_route_says_why(routed, post, other_org):
    elsewhere = Seat.objects.create(
        seat_id=GENERAL, kind="agent", scope=Seat.Scope.ORG, organization=other_org, description="Anything else."
    )
    routed(
        route=mock_evaluation_model(answers={"member": {"type": "none"}}),
        seats_filter=lambda s: s.seat_id != GENERAL,
        extra_seats=[elsewhere],
    )
    post("hello?")
    (item,) = route_items()
    assert (item["member"], item["by"], item["reason"]) == (None, "failed", "fallback-unreachable")
    assert "can reach no seat of the fallback" in item["detail"]
    assert not Delivery.objects.exists() and len(lines()) == 1


def test_a_follow_up_after_an_answer_relies_on_the_call_and_goes_to_the_fallback_when_it_fails(routed, post):
    routed(route=mock_evaluation_model(answers=[choose(DEVICES), RuntimeError("down")]))
    post("my printer is jammed")  # answered by devices
    post("it still jams")  # the call fails: the fallback
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (GENERAL, "fallback")]


def test_a_member_with_no_description_is_never_picked_but_takes_posts_as_fallback_then_holds(routed, post):
    temp = Seat.objects.create(seat_id="support.temp", kind="agent", scope=Seat.Scope.SHARED)  # hire takes no description
    files = routed_tree(
        **{
            "teams/support/mailboxes/desk/MAILBOX.md": desk_md(
                members=(DEVICES, ACCOUNTS, "support.temp"), routing="{fallback: support.temp}"
            )
        }
    )
    _, resolver = routed(
        files,
        extra_seats=[temp],
        route=mock_evaluation_model(answers={"member": {"type": "none"}}),
        scripts={"support.temp": silent, "*": ok},
    )
    post("hello?")
    post("my printer is jammed")
    route = resolver.evaluators["mailbox-route"]
    assert route.calls[0].question.values() == [DEVICES, ACCOUNTS]
    assert [(i["member"], i["by"]) for i in route_items()] == [("support.temp", "fallback"), ("support.temp", "held")]
    assert len(route.calls) == 1


# --- what is routed, and what is recorded ---------------------------------------------------------


def test_a_seat_line_is_never_routed_and_wakes_nobody(routed, org, django_capture_on_commit_callbacks):
    routed()
    with django_capture_on_commit_callbacks(execute=True):
        request = dispatch(
            org=org,
            kind="mailbox",
            session_id=DESK,
            action="seatPost",
            payload={"body": "printer fixed", "author": DEVICES},
            user_id=OWNER,
        )
    assert request.status == "completed"
    assert not Route.objects.exists() and route_items() == [] and not Delivery.objects.exists()
    assert RouteLedger.objects.get().lines[-1]["text"] == "printer fixed"  # the ledger still keeps it


def test_exactly_one_route_item_per_post_even_when_the_task_runs_again(routed, post):
    _, resolver = routed()
    post("my printer is jammed")
    route = route_of("my printer is jammed")
    assert do_route_post(route.pk) == "not-claimed"
    assert len(route_items()) == 1
    assert Request.objects.filter(session__session_id=DESK, action="route").count() == 1
    assert Delivery.objects.filter(post_id=route.post.line_id).count() == 1


def test_the_route_request_says_what_the_member_got(routed, post):
    routed()
    post("my printer is jammed")
    request = Request.objects.get(action="route")
    assert request.internal and request.status == "completed"
    assert request.output | {"postId": None} == {"postId": None, "member": DEVICES, "by": "evaluated", "delivery": "wake"}


def test_a_route_item_never_shows_as_a_line(routed, post, act):
    routed()
    post("my printer is jammed")
    transcript = act(DESK, "read").output["transcript"]
    assert [ln["body"] for ln in transcript] == [
        "my printer is jammed",
        f"{DEVICES} heard: {OWNER} in {DESK}: my printer is jammed",
    ]


def test_a_mailbox_without_routing_on_a_kind_built_with_a_route_wakes_every_agent(routed, post):
    routed(routed_tree(**{"teams/support/mailboxes/desk/MAILBOX.md": desk_md(routing=None)}))
    post("my printer is jammed")
    assert route_items() == [] and not Route.objects.exists()
    post_id = lines()[0].line_id
    assert sorted(d.member for d in Delivery.objects.filter(post_id=post_id)) == sorted([DEVICES, ACCOUNTS, GENERAL])
    assert all("routed" not in d.notify_input for d in Delivery.objects.all())
    assert RouteLedger.objects.get().lines[0]["text"] == "my printer is jammed"


def test_behind_an_external_dispatcher_a_post_is_written_but_nobody_is_picked(routed, post, settings):
    _, resolver = routed()
    settings.WORKFORCE_EXTERNAL_DISPATCHER = True
    assert post("my printer is jammed").status == "completed"
    assert len(lines()) == 1 and not Route.objects.exists() and not Delivery.objects.exists()
    failed = Request.objects.get(action="route")
    assert failed.status == "failed" and failed.error["reason"] == "external-dispatcher"
    assert resolver.evaluators["mailbox-route"].calls == []


@pytest.mark.parametrize("body", ["my printer is jammed"])
def test_route_ledger_names_where_the_last_client_post_went(routed, post, body):
    from mailboxes.routing import read_route_ledger

    routed()
    post(body)
    ledger = read_route_ledger(lines()[0].session)
    assert ledger["lastPost"] == {"id": lines()[0].line_id, "member": DEVICES, "by": "evaluated"}
    assert [ln["text"] for ln in ledger["lines"]] == [body, f"{DEVICES} heard: {OWNER} in {DESK}: {body}"]


def test_a_fallback_added_to_the_file_after_the_mailbox_opened_wakes_nobody(routed, post, make_tree, org):
    from tests.conftest import open_mailboxes

    # Opened first with two members and no routing; then the file adds general and names it
    # the fallback, and the app restarts: the open mailbox keeps the members it was opened with.
    open_mailboxes(
        make_tree(routed_tree(**{"teams/support/mailboxes/desk/MAILBOX.md": desk_md(members=(DEVICES, ACCOUNTS), routing=None)})),
        org,
    )

    def broken(call):
        raise RuntimeError("evaluator down")

    routed(route=mock_evaluation_model(answers=broken))
    post("my printer is jammed")
    (item,) = route_items()
    assert (item["member"], item["by"], item["reason"]) == (None, "failed", "fallback-not-a-member")
    assert f'the fallback "{GENERAL}" is not a member of {DESK}' in item["detail"]
    assert deliveries("my printer is jammed") == []
    assert [line.body for line in lines()] == ["my printer is jammed"]  # nobody answered
