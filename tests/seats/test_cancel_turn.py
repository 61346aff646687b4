"""A seat's turn that is cancelled (``POST /api/requests/{id}/cancel``) stops at its next
safe point, whoever runs it: before a model call, between tool calls, before it settles.
Its request stays ``aborted`` (``cancelled: its run was cancelled``), no reply is
written, and its caller settles its own work item as for a failed turn: a mailbox
delivery is failed, a board row is parked."""

from __future__ import annotations

import pytest

from boards.models import BoardTask
from mailboxes.models import Delivery, Line
from seats.drains import configure_board_drains
from seats.models import Seat
from seats.turns import run_turn, start_turn
from tests.conftest import MEMBER, OWNER, hire_tree, mailbox_md, open_mailboxes
from workforce.cancelling import do_cancel_request
from workforce.llm import set_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import do_run_action
from workforce.testing import create_mock_model_resolver
from workforce.tools import Tool

from .conftest import worker_md

CANCELLED = {"reason": "cancelled", "message": "cancelled: its run was cancelled"}


@pytest.fixture
def turn(org):
    """``turn() -> (seat, log)``: a seat of the agent kind and a started turn (a running
    ``onMailboxPost`` request of OWNER's on its conversation)."""

    def _turn():
        seat = Seat.objects.create(seat_id="eng.lead", kind="agent", scope=Seat.Scope.SHARED, instructions="You help.")
        session = Session.objects.create(organization=org, session_id="eng.incidents:eng.lead", flow_kind="agent", user_id=OWNER)
        log = start_turn(session, action=ON_MAILBOX_POST, input={}, user_id=OWNER, prompt={"role": "user", "text": "hi"})
        return seat, log

    return _turn


def cancel(org, request: Request) -> Request:
    return do_cancel_request(org, request.request_id, user_id=request.user_id)


def replies(log) -> list[dict]:
    return [i.data for i in Item.objects.filter(request=log.request, type="message") if i.data["role"] == "assistant"]


def test_a_turn_cancelled_before_its_model_call_never_calls_it(org, turn):
    resolver = create_mock_model_resolver({"*": ["never"]})
    set_model_resolver(resolver)
    seat, log = turn()
    cancel(org, log.request)
    result = run_turn(seat, log, text="hi", history=[], tools=[])
    assert resolver.calls == []
    assert (result.error.reason, result.error.message) == ("cancelled", "cancelled: its run was cancelled")
    result.finish()
    request = Request.objects.get(pk=log.request.pk)
    assert (request.status, request.error, request.output) == ("aborted", CANCELLED, None)
    assert replies(log) == []


def test_a_turn_cancelled_between_tool_calls_calls_no_further_tool(org, turn):
    called = []

    def first(ctx, args):
        called.append("first")
        cancel(org, ctx.request)
        return {"ok": True}

    def second(ctx, args):
        called.append("second")
        return {"ok": True}

    tools = [Tool(name, "A tool.", {"type": "object"}, fn) for name, fn in (("first", first), ("second", second))]
    resolver = create_mock_model_resolver(
        {"*": [{"tool_calls": [{"name": "first"}, {"name": "second"}]}, "done, after the tools"]}
    )
    set_model_resolver(resolver)
    seat, log = turn()
    result = run_turn(seat, log, text="hi", history=[], tools=tools)
    assert called == ["first"]
    assert len(resolver.calls) == 1  # no model call after the cancel either
    assert result.error.reason == "cancelled"
    result.finish()
    assert Request.objects.get(pk=log.request.pk).status == "aborted"
    assert [i.data["name"] for i in Item.objects.filter(request=log.request, component="tool-call")] == ["first"]


def test_a_cancel_during_the_model_call_stops_the_tools_it_asked_for(org, turn, monkeypatch):
    """The first tool call is a safe point too: a cancel that came while the model was
    thinking never lets its answer's tools run (post-to-mailbox would post the reply)."""
    called = []

    def post_it(ctx, args):
        called.append("post")
        return {"ok": True}

    resolver = create_mock_model_resolver({"*": [{"tool_calls": [{"name": "post_it"}]}, "never"]})
    set_model_resolver(resolver)
    seat, log = turn()
    model = resolver.resolve("embedded/echo", block=seat.seat_id)
    complete = type(model).complete

    def cancelled_while_thinking(self, call):
        reply = complete(self, call)
        cancel(org, log.request)
        return reply

    monkeypatch.setattr(type(model), "complete", cancelled_while_thinking)
    result = run_turn(seat, log, text="hi", history=[], tools=[Tool("post_it", "Post.", {"type": "object"}, post_it)])
    assert called == [] and len(resolver.calls) == 1
    assert result.error.reason == "cancelled"
    result.finish()
    assert Request.objects.get(pk=log.request.pk).status == "aborted"
    assert not Item.objects.filter(request=log.request, component="tool-call").exists()


def test_a_cancel_during_a_later_model_call_stops_its_tools_though_the_last_tool_call_read_the_flag(org, turn, monkeypatch):
    """On PostgreSQL the tool-call item's statement reads the cancel flag for the safe
    point right after it (the next model call): that reading is used once, so a cancel
    that comes during the model's second call still stops the tools that call asked for."""
    called = []

    def tool(name):
        def call(ctx, args):
            called.append(name)
            return {"ok": True}

        return Tool(name, "A tool.", {"type": "object"}, call)

    resolver = create_mock_model_resolver(
        {"*": [{"tool_calls": [{"name": "first"}]}, {"tool_calls": [{"name": "second"}]}, "never"]}
    )
    set_model_resolver(resolver)
    seat, log = turn()
    model = resolver.resolve("embedded/echo", block=seat.seat_id)
    complete = type(model).complete

    def cancelled_while_thinking_the_second_time(self, call):
        reply = complete(self, call)
        if len(resolver.calls) == 2:
            cancel(org, log.request)
        return reply

    monkeypatch.setattr(type(model), "complete", cancelled_while_thinking_the_second_time)
    result = run_turn(seat, log, text="hi", history=[], tools=[tool("first"), tool("second")])
    assert called == ["first"] and len(resolver.calls) == 2
    assert result.error.reason == "cancelled"
    result.finish()
    assert Request.objects.get(pk=log.request.pk).status == "aborted"
    assert [i.data["name"] for i in Item.objects.filter(request=log.request, component="tool-call")] == ["first"]


def test_a_turn_cancelled_before_it_settles_writes_no_reply_and_stays_aborted(org, turn):
    set_model_resolver(create_mock_model_resolver({"*": ["an answer nobody wants"]}))
    seat, log = turn()
    result = run_turn(seat, log, text="hi", history=[], tools=[])
    assert result.error is None and result.reply == "an answer nobody wants"
    cancel(org, log.request)
    seen = []
    result.after.append(lambda r: seen.append(r.error.reason if r.error else None))
    result.finish()
    assert result.error.reason == "cancelled" and seen == ["cancelled"]
    request = Request.objects.get(pk=log.request.pk)
    assert (request.status, request.error, request.output) == ("aborted", CANCELLED, None)
    assert replies(log) == []


def test_a_turn_that_settled_first_refuses_the_late_cancel(org, turn):
    set_model_resolver(create_mock_model_resolver({"*": ["answered"]}))
    seat, log = turn()
    run_turn(seat, log, text="hi", history=[], tools=[]).finish()
    from workforce.refusals import Refusal

    with pytest.raises(Refusal) as caught:
        cancel(org, log.request)
    assert caught.value.reason == "request-finished"
    assert Request.objects.get(pk=log.request.pk).status == "completed"


def test_a_woken_seats_cancelled_turn_fails_its_delivery_and_posts_nothing(wired, post, org):
    wired()

    def script(call):
        request = Request.objects.get(session__session_id="eng.incidents:eng.lead", status="running")
        cancel(org, request)  # its owner is the mailbox's principal
        return "too late"

    set_model_resolver(create_mock_model_resolver({"eng.lead": script, "*": ["ok"]}))
    post("eng.incidents", "the disk is full")
    lead = Delivery.objects.get(member="eng.lead")
    assert (lead.status, lead.error) == ("failed", CANCELLED)
    assert Delivery.objects.get(member="eng.analyst").status == "done"  # the others run
    turn_request = lead.turn_request
    assert (turn_request.status, turn_request.user_id, turn_request.error) == ("aborted", OWNER, CANCELLED)
    failed = Request.objects.get(session__session_id="eng.incidents", action="deliverPost")
    assert failed.error["reason"] == "cancelled"
    assert failed.error["message"] == (
        f"cancelled: the delivery of post {lead.post_id} to eng.lead failed: its run was cancelled"
    )
    assert not Item.objects.filter(request=turn_request, type="message", data__role="assistant").exists()
    assert [line.body for line in Line.objects.order_by("seq")] == ["the disk is full"]


def test_a_board_rows_cancelled_run_parks_the_row(make_tree, org, django_capture_on_commit_callbacks):
    board = "eng.incidents.followups"
    root = make_tree(
        {
            "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", members=("eng.lead",), boards="[followups]"),
            "teams/eng/workers/lead/WORKER.md": worker_md(model="embedded/echo", drains=f"[{board}]"),
        }
    )
    roster = open_mailboxes(root, org)
    seats = hire_tree(root)
    configure_board_drains("mailbox", seats, [m.board_id(b) for m in roster.mailboxes for b in m.boards])

    def script(call):
        request = Request.objects.get(action="runTask", status="running")
        cancel(org, request)
        return "too late"

    set_model_resolver(create_mock_model_resolver({"eng.lead": script}))
    with django_capture_on_commit_callbacks(execute=True):
        filed = do_run_action(
            org=org,
            kind="mailbox",
            session_id="eng.incidents",
            action="fileTask",
            input={"board": "followups", "goal": "Write the postmortem."},
            user_id=MEMBER,
        )
    task = BoardTask.objects.get(task_id=filed.output["taskId"])
    run = Request.objects.get(action="runTask")
    assert (run.status, run.error) == ("aborted", CANCELLED)
    assert (task.status, task.output) == ("parked", None)
    assert task.changes.order_by("id").last().data == {"reason": f"its run {run.request_id} was cancelled"}
    assert Request.objects.filter(action="runTask").count() == 1  # not run again


def test_a_delivery_whose_cancelled_turn_was_cut_short_is_not_run_again(wired, org, monkeypatch):
    """The worker died after the cancel and before it settled: the delivery is claimed
    again once its lease lapses, and fails ``cancelled`` instead of running the turn anew."""
    from datetime import timedelta

    from django.utils import timezone

    from mailboxes import deliveries, fairness, notify

    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)

    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired()
    do_run_action(org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": "x"}, user_id=MEMBER)
    delivery = Delivery.objects.get(member="eng.lead")

    def crash(call):
        cancel(org, Request.objects.get(session__session_id="eng.incidents:eng.lead", status="running"))
        raise SystemExit("the worker died")

    resolver = create_mock_model_resolver({"eng.lead": crash})
    set_model_resolver(resolver)
    with pytest.raises(SystemExit):
        deliveries.do_deliver(delivery.pk)
    Delivery.objects.filter(pk=delivery.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    assert deliveries.do_deliver(delivery.pk) == "failed"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.error) == ("failed", CANCELLED)
    assert len(resolver.calls) == 1  # not run again
    assert Request.objects.filter(session__session_id="eng.incidents:eng.lead").count() == 1
