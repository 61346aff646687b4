"""Cancelling a routed post's fan-out (spec "What routing can't do"): "If the fan-out is
cancelled before the route is recorded in mailboxRouteLedger, nobody is woken, the
fallback included. If the route was already recorded there, the chosen member is woken
and answers, though the fan-out ends aborted. After a cancel, a mailbox-route item can
name a member who was never woken."

The fan-out is the post's ``route`` request: the poster's, running from the post until
its member's delivery settles."""

from __future__ import annotations

import pytest

from mailboxes.deliveries import do_deliver
from mailboxes.models import Delivery
from mailboxes.routing import MailboxRoute, RouteDecision, configure_route, do_route_post
from tests.conftest import OUTSIDER
from workforce.cancelling import do_cancel_request
from workforce.models import Request
from workforce.refusals import Refusal
from workforce.testing import mock_evaluation_model

from .conftest import DESK, DEVICES, MEMBER, OWNER, lines, printer_route, route_items, route_of

BODY = "my printer is jammed"


def fan_out(body: str = BODY) -> Request:
    return Request.objects.get(pk=route_of(body).request_id)


def test_a_routed_post_is_a_running_fan_out_of_the_posters_until_its_member_answers(routed, post, org):
    routed()
    posted = post(BODY, run=False)
    request = fan_out()
    assert (request.action, request.status, request.user_id, request.internal) == ("route", "running", MEMBER, True)
    assert request.parent_request_id == posted.pk and request.input == {"postId": lines()[0].line_id}
    assert do_route_post(route_of(BODY).pk) == "evaluated"
    assert fan_out().status == "running"  # decided and handed over; its member has not answered yet
    (delivery,) = Delivery.objects.all()
    assert do_deliver(delivery.pk) == "done"
    request = fan_out()
    assert request.status == "completed" and request.finished_at is not None
    assert request.output | {"postId": None} == {"postId": None, "member": DEVICES, "by": "evaluated", "delivery": "wake"}


def test_a_fan_out_cancelled_before_its_route_is_recorded_wakes_nobody_the_fallback_included(routed, post, org):
    _, resolver = routed()
    post(BODY, run=False)
    assert do_cancel_request(org, fan_out().request_id, user_id=MEMBER).status == "aborted"
    assert do_route_post(route_of(BODY).pk) == "failed"
    assert resolver.evaluators["mailbox-route"].calls == []  # nobody is asked either
    (item,) = route_items()
    assert (item["member"], item["by"], item["reason"]) == (None, "failed", "cancelled")
    assert item["detail"] == "the fan-out was cancelled before a member was picked"
    assert not Delivery.objects.exists()  # not devices, not the fallback general
    assert [line.body for line in lines()] == [BODY]
    request = fan_out()
    assert request.status == "aborted" and request.error["reason"] == "cancelled"
    assert request.output["delivery"] == "none"


def test_a_fan_out_cancelled_while_its_member_is_picked_names_a_member_who_is_never_woken(routed, post, org):
    def answers(call):
        do_cancel_request(org, fan_out().request_id, user_id=MEMBER)  # arrives mid-decision
        return {"member": {"type": "choice", "choice": DEVICES}}

    routed(route=mock_evaluation_model(answers=answers))
    post(BODY)
    (item,) = route_items()
    assert (item["member"], item["by"]) == (DEVICES, "evaluated")
    assert not Delivery.objects.exists()
    assert [line.body for line in lines()] == [BODY]  # nobody answered
    request = fan_out()
    assert (request.status, request.output["delivery"]) == ("aborted", "none")


def test_a_fan_out_cancelled_after_its_route_is_recorded_still_gets_its_answer_and_ends_aborted(
    routed, post, org, django_capture_on_commit_callbacks
):
    routed()
    post(BODY, run=False)
    with django_capture_on_commit_callbacks(execute=False):
        assert do_route_post(route_of(BODY).pk) == "evaluated"
    assert do_cancel_request(org, fan_out().request_id, user_id=MEMBER).status == "aborted"
    (delivery,) = Delivery.objects.all()
    assert delivery.member == DEVICES
    assert do_deliver(delivery.pk) == "done"
    assert [line.body for line in lines()] == [BODY, f"{DEVICES} heard: {OWNER} in {DESK}: {BODY}"]
    assert lines()[1].answer_to_id == lines()[0].pk
    request = fan_out()
    assert request.status == "aborted" and request.error == {"reason": "cancelled", "message": "cancelled: its run was cancelled"}
    assert request.output["delivery"] == "wake"


def test_a_fan_out_is_the_posters_to_cancel_and_a_finished_one_is_refused(routed, post, org):
    routed()
    post(BODY)
    request = fan_out()
    assert request.status == "completed"
    with pytest.raises(Refusal) as caught:
        do_cancel_request(org, request.request_id, user_id=OUTSIDER)
    assert caught.value.reason == "not-request-owner"  # a mailbox's fan-out: OUTSIDER reads it
    with pytest.raises(Refusal) as caught:
        do_cancel_request(org, request.request_id, user_id=MEMBER)
    assert caught.value.reason == "request-finished"


class Nobody(MailboxRoute):
    def decide(self, route):
        return RouteDecision(None, "failed", "fallback-unreachable", "nobody can take it")


def test_a_fan_out_whose_post_goes_to_nobody_completes_when_it_is_decided(routed, post):
    routed()
    configure_route("mailbox", Nobody())
    post(BODY)
    (item,) = route_items()
    assert (item["member"], item["by"]) == (None, "failed")
    assert (fan_out().status, fan_out().output["delivery"]) == ("completed", "none")


def test_a_cancelled_members_turn_leaves_its_fan_out_completed(routed, post, org):
    """Cancelling the member's own turn (not the fan-out) fails the delivery; the fan-out
    did its part and completes."""

    def script(call):
        turn = Request.objects.get(session__session_id=f"{DESK}:{DEVICES}", status="running")
        do_cancel_request(org, turn.request_id, user_id=turn.user_id)
        return "too late"

    routed(route=printer_route(), scripts={DEVICES: script})
    post(BODY)
    (delivery,) = Delivery.objects.all()
    assert delivery.status == "failed" and delivery.error["reason"] == "cancelled"
    assert [line.body for line in lines()] == [BODY]
    assert fan_out().status == "completed"
