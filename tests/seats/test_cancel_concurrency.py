"""Cancelling across threads, on PostgreSQL: the cancel arrives from another thread (its
own database connection, as another process would) while a seat's turn, a delegate's
run or a routed post's decision is running there. Each beside a control that shows
the unguarded turn would lose the cancel."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from mailboxes import fairness, notify
from mailboxes.deliveries import do_deliver
from mailboxes.models import Delivery, Line, Route
from mailboxes.routing import do_route_post
from seats import turns
from seats.models import Seat
from seats.turns import run_turn, start_turn
from tests.conftest import MEMBER, OWNER, run_in_threads
from workforce.cancelling import do_cancel_request
from workforce.llm import set_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.refusals import Refusal
from workforce.sessions import do_run_action
from workforce.testing import create_mock_model_resolver

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CANCELLED = {"reason": "cancelled", "message": "cancelled: its run was cancelled"}
WAIT = 30


class Gate:
    """A model call that stops half-way: ``entered`` is set when the call began, and the
    call returns ``answer`` once ``release`` is set."""

    def __init__(self, answer):
        self.answer = answer
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, call):
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            assert self.release.wait(WAIT)
            return self.answer
        return "a second model call"


@pytest.fixture
def pending(wired, org, monkeypatch):
    """A committed post on eng.incidents whose deliveries were written, not yet run."""
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired()
    do_run_action(org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": "disk full"}, user_id=MEMBER)
    return Delivery.objects.get(member="eng.lead")


def deliver_while_cancelled_from_another_thread(delivery: Delivery, gate: Gate):
    """Run the delivery in a worker thread; cancel its turn over HTTP from this thread
    while the model call is half-way; then let the model answer."""
    set_model_resolver(create_mock_model_resolver({"eng.lead": gate}))
    worker = threading.Thread(target=lambda: (outcome.append(do_deliver(delivery.pk)), _close()))
    outcome: list[str] = []
    worker.start()
    assert gate.entered.wait(WAIT)
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action=ON_MAILBOX_POST)
    answer = APIClient().post(f"/api/requests/{turn.request_id}/cancel", {"userId": OWNER}, format="json")
    gate.release.set()
    worker.join(WAIT)
    assert not worker.is_alive()
    return outcome[0], answer, Request.objects.get(pk=turn.pk)


def _close():
    from django.db import connection

    connection.close()


def test_a_worker_running_the_turn_sees_a_cancel_from_another_thread_at_its_next_safe_point(pending):
    # The model asks for a tool first: its next model call is a safe point.
    gate = Gate({"tool_calls": [{"name": "look-around"}]})
    outcome, answer, turn = deliver_while_cancelled_from_another_thread(pending, gate)
    assert answer.status_code == 200 and answer.json()["status"] == "aborted"
    assert outcome == "failed"
    assert gate.calls == 1  # no model call after the cancel
    assert (turn.status, turn.error) == ("aborted", CANCELLED)
    pending.refresh_from_db()
    assert (pending.status, pending.error) == ("failed", CANCELLED)
    assert not Item.objects.filter(request=turn, type="message", data__role="assistant").exists()
    assert [line.body for line in Line.objects.all()] == ["disk full"]


def test_a_turn_whose_last_model_call_was_in_flight_sees_the_cancel_before_it_settles(pending):
    gate = Gate("the answer")
    outcome, answer, turn = deliver_while_cancelled_from_another_thread(pending, gate)
    assert answer.json()["status"] == "aborted" and outcome == "failed"
    assert (turn.status, turn.error) == ("aborted", CANCELLED)
    assert not Item.objects.filter(request=turn, type="message", data__role="assistant").exists()


def test_control_without_the_safe_points_the_turn_runs_on_and_overwrites_the_cancel(pending, monkeypatch):
    """The same cancel, with the turn runner's checks switched off: the answer said
    "aborted", yet the turn called the model again and ended completed."""
    monkeypatch.setattr(turns, "is_cancelled", lambda pk: False)

    def unguarded(result, request):
        request.save(update_fields=["status", "output", "error", "finished_at"])

    monkeypatch.setattr(turns, "_settle_unless_cancelled", unguarded)
    # A turn with a reply settles it in the statement that writes the reply: unguarded too
    # (False: the reply is then written on its own).
    monkeypatch.setattr(turns, "_settle_with_reply", lambda result, request, reply: unguarded(result, request) or False)
    monkeypatch.setattr(turns, "_stop_if_cancelled", lambda log: None)
    gate = Gate({"tool_calls": [{"name": "look-around"}]})
    outcome, answer, turn = deliver_while_cancelled_from_another_thread(pending, gate)
    assert answer.json()["status"] == "aborted"
    assert gate.calls == 2 and outcome == "done"
    assert turn.status == "completed"  # the cancel was lost


def test_a_cancel_racing_a_turns_settle_decides_once(org):
    """Over many tries, a cancel and the turn's settle land at the same moment: either
    the cancel wins (it answers aborted, the request stays aborted, no reply) or the
    settle does (the cancel is refused as finished, the request is completed with its
    reply). Never both."""
    set_model_resolver(create_mock_model_resolver({"*": lambda call: "the answer"}))
    seat = Seat.objects.create(seat_id="eng.lead", kind="agent", scope=Seat.Scope.SHARED)
    session = Session.objects.create(organization=org, session_id="eng.incidents:eng.lead", flow_kind="agent", user_id=OWNER)
    wins = {"cancel": 0, "settle": 0}
    for _attempt in range(12):
        log = start_turn(session, action=ON_MAILBOX_POST, input={}, user_id=OWNER, prompt=None)
        result = run_turn(seat, log, text="hi", history=[], tools=[])

        def race(i: int, log=log, result=result):
            if i == 0:
                from django.db import transaction

                with transaction.atomic():
                    result.finish()
                return result.error.reason if result.error else "completed"
            try:
                return do_cancel_request(org, log.request.request_id, user_id=OWNER).status
            except Refusal as refusal:
                return refusal.reason

        settled, cancelled = run_in_threads(race, 2)
        request = Request.objects.get(pk=log.request.pk)
        replies = Item.objects.filter(request=request, type="message", data__role="assistant").count()
        if cancelled == "aborted":
            assert (settled, request.status, replies) == ("cancelled", "aborted", 0)
            wins["cancel"] += 1
        else:
            assert (cancelled, settled, request.status, replies) == ("request-finished", "completed", "completed", 1)
            wins["settle"] += 1
    assert sum(wins.values()) == 12, wins


def test_a_fan_out_cancelled_from_another_thread_while_its_member_is_picked_wakes_nobody(make_tree, org, monkeypatch):
    from mailboxes.notify import configure_notify, wake_member_seats
    from mailboxes.routing import configure_route, route_by_purpose
    from tests.conftest import hire_tree, open_mailboxes
    from tests.routing.conftest import DESK, DEVICES, routed_tree
    from workforce.testing import mock_evaluation_model

    entered, release = threading.Event(), threading.Event()

    def answers(call):
        entered.set()
        assert release.wait(WAIT)
        return {"member": {"type": "choice", "choice": DEVICES}}

    route = mock_evaluation_model(answers=answers)
    root = make_tree(routed_tree())
    seats = hire_tree(root)
    set_model_resolver(create_mock_model_resolver({"*": ["ok"]}, evaluators={"mailbox-route": route}))
    configure_notify("mailbox", wake_member_seats(seats))
    configure_route("mailbox", route_by_purpose(seats, model=route))
    open_mailboxes(root, org)
    from mailboxes import routing

    monkeypatch.setattr(routing, "enqueue", lambda *args, **kwargs: None)  # the route task runs below, by hand
    do_run_action(org=org, kind="mailbox", session_id=DESK, action="post", input={"body": "printer"}, user_id=MEMBER)
    route_row = Route.objects.get()
    worker = threading.Thread(target=lambda: (do_route_post(route_row.pk), _close()))
    worker.start()
    assert entered.wait(WAIT)
    assert do_cancel_request(org, Request.objects.get(pk=route_row.request_id).request_id, user_id=MEMBER).status == "aborted"
    release.set()
    worker.join(WAIT)
    assert not worker.is_alive()
    assert not Delivery.objects.exists()  # nobody woken
    fan_out = Request.objects.get(pk=route_row.request_id)
    assert (fan_out.status, fan_out.output["member"], fan_out.output["delivery"]) == ("aborted", DEVICES, "none")
