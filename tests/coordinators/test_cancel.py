"""Cancelling a delegate's run (spec 004 "A round closes…": "One whose run is cancelled
does the same when its flow sets delegatedPostOnFinished, as the built-in agent flow
does"; "delegatedPostOnFinished tells the coordinator when a delegated run is cancelled,
so its round doesn't wait for the deadline"). The run is the delegate's
``onDelegatedPost`` request; the conversation's owner cancels it with
``POST /api/requests/{id}/cancel``, and the delegate reports
``its turn failed: its run was cancelled`` at once."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from coordinators.models import DelegatedPost
from seats.models import Seat
from tests.conftest import MEMBER, OUTSIDER
from workforce.cancelling import do_cancel_request
from workforce.delegation import DELEGATED_POST_ENTRY, delegated_post_entry, delegated_post_on_finished
from workforce.flows import FlowKind, registry
from workforce.models import Request
from workforce.refusals import Refusal

from .conftest import ACCOUNTS, DEVICES, echo_script

REPORTED = {"reason": "cancelled", "message": "cancelled: its turn failed: its run was cancelled"}


def running_run(worker: str) -> Request:
    return Request.objects.get(session__session_id__endswith=f":{worker}", action=DELEGATED_POST_ENTRY, status="running")


def test_a_cancelled_delegate_run_reports_at_once_and_its_round_does_not_wait(desk, org):
    seen = {}

    def devices(call):
        run = running_run(DEVICES)
        assert run.user_id == MEMBER  # the conversation's owner's
        assert do_cancel_request(org, run.request_id, user_id=MEMBER).status == "aborted"
        # At once: before this turn even returns, the round knows.
        delivery = DelegatedPost.objects.get(worker=DEVICES, round=0)
        seen["at once"] = (delivery.status, delivery.reported, delivery.error)
        return "an answer after the cancel"

    d = desk(routing="everyone", rounds=1, delegates=(DEVICES, ACCOUNTS), scripts={DEVICES: devices, ACCOUNTS: echo_script})
    d.run("my laptop won't charge")
    assert seen["at once"] == ("cancelled", True, REPORTED)
    delivery = DelegatedPost.objects.get(worker=DEVICES, round=0)
    assert (delivery.status, delivery.reported, delivery.error) == ("cancelled", True, REPORTED)
    run = delivery.turn_request
    assert (run.status, run.error) == ("aborted", {"reason": "cancelled", "message": "cancelled: its run was cancelled"})
    assert [a for a, _ in d.answers() if a == DEVICES] == []  # its late answer never lands
    assert d.rounds()[0].status == "closed"  # accounts answered, devices reported: nothing to wait for
    report = Request.objects.get(action="onDelegateReport", input__deliveryId=delivery.pk)
    assert report.input["outcome"] == "cancelled" and report.input["error"] == REPORTED


@pytest.fixture
def door_flow(org):
    """``door_flow(on_finished) -> worker id``: a flow of our own, ``cancelling``, whose
    door cancels its own run (as its owner would, from outside) and answers anyway.
    ``on_finished``: True sets ``delegated_post_on_finished``, False sets nothing, a
    callable is set as the flow's own ``request_on_finished``."""
    registered = []

    def build(on_finished) -> str:
        def door(ctx, data):
            do_cancel_request(ctx.org, ctx.request.request_id, user_id=MEMBER)
            return {"text": "too late"}

        facets = {"worker": True}
        if callable(on_finished):
            facets["request_on_finished"] = on_finished
        elif on_finished:
            facets["request_on_finished"] = delegated_post_on_finished
        registry.register(
            FlowKind(kind="cancelling", internal_actions={DELEGATED_POST_ENTRY: delegated_post_entry(door)}, facets=facets)
        )
        registered.append("cancelling")
        Seat.objects.create(
            seat_id="eng.door", kind="cancelling", scope=Seat.Scope.ORG, organization=org, description="Opens doors."
        )
        return "eng.door"

    yield build
    for kind in registered:
        registry.unregister(kind)


@pytest.mark.parametrize("on_finished", [True, False])
def test_a_cancelled_run_reports_at_once_only_when_its_flow_sets_delegated_post_on_finished(desk, door_flow, on_finished):
    worker = door_flow(on_finished)
    d = desk(routing="everyone", rounds=1, delegate_flows=("agent", "cancelling"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": worker})
    d.run("hi")
    delivery = DelegatedPost.objects.get(worker=worker, round=0)
    assert (delivery.status, delivery.reported, delivery.error) == ("cancelled", on_finished, REPORTED)
    assert delivery.turn_request.status == "aborted"
    assert [a for a, _ in d.answers() if a == worker] == []
    # With delegatedPostOnFinished the round closes now; without it, it waits for its deadline.
    assert d.rounds()[0].status == ("closed" if on_finished else "open")


@pytest.mark.parametrize("reports", [True, False])
def test_a_flows_own_request_on_finished_is_asked_with_the_outcome(desk, door_flow, reports):
    # The facet is a function the coordinator calls (RequestOnFinished: outcome -> bool),
    # not a marker compared by identity: a flow's own says what it says.
    asked = []

    def on_finished(outcome: str) -> bool:
        asked.append(outcome)
        return reports

    worker = door_flow(on_finished)
    d = desk(routing="everyone", rounds=1, delegate_flows=("agent", "cancelling"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": worker})
    d.run("hi")
    assert asked and set(asked) == {"cancelled"}
    delivery = DelegatedPost.objects.get(worker=worker, round=0)
    assert (delivery.status, delivery.reported, delivery.error) == ("cancelled", reports, REPORTED)
    assert d.rounds()[0].status == ("closed" if reports else "open")


def test_only_the_conversations_owner_may_cancel_a_delegates_run(desk, org):
    refused = {}

    def devices(call):
        run = running_run(DEVICES)
        with pytest.raises(Refusal) as caught:
            do_cancel_request(org, run.request_id, user_id=OUTSIDER)
        refused["reason"] = caught.value.reason
        client = APIClient()
        answer = client.post(f"/api/requests/{run.request_id}/cancel", {"userId": OUTSIDER}, format="json")
        refused["http"] = (answer.status_code, answer.json()["error"]["reason"])
        return "answered"

    d = desk(routing="everyone", delegates=(DEVICES,), scripts={DEVICES: devices})
    d.run("hi")
    assert refused == {"reason": "request-not-found", "http": (404, "request-not-found")}
    assert DelegatedPost.objects.get(worker=DEVICES).status == "answered"
    assert d.answers() == [(DEVICES, "answered")]
