"""Coordinators under real concurrency, on PostgreSQL (SQLite has no row
locks to test), each beside a control that shows the unguarded version would fail:
concurrent posts under round robin go to different delegates (the conversation's row
lock), one delivery per (post, round, delegate) (a unique constraint), a delivery handed
to many tasks runs once (a conditional UPDATE), an answer reported twice lands once."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from coordinators import policies
from coordinators.config import current_setup
from coordinators.delivery import do_deliver_delegated, report
from coordinators.models import Answer, Conversation, DelegatedPost, Post
from seats.models import Seat
from tests.conftest import MEMBER, run_in_threads
from tests.coordinators.conftest import ACCOUNTS, CONVERSATION, DELEGATES, DEVICES, GENERAL
from workforce.sessions import do_run_action

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def no_deliveries(monkeypatch):
    """Deliveries are written, their tasks not run (the decision is what is tested)."""
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)


def test_concurrent_posts_under_round_robin_go_to_different_delegates(desk, org, no_deliveries):
    d = desk(routing="round-robin")
    d.act("listDelegates")  # the conversation takes its copy
    for _attempt in range(3):
        posts = run_in_threads(
            lambda i: do_run_action(
                org=org, kind="coordinator", session_id=CONVERSATION, action="run", input={"message": f"post {i}"}, user_id=MEMBER
            ),
            3,
        )
        assert {p.status for p in posts} == {"completed"}
        went = [p.output["route"]["delegates"][-1]["worker"] for p in posts]
        assert sorted(went) == sorted(DELEGATES), went
    assert DelegatedPost.objects.count() == 9


def test_control_an_unlocked_cursor_hands_concurrent_posts_to_the_same_delegate(desk):
    d = desk(routing="round-robin")
    d.act("listDelegates")
    conv_id = Conversation.objects.get().pk
    barrier = threading.Barrier(3)

    def naive_next(i: int) -> str:
        conv = Conversation.objects.get(pk=conv_id)  # no lock: everyone reads the same cursor
        barrier.wait(timeout=30)
        order = [DEVICES, ACCOUNTS, GENERAL]
        start = order.index(conv.rr_last_worker) + 1 if conv.rr_last_worker in order else 0
        Conversation.objects.filter(pk=conv_id).update(rr_last_worker=order[start % 3])
        return order[start % 3]

    went = run_in_threads(naive_next, 3)
    assert len(set(went)) < 3


def test_one_delivery_per_post_round_and_delegate_however_many_try_at_once(desk, no_deliveries):
    d = desk(routing="everyone", delegates=(DEVICES,))
    post_request = d.run("hi")
    post = Post.objects.get(post_id=post_request.request_id)
    seat = Seat.objects.get(seat_id=ACCOUNTS)

    def hand(i: int) -> bool:
        from django.db import transaction

        with transaction.atomic():
            conv = Conversation.objects.select_related("session").get(pk=post.conversation_id)
            desk_ = policies.Desk(conv=conv, request=None, setup=current_setup(), coordinator=None, now=timezone.now())
            return policies.deliver(desk_, policies.handing_for_post(post), ACCOUNTS, seat, [])[0]

    outcomes = run_in_threads(hand, 8)
    assert sorted(outcomes) == [False] * 7 + [True]
    assert DelegatedPost.objects.filter(post=post, round=0, worker=ACCOUNTS).count() == 1


def test_control_a_check_then_insert_lets_several_through(desk, no_deliveries):
    d = desk(routing="everyone", delegates=(DEVICES,))
    post = Post.objects.get(post_id=d.run("hi").request_id)
    barrier = threading.Barrier(8)

    def naive(i: int) -> bool:
        exists = DelegatedPost.objects.filter(post=post, round=0, worker=ACCOUNTS).exists()
        barrier.wait(timeout=30)
        return not exists  # each of these would have inserted

    assert sum(run_in_threads(naive, 8)) > 1


def test_a_delivery_handed_to_many_tasks_at_once_runs_once_and_its_answer_lands_once(desk, monkeypatch):
    d = desk(routing="everyone", delegates=(DEVICES,))
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)
    d.run("hi")
    delivery = DelegatedPost.objects.get()
    outcomes = run_in_threads(lambda i: do_deliver_delegated(delivery.pk), 8)
    assert sorted(outcomes) == ["answered"] + ["not-claimed"] * 7
    assert Answer.objects.count() == 1 and d.turns(DEVICES) == 1
    assert [a for a, _ in d.answers()] == [DEVICES]


def test_an_answer_reported_twice_at_once_lands_once(desk, monkeypatch):
    d = desk(routing="everyone", delegates=(DEVICES,))
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)
    d.run("hi")
    DelegatedPost.objects.update(status="running", claim_token="tok")
    delivery = DelegatedPost.objects.select_related("conversation__session__organization").get()

    def send(i: int):
        from django.db import transaction

        with transaction.atomic():
            return report(delivery=delivery, token="tok", outcome="answered", text=f"answer {i}").output["claimed"]

    assert sorted(run_in_threads(send, 6)) == [False] * 5 + [True]
    assert Answer.objects.count() == 1 and len(d.answers()) == 1


def test_the_round_timers_of_several_workers_close_a_round_once_with_one_close_request(desk, no_deliveries):
    from datetime import timedelta

    from coordinators.models import Round
    from coordinators.services import do_close_overdue_rounds
    from workforce.models import Request

    d = desk(routing="everyone", rounds=1)
    d.run("hi")  # its deliveries are written, none answers: round 0 waits for its deadline
    r0 = d.rounds()[0]
    Round.objects.filter(pk=r0.pk).update(deadline_at=timezone.now() - timedelta(milliseconds=1))
    closed = run_in_threads(lambda i: do_close_overdue_rounds(), 4)
    assert sorted(pk for got in closed for pk in got) == [r0.pk]
    assert Request.objects.filter(session__session_id=d.session_id, action="closeRound").count() == 1
    r0.refresh_from_db()
    assert (r0.status, r0.closed_by) == ("closed", "deadline")
