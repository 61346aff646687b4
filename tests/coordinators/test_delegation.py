"""Delegates at work (spec 004 "Talking to it", "Making your own flow a delegate"):
each delegate works the conversation's posts in a session of its own, found by worker
and filing session id; the turn text; the answer under the delegate's worker id, once
per delivery; a flow of your own as a delegate; cancelled and empty runs."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from coordinators.config import configure_coordinator
from coordinators.delivery import do_deliver_delegated, report
from coordinators.models import Answer, DelegatedPost
from coordinators.queries import find_worker_session
from seats.models import Seat
from tests.conftest import MEMBER
from tests.coordinators.conftest import ACCOUNTS, CONVERSATION, DEVICES, HELP
from workforce.delegation import (
    DELEGATED_POST_ENTRY,
    DelegatedRunCancelled,
    delegated_post_entry,
    delegated_post_on_finished,
)
from workforce.flows import Action, FlowKind, registry
from workforce.models import Item, Request, Session

SEEN: list[dict] = []


@pytest.fixture
def research(org):
    """A flow of our own, ``research``, that declares the delegated-post entry; its door
    answers ``{"text": ...}`` (or what ``research.reply`` says)."""
    state = {"reply": None, "on_finished": True}

    def door(ctx, data):
        SEEN.append({"message": data["message"], "session": ctx.session.session_id})
        reply = state["reply"]
        if isinstance(reply, type) and issubclass(reply, BaseException):
            raise reply("cancelled by the user")
        return reply if reply is not None else {"text": f"research found: {data['message']}"}

    def build(on_finished: bool = True):
        facets = {"worker": True}
        if on_finished:
            facets["request_on_finished"] = delegated_post_on_finished
        registry.register(
            FlowKind(
                kind="research",
                actions={"run": Action("run", lambda ctx, data: door(ctx, data))},
                internal_actions={DELEGATED_POST_ENTRY: delegated_post_entry(door)},
                facets=facets,
            )
        )

    build()
    Seat.objects.create(
        seat_id="eng.research", kind="research", scope=Seat.Scope.ORG, organization=org, description="Digs things up."
    )
    SEEN.clear()
    state["build"] = build
    yield state
    registry.unregister("research")


def test_each_delegate_works_in_a_session_of_its_own_found_by_worker_and_filing_session(desk, org):
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    d.run("My laptop won't charge.")
    d.run("Still won't.")
    for worker in (DEVICES, ACCOUNTS):
        session = find_worker_session(org, MEMBER, worker=worker, filing_session_id=CONVERSATION)
        assert session.session_id == f"{CONVERSATION}:{worker}" and session.flow_kind == "agent"
        assert session.parent.session_id == CONVERSATION and session.user_id == MEMBER
        assert find_worker_session(org, MEMBER, worker=worker) is None  # naming only the worker never finds it
        turns = [
            i.data["text"]
            for i in Item.objects.filter(session=session, type="message").order_by("seq")
            if i.data["role"] == "user"
        ]
        assert turns == [f"{MEMBER}, through {HELP}: My laptop won't charge.", f"{MEMBER}, through {HELP}: Still won't."]
        requests = Request.objects.filter(session=session).order_by("pk")
        assert [(r.action, r.status) for r in requests] == [(DELEGATED_POST_ENTRY, "completed")] * 2
    # The second post's turn remembers the first: one session per delegate per conversation.
    second = d.resolver.calls_for(DEVICES)[1].messages
    assert [m["content"] for m in second if m["role"] == "user"][0] == f"{MEMBER}, through {HELP}: My laptop won't charge."
    assert Session.objects.filter(parent__session_id=CONVERSATION).count() == 2


def test_the_answer_lands_under_the_delegates_worker_id_in_a_request_of_its_own(desk):
    d = desk(routing="everyone", delegates=(DEVICES,))
    post = d.run("hi")
    [answer_item] = [
        i for i in Item.objects.filter(session__session_id=CONVERSATION, type="message") if i.data["role"] == "assistant"
    ]
    assert answer_item.data == {
        "role": "assistant",
        "text": f"{DEVICES} answered: {MEMBER}, through {HELP}: hi",
        "agentName": DEVICES,
        "postId": post.request_id,
        "round": 0,
        "postedBy": {"kind": "seat", "id": DEVICES, "verified": True},  # the delegate, from its delivery row
    }
    assert answer_item.request.action == "onDelegateReport" and answer_item.request_id != post.pk


def test_an_answer_lands_once_per_delivery_however_often_it_is_reported(desk):
    d = desk(routing="everyone", delegates=(DEVICES,))
    d.run("hi")
    delivery = DelegatedPost.objects.get()
    assert do_deliver_delegated(delivery.pk) == "not-claimed"  # a redelivered task does nothing
    with d.capture(execute=True):
        again = report(
            delivery=DelegatedPost.objects.select_related("conversation__session").get(),
            token=delivery.claim_token,
            outcome="answered",
            text="a second answer",
        )
    assert again.output == {"claimed": False}
    assert Answer.objects.count() == 1 and len(d.answers()) == 1


def test_a_flow_of_your_own_becomes_a_delegate_by_declaring_the_entry(desk, research):
    d = desk(routing="everyone", delegate_flows=("agent", "research"), delegates=(DEVICES,))
    assert d.act("addDelegate", {"worker": "eng.research"}).status == "completed"
    d.run("What changed last week?")
    assert SEEN == [{"message": f"{MEMBER}, through {HELP}: What changed last week?", "session": f"{CONVERSATION}:eng.research"}]
    assert ("eng.research", f"research found: {MEMBER}, through {HELP}: What changed last week?") in d.answers()


def test_an_empty_reply_fails_the_turn_and_nothing_is_answered(desk, research):
    research["reply"] = ""
    d = desk(routing="everyone", delegate_flows=("agent", "research"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": "eng.research"})
    d.run("hi")
    delivery = DelegatedPost.objects.get(worker="eng.research")
    assert delivery.status == "failed" and delivery.error["reason"] == "empty-reply"
    assert [a for a, _ in d.answers()] == [DEVICES]


def test_a_cancelled_run_reports_at_once_when_its_flow_says_so(desk, research):
    research["reply"] = DelegatedRunCancelled
    d = desk(routing="everyone", rounds=1, delegate_flows=("agent", "research"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": "eng.research"})
    d.run("hi")
    delivery = DelegatedPost.objects.get(worker="eng.research", round=0)
    assert (delivery.status, delivery.reported) == ("cancelled", True)
    assert delivery.turn_request.status == "aborted"
    assert d.rounds()[0].status == "closed"  # the round didn't wait


def test_without_delegated_post_on_finished_a_cancelled_run_holds_its_round(desk, research):
    research["build"](on_finished=False)
    research["reply"] = DelegatedRunCancelled
    d = desk(routing="everyone", rounds=1, delegate_flows=("agent", "research"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": "eng.research"})
    d.run("hi")
    delivery = DelegatedPost.objects.get(worker="eng.research", round=0)
    assert (delivery.status, delivery.reported) == ("cancelled", False)
    assert d.rounds()[0].status == "open"  # until its deadline


def test_a_delegate_flow_without_the_entry_is_refused_when_the_flow_is_built(desk):
    desk()
    registry.register(FlowKind(kind="plain", facets={"worker": True}))
    try:
        with pytest.raises(ImproperlyConfigured, match='"plain", which does not declare the delegated-post entry'):
            configure_coordinator(delegate_flows=("agent", "plain"), route_model="embedded/lexical")
        with pytest.raises(ImproperlyConfigured, match='"nowhere", which was not registered'):
            configure_coordinator(delegate_flows=("nowhere",), route_model="embedded/lexical")
    finally:
        registry.unregister("plain")


def test_the_built_in_agent_declares_the_entry_and_reports_cancellations():
    agent = registry.require("agent")
    assert DELEGATED_POST_ENTRY in agent.internal_actions
    assert agent.facets["request_on_finished"] is delegated_post_on_finished


def test_a_delegate_fired_after_it_was_handed_the_post_fails_the_delivery_at_once(desk, monkeypatch):
    from coordinators import policies
    from workforce.dispatch import enqueue

    d = desk(routing="everyone", rounds=1, delegates=(DEVICES, ACCOUNTS))
    lost = []
    monkeypatch.setattr(
        policies, "enqueue", lambda task, *a: lost.append(a[0]) if task == policies.DELIVER_TASK else enqueue(task, *a)
    )
    d.run("hi")
    Seat.objects.filter(seat_id=ACCOUNTS).delete()
    with d.capture(execute=True):
        outcomes = [do_deliver_delegated(pk) for pk in lost]
    assert outcomes == ["answered", "failed"]
    fired = DelegatedPost.objects.get(worker=ACCOUNTS, round=0)
    assert fired.reported and d.rounds()[0].status == "closed"  # reported at once: the round didn't wait
    assert fired.error == {"reason": "delegate-fired", "message": 'delegate-fired: No worker "support.accounts" on your roster.'}


def test_a_delegate_removed_after_it_was_handed_the_post_still_answers_it(desk, monkeypatch):
    from coordinators import policies
    from workforce.dispatch import enqueue

    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    lost = []
    monkeypatch.setattr(
        policies, "enqueue", lambda task, *a: lost.append(a[0]) if task == policies.DELIVER_TASK else enqueue(task, *a)
    )
    d.run("hi")
    d.act("removeDelegate", {"worker": ACCOUNTS})  # no recall
    with d.capture(execute=True):
        assert [do_deliver_delegated(pk) for pk in lost] == ["answered", "answered"]
    assert sorted(a for a, _ in d.answers()) == [ACCOUNTS, DEVICES]


def test_each_delegated_run_is_started_by_the_persons_post(desk):
    """GET /api/sessions/{conversation}/runs?startedBy=<post> finds a post's delegated
    runs: each delegate's turn request has the post's request as its parent."""
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    post = d.run("hi")
    deliveries = list(d.deliveries(round=0))
    assert {x.worker for x in deliveries} == {DEVICES, ACCOUNTS}
    for delivery in deliveries:
        assert delivery.turn_request.parent_request_id == post.pk


def test_a_delegated_post_runs_its_entry_through_the_kernels_one_handler_call(desk, research, monkeypatch, org):
    # The entry is called as every action's handler is (workforce.sessions.call_handler,
    # what do_run_action calls), not by a call of its own.
    from coordinators import delivery as delivery_module
    from workforce import sessions

    real = sessions.call_handler
    called: list[tuple[str, str]] = []

    def spy(act, ctx, input, **kwargs):
        called.append((act.name, ctx.session.session_id))
        return real(act, ctx, input, **kwargs)

    monkeypatch.setattr(delivery_module, "call_handler", spy)
    monkeypatch.setattr(sessions, "call_handler", spy)
    research["reply"] = RuntimeError  # the door's bug
    d = desk(routing="everyone", delegate_flows=("agent", "research"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": "eng.research"})
    d.run("hi")
    assert (DELEGATED_POST_ENTRY, f"{CONVERSATION}:eng.research") in called
    delivery = DelegatedPost.objects.get(worker="eng.research")
    # The bug fails the delegate's request as it fails any action's (do_run_action's shape).
    error = {"reason": "internal-error", "message": "internal-error: RuntimeError: cancelled by the user"}
    assert delivery.status == "failed" and delivery.error == error
    assert delivery.turn_request.status == "failed" and delivery.turn_request.error == error
    from workforce.dispatch import dispatch

    entry = dict(kind="research", session_id="r-1", action=DELEGATED_POST_ENTRY, payload={"message": "x"}, user_id=MEMBER)
    run = dispatch(org=org, **entry)
    assert run.status == "failed" and run.error == error  # the same entry dispatched: the same failure


def test_a_delegated_entry_refuses_input_its_schema_refuses_as_every_action_does(desk, research, monkeypatch):
    from coordinators.models import DelegatedPost as Row

    d = desk(routing="everyone", delegate_flows=("agent", "research"), delegates=(DEVICES,))
    d.act("addDelegate", {"worker": "eng.research"})
    monkeypatch.setattr(Row, "message", property(lambda self: 42, lambda self, value: None), raising=False)
    d.run("hi")
    delivery = DelegatedPost.objects.get(worker="eng.research")
    assert delivery.status == "failed" and delivery.error["reason"] == "invalid-input"
    assert SEEN == []  # the door never ran
