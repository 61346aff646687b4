"""Recovering what a crashed worker or a lossy broker dropped: the sweep
(a django-q2 schedule, every minute) enqueues lost deliveries and jobs again, settles one
out of attempts as failed so its round doesn't wait, and a crashed turn is run again."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from django_q.models import Schedule

from coordinators import policies
from coordinators.delivery import do_deliver_delegated
from coordinators.models import DelegatedPost, Job
from coordinators.services import SWEEP_SCHEDULE, do_sweep, ensure_sweep_schedule
from tests.coordinators.conftest import ACCOUNTS, DEVICES, choose


def lose_tasks(monkeypatch):
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)


def test_a_lost_delivery_is_enqueued_again_and_answered_once(desk, monkeypatch, settings):
    d = desk(routing="everyone", delegates=(DEVICES,))
    lose_tasks(monkeypatch)
    d.run("hi")
    monkeypatch.undo()
    with d.capture(execute=True):
        assert do_sweep()["deliveries"] == []  # just enqueued: the broker may still have it
    later = timezone.now() + timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    with d.capture(execute=True):
        swept = do_sweep(now=later)
    assert swept["deliveries"] == [DelegatedPost.objects.get().pk]
    assert d.answers() and len(d.answers()) == 1


def test_a_lost_best_fit_job_is_enqueued_again(desk, monkeypatch, settings):
    d = desk(routing="best-fit", answers=lambda call: choose(ACCOUNTS))
    lose_tasks(monkeypatch)
    d.run("billing?")
    monkeypatch.undo()
    later = timezone.now() + timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    with d.capture(execute=True):
        assert do_sweep(now=later)["jobs"] == [Job.objects.get().pk]
    assert d.records()[0]["by"] == "evaluated" and [a for a, _ in d.answers()] == [ACCOUNTS]


def test_a_turn_a_crashed_worker_left_running_is_run_again_and_a_delivery_out_of_attempts_fails(desk, monkeypatch, settings):
    d = desk(routing="everyone", rounds=1, delegates=(DEVICES, ACCOUNTS))
    lose_tasks(monkeypatch)
    d.run("hi")
    monkeypatch.undo()
    stuck = DelegatedPost.objects.get(worker=ACCOUNTS)
    past = timezone.now() - timedelta(seconds=1)
    # A worker claimed it, started the turn, and died: the lease lapses.
    DelegatedPost.objects.filter(pk=stuck.pk).update(status="running", attempts=1, claim_token="dead", lease_until=past)
    with d.capture(execute=True):
        assert do_deliver_delegated(stuck.pk) == "answered"  # claimed again and run
    stuck.refresh_from_db()
    assert stuck.attempts == 2 and stuck.status == "answered"
    other = DelegatedPost.objects.get(worker=DEVICES)
    DelegatedPost.objects.filter(pk=other.pk).update(
        status="running", attempts=3, claim_token="dead", lease_until=past, enqueued_at=past - timedelta(days=1)
    )
    with d.capture(execute=True):
        assert do_sweep()["abandoned"] == [other.pk]
    other.refresh_from_db()
    assert (other.status, other.reported, other.error["reason"]) == ("failed", True, "delivery-abandoned")
    assert d.rounds()[0].status == "closed"


def test_boot_keeps_one_sweep_schedule(db):
    ensure_sweep_schedule()
    ensure_sweep_schedule()
    [schedule] = Schedule.objects.filter(name=SWEEP_SCHEDULE)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == ("coordinators.tasks.sweep", Schedule.MINUTES, 1)
