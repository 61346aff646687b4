"""Rounds (spec 004 "Letting delegates answer each other", "What it costs"), sync cluster:
answers going back out by each policy, never to their author; a round closing on its
answers or failures, or at its deadline (a django-q2 schedule); late answers; the 50
open rounds; one delivery per (post, round, delegate); the cost bound."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import Schedule

from coordinators import policies
from coordinators.delivery import do_deliver_delegated
from coordinators.models import Answer, DelegatedPost, Job, Round
from coordinators.rounds import schedule_name
from coordinators.services import ROUND_TIMER_SECONDS, do_close_overdue_rounds, do_close_round_at_deadline, do_sweep
from seats.models import Seat
from tests.conftest import MEMBER
from tests.coordinators.conftest import ACCOUNTS, DELEGATES, DEVICES, GENERAL, HELP, choose
from workforce.dispatch import enqueue
from workforce.models import Request

TURN = f"{MEMBER}, through {HELP}: "


def said(worker: str, text: str) -> str:
    return f"{worker} answered: {text}"


@pytest.fixture
def hold_back(monkeypatch):
    """``hold_back(*workers)``: deliveries to these workers are written but their tasks
    are lost (their delegate is still working, or its process stopped)."""

    def _hold(*workers):
        def fake(task, *args):
            if task == policies.DELIVER_TASK and DelegatedPost.objects.get(pk=args[0]).worker in workers:
                return None
            return enqueue(task, *args)

        monkeypatch.setattr(policies, "enqueue", fake)

    return _hold


def test_everyone_with_one_round_hands_each_delegate_the_others_answers_in_one_delivery(desk):
    d = desk(routing="everyone", rounds=1)
    post = d.run("Who is on call?")
    r0, r1 = d.records(post.request_id)
    assert r0["round"] == 0 and r1 == {
        "postId": post.request_id,
        "round": 1,
        "policy": "everyone",
        "by": "everyone",
        "delegates": [{"worker": w, "outcome": "delivered"} for w in DELEGATES],
    }
    first = {w: said(w, f"{TURN}Who is on call?") for w in DELEGATES}
    [to_devices] = d.deliveries(worker=DEVICES, round=1)
    assert to_devices.message == (
        f"{ACCOUNTS} and {GENERAL}, through {HELP}: {ACCOUNTS}: {first[ACCOUNTS]}\n\n{GENERAL}: {first[GENERAL]}"
    )
    assert [r.status for r in d.rounds()] == ["closed", "last"]
    assert d.rounds()[0].closed_by == "answers"
    # 3 delegates x (1 + 1) rounds: six turns, six answers, each landed once.
    assert sum(d.turns(w) for w in DELEGATES) == 6
    assert len(d.answers()) == 6 and Answer.objects.count() == 6


def test_everyone_skips_a_delegate_with_no_other_answer_to_get(desk):
    d = desk(routing="everyone", rounds=1, scripts={ACCOUNTS: [RuntimeError("down")], GENERAL: [RuntimeError("down")]})
    post = d.run("hi")
    r1 = d.records(post.request_id)[1]
    assert r1["delegates"] == [
        {"worker": DEVICES, "outcome": "skipped", "reason": "no other delegate answered in round 0"},
        {"worker": ACCOUNTS, "outcome": "delivered"},
        {"worker": GENERAL, "outcome": "delivered"},
    ]
    [to_accounts] = d.deliveries(worker=ACCOUNTS, round=1)
    assert to_accounts.message == f"{DEVICES}, through {HELP}: {said(DEVICES, TURN + 'hi')}"


def test_a_failed_turn_reports_at_once_and_the_round_does_not_wait(desk):
    d = desk(routing="everyone", rounds=1, scripts={ACCOUNTS: [RuntimeError("down"), "fine now"]})
    d.run("hi")
    r0 = d.rounds()[0]
    assert r0.status == "closed" and r0.closed_by == "answers"
    failed = d.deliveries(worker=ACCOUNTS, round=0).get()
    assert failed.status == "failed" and failed.reported and failed.error["reason"] == "model-error"
    assert not Answer.objects.filter(delivery=failed).exists()


def test_best_fit_routes_each_answer_again_as_it_lands_never_to_its_author(desk):
    d = desk(routing="best-fit", rounds=1, answers=[choose(DEVICES), choose(ACCOUNTS)])
    post = d.run("My laptop won't charge.")
    second = d.route.calls[1]
    assert DEVICES not in [c.value for c in second.question.choices]
    assert second.state == {"post": {"from": DEVICES, "text": said(DEVICES, TURN + "My laptop won't charge.")}, "round": 1}
    r0, r1 = d.records(post.request_id)
    assert (r0["by"], r0["round"], r1["by"], r1["round"]) == ("evaluated", 0, "evaluated", 1)
    [handed] = d.deliveries(round=1)
    assert handed.worker == ACCOUNTS
    assert handed.message == f"{DEVICES}, through {HELP}: {said(DEVICES, TURN + 'My laptop won' + chr(39) + 't charge.')}"
    assert len(d.route.calls) == 2  # one evaluator call per round


def test_best_fit_never_hands_an_answer_back_to_its_author_even_when_the_evaluator_picks_it(desk):
    d = desk(routing="best-fit", rounds=1, fallback=GENERAL, answers=[choose(DEVICES), choose(DEVICES)])
    post = d.run("hi")
    r1 = d.records(post.request_id)[1]
    assert r1["by"] == "fallback" and r1["delegates"] == [{"worker": GENERAL, "outcome": "delivered"}]


def test_round_robin_routes_answers_on_through_the_rounds(desk):
    d = desk(routing="round-robin", rounds=2)
    post = d.run("hi")
    records = d.records(post.request_id)
    assert [(r["round"], r["delegates"][-1]["worker"]) for r in records] == [(0, DEVICES), (1, ACCOUNTS), (2, GENERAL)]
    assert [r.status for r in d.rounds()] == ["closed", "closed", "last"]
    assert sum(d.turns(w) for w in DELEGATES) == 3


def test_routing_an_answer_on_never_moves_the_persons_round_robin_turn(desk):
    """Spec 004 "Choosing how it routes": the next delegate after the one *your last
    post* went to. Post 1 to devices, devices' answer to accounts in round 1, and post 2
    goes to accounts, not past it."""
    d = desk(routing="round-robin", rounds=1)
    first = d.run("post 1")
    assert [(r["round"], r["delegates"][-1]["worker"]) for r in d.records(first.request_id)] == [(0, DEVICES), (1, ACCOUNTS)]
    second = d.run("post 2")
    assert [(r["round"], r["delegates"][-1]["worker"]) for r in d.records(second.request_id)] == [(0, ACCOUNTS), (1, GENERAL)]
    third = d.run("post 3")
    assert d.records(third.request_id)[0]["delegates"] == [{"worker": GENERAL, "outcome": "delivered"}]


def test_a_round_robin_answer_goes_to_the_next_delegate_after_its_author(desk):
    d = desk(routing="round-robin", rounds=2)
    d.run("post 1")  # devices; its answer to accounts, whose answer goes to general
    d.run("post 2")  # accounts
    post = d.run("post 3")  # general; its answer wraps round to devices, then accounts
    records = d.records(post.request_id)
    assert [(r["round"], r["delegates"][-1]["worker"]) for r in records] == [(0, GENERAL), (1, DEVICES), (2, ACCOUNTS)]


def test_judgment_waits_for_the_round_then_runs_its_turn_once_with_the_answers(desk):
    script = [
        {
            "tool_calls": [
                {"name": "handOff", "arguments": {"worker": DEVICES}},
                {"name": "handOff", "arguments": {"worker": ACCOUNTS}},
            ]
        },
        "Asked devices and accounts.",
        {"tool_calls": [{"name": "handOff", "arguments": {"worker": GENERAL}}]},
        "Asked general to weigh in.",
    ]
    d = desk(rounds=1, scripts={HELP: script})
    post = d.run("Laptop won't charge since the billing change.")
    coordinator_turns = d.resolver.calls_for(HELP)
    assert len(coordinator_turns) == 4  # two turns (round 0, and after it closed), two model calls each
    round_turn = next(m["content"] for m in reversed(coordinator_turns[2].messages) if m["role"] == "user")
    assert round_turn.startswith("Round 0 closed. The delegates answered the post")
    assert said(DEVICES, TURN) in round_turn and said(ACCOUNTS, TURN) in round_turn
    r0, r1 = d.records(post.request_id)
    assert r1 == {
        "postId": post.request_id,
        "round": 1,
        "policy": "judgment",
        "by": "judgment",
        "delegates": [{"worker": GENERAL, "outcome": "delivered"}],
    }
    [to_general] = d.deliveries(worker=GENERAL)
    assert to_general.round == 1 and to_general.message.startswith(f"{DEVICES} and {ACCOUNTS}, through {HELP}: ")
    assert Job.objects.filter(kind="judgment").count() == 2  # rounds + 1 coordinator turns


def test_a_round_closes_at_its_deadline_by_a_scheduled_check_and_a_late_answer_goes_no_further(desk, hold_back):
    d = desk(routing="everyone", rounds=1, deadline_ms=1500)
    hold_back(ACCOUNTS)
    before = timezone.now()
    d.run("hi")
    r0 = d.rounds()[0]
    assert r0.status == "open"
    assert before + timedelta(milliseconds=1500) <= r0.deadline_at <= timezone.now() + timedelta(milliseconds=1500)
    schedule = Schedule.objects.get(name=schedule_name(r0.pk))
    assert (schedule.func, schedule.schedule_type, schedule.next_run, schedule.args) == (
        "coordinators.tasks.close_round_at_deadline",
        Schedule.ONCE,
        r0.deadline_at,
        f"{r0.pk},",
    )
    assert do_close_round_at_deadline(r0.pk) == "not-due"
    Round.objects.filter(pk=r0.pk).update(deadline_at=timezone.now() - timedelta(milliseconds=1))  # time passes
    with d.capture(execute=True):
        assert do_close_round_at_deadline(r0.pk) == "closed"
        assert do_close_round_at_deadline(r0.pk) == "not-open"
    r0.refresh_from_db()
    assert r0.status == "closed" and r0.closed_by == "deadline"
    assert not Schedule.objects.filter(name=schedule_name(r0.pk)).exists()  # closed: nothing left to check
    # Round 1 went out without accounts' answer: devices and general each got the other's.
    assert {x.worker for x in d.deliveries(round=1)} == {DEVICES, GENERAL, ACCOUNTS}
    assert Request.objects.filter(session__session_id=d.session_id, action="closeRound", status="completed").count() == 1
    # Accounts, still working at the deadline, answers: it lands once and goes no further.
    late = d.deliveries(worker=ACCOUNTS, round=0).get()
    with d.capture(execute=True):
        assert do_deliver_delegated(late.pk) == "answered"
        assert do_deliver_delegated(late.pk) == "not-claimed"
    answer = Answer.objects.get(delivery=late)
    assert answer.goes_further is False
    assert [a for a, _ in d.answers()].count(ACCOUNTS) == 1
    assert d.deliveries(round=1).count() == 3 and Job.objects.count() == 0


def test_the_next_activity_after_a_deadline_closes_the_round(desk, hold_back):
    d = desk(routing="everyone", rounds=1, deadline_ms=1000)
    hold_back(ACCOUNTS)
    d.run("first")
    r0 = d.rounds()[0]
    Round.objects.filter(pk=r0.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    d.run("second")  # a post is activity: the first post's round closes before it lands
    r0.refresh_from_db()
    assert r0.status == "closed" and r0.closed_by == "deadline"


def test_the_sweep_enqueues_the_deadline_check_of_an_overdue_round(desk, hold_back):
    d = desk(routing="everyone", rounds=1)
    hold_back(ACCOUNTS)
    d.run("hi")
    r0 = d.rounds()[0]
    with d.capture(execute=True):
        assert do_sweep()["rounds"] == []
    Round.objects.filter(pk=r0.pk).update(deadline_at=timezone.now() - timedelta(seconds=1))
    with d.capture(execute=True):
        assert do_sweep()["rounds"] == [r0.pk]
    r0.refresh_from_db()
    assert r0.status == "closed"


def test_the_round_timer_closes_overdue_rounds_only_and_each_once(desk, hold_back):
    d = desk(routing="everyone", rounds=1)
    hold_back(ACCOUNTS)
    d.run("first")
    d.run("second")
    r0_first, r0_second = [r for r in d.rounds() if r.number == 0]
    with d.capture(execute=True):
        assert do_close_overdue_rounds() == []  # five minutes to go: nothing is due
    Round.objects.filter(pk=r0_first.pk).update(deadline_at=timezone.now() - timedelta(milliseconds=1))
    with d.capture(execute=True):
        assert do_close_overdue_rounds() == [r0_first.pk]
        assert do_close_overdue_rounds() == []  # closed once
    r0_first.refresh_from_db()
    r0_second.refresh_from_db()
    assert (r0_first.status, r0_first.closed_by) == ("closed", "deadline")
    assert r0_second.status == "open"
    assert Request.objects.filter(session__session_id=d.session_id, action="closeRound", status="completed").count() == 1


def test_the_round_timer_runs_in_the_cluster_workers_twice_a_second():
    from workforce.sweepers import _every, registered_sweeps

    assert registered_sweeps()["round-deadlines"] is do_close_overdue_rounds
    assert _every["round-deadlines"] == ROUND_TIMER_SECONDS == 0.5


def test_past_50_open_rounds_a_post_is_still_delivered_but_its_round_is_not_opened(desk, hold_back):
    d = desk(routing="everyone", rounds=1, delegates=(DEVICES, ACCOUNTS))
    hold_back(DEVICES, ACCOUNTS)
    for n in range(50):
        d.run(f"post {n}")
    assert d.rounds().filter(status="open").count() == 50
    post = d.run("the 51st")
    [record] = d.records(post.request_id)
    assert record == {
        "postId": post.request_id,
        "round": 0,
        "policy": "everyone",
        "by": "everyone",
        "delegates": [{"worker": DEVICES, "outcome": "delivered"}, {"worker": ACCOUNTS, "outcome": "delivered"}],
        "note": "this conversation already has 50 rounds waiting for answers, so answers in round 0 go no further",
    }
    assert d.rounds().get(post__post_id=post.request_id).status == "unopened"
    with d.capture(execute=True):
        for delivery in d.deliveries(post__post_id=post.request_id):
            assert do_deliver_delegated(delivery.pk) == "answered"
    assert Answer.objects.filter(post__post_id=post.request_id, goes_further=False).count() == 2
    assert not d.deliveries(post__post_id=post.request_id, round=1).exists()
    assert len(d.records(post.request_id)) == 1


def test_a_delegate_gets_at_most_one_delivery_per_post_per_round(desk):
    d = desk(routing="everyone")
    post = d.run("hi")
    from coordinators.config import current_setup
    from coordinators.models import Post
    from coordinators.policies import Desk as PolicyDesk
    from coordinators.policies import deliver, handing_for_post

    conv = Post.objects.get(post_id=post.request_id).conversation
    desk_ = PolicyDesk(conv=conv, request=None, setup=current_setup(), coordinator=None, now=timezone.now())
    entries = []
    seat = Seat.objects.get(seat_id=DEVICES)
    assert deliver(desk_, handing_for_post(Post.objects.get(post_id=post.request_id)), DEVICES, seat, entries)[0] is False
    assert entries == [{"worker": DEVICES, "outcome": "skipped", "reason": "it was already handed this post in this round"}]
    assert d.deliveries(worker=DEVICES).count() == 1


def test_the_cost_bound_25_delegates_and_3_rounds_is_100_delegate_turns(desk, org):
    d = desk(routing="everyone", rounds=3)
    for n in range(22):
        Seat.objects.create(
            seat_id=f"extra{n}",
            kind="agent",
            scope=Seat.Scope.ORG,
            organization=org,
            description="More hands.",
            model="embedded/echo",
        )
        d.act("addDelegate", {"worker": f"extra{n}"})
    post = d.run("Everyone, weigh in.")
    turns = DelegatedPost.objects.filter(post__post_id=post.request_id)
    assert turns.count() == 100 == 25 * (3 + 1)
    assert sum(len(d.resolver.calls_for(w)) for w in {t.worker for t in turns}) == 100
    assert [r.number for r in d.rounds()] == [0, 1, 2, 3]
    assert [r.status for r in d.rounds()] == ["closed", "closed", "closed", "last"]
    assert Answer.objects.filter(post__post_id=post.request_id).count() == 100
