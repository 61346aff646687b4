"""An idle cluster waits for work instead of looking on a clock (issue 26 item 2;
docs/running.md "Idle"): a wake-up reaches its waiter at the commit that made the work,
a timer sleeps until its deadline and is woken at once when an earlier one is set, and
the sweeper backs off while nothing happens and comes back when a task starts."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from workforce import sweepers
from workforce.wakeups import QUEUE, TIMERS, Backoff, Waiter, wake

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def waiter():
    waiting = Waiter((TIMERS,))
    waiting.wait(0)  # listening (PostgreSQL) or bound (SQLite) before anything is sent
    yield waiting
    waiting.close()


def test_a_wake_reaches_the_waiter_at_the_commit_not_before(waiter):
    with transaction.atomic():
        wake(TIMERS)
        assert waiter.wait(0.3) is False  # not before the commit
    started = time.monotonic()
    assert waiter.wait(5) is True
    assert time.monotonic() - started < 1.0


def test_a_rolled_back_wake_wakes_nobody(waiter):
    with pytest.raises(RuntimeError), transaction.atomic():
        wake(TIMERS)
        raise RuntimeError("the caller's transaction fails")
    assert waiter.wait(0.5) is False


def test_wakes_sent_while_the_waiter_was_busy_end_one_wait_at_once(waiter):
    for _ in range(3):
        wake(TIMERS)
    time.sleep(0.2)
    assert waiter.wait(5) is True
    assert waiter.wait(0.3) is False  # all three were taken by the first wait


def test_control_without_a_wake_the_waiter_sleeps_its_timeout_out(waiter):
    started = time.monotonic()
    assert waiter.wait(0.5) is False
    assert time.monotonic() - started >= 0.45


def test_a_wake_with_nobody_waiting_is_harmless():
    wake(QUEUE)  # no pusher here: nothing raises, nothing is left behind


def test_the_backoff_doubles_up_to_its_most_and_a_reset_starts_again():
    backoff = Backoff(0.5, 3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setattr(sweepers, "_sweeps", {})
    monkeypatch.setattr(sweepers, "_every", {})
    monkeypatch.setattr(sweepers, "_due", {})
    monkeypatch.setattr(sweepers, "_wake_on", {})
    monkeypatch.setattr(sweepers, "_activity", threading.Event())


def run_in_thread(target, *args, **kwargs):
    """Run a sweeper loop in a thread until the returned event is set; its database
    connection is closed as it ends."""
    stop = threading.Event()

    def run():
        try:
            target(*args, **kwargs, stop=stop)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return stop, thread


def wait_for(predicate, timeout: float) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "timed out"
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_timer_sleeps_until_its_work_is_due_and_a_wake_runs_it_at_once(isolated, settings):
    """The round timer's shape: nothing due for a minute, then a round opens (its
    ``wake(TIMERS)``): the timer runs at once, not a minute later nor on a 0.5 s clock."""
    settings.WORKFORCE_SWEEP_IDLE_SECONDS = 120
    runs: list[float] = []
    sweepers.register_sweep("t", lambda: runs.append(time.monotonic()), every=0.5, due=lambda: 60.0, wake_on=TIMERS)
    stop, thread = run_in_thread(sweepers._timer, "t", 0.5)
    try:
        wait_for(lambda: len(runs) == 1, 10)
        time.sleep(1.5)
        assert len(runs) == 1  # sleeping toward its deadline, a minute away: not every 0.5 s
        wake(TIMERS)
        took = wait_for(lambda: len(runs) == 2, 5)
        assert took < 1.0, took
    finally:
        stop.set()
        wake(TIMERS)
        thread.join(10)


def test_a_timer_with_work_due_soon_runs_then(isolated, settings):
    settings.WORKFORCE_SWEEP_IDLE_SECONDS = 120
    runs: list[float] = []
    sweepers.register_sweep("t", lambda: runs.append(time.monotonic()), every=0.5, due=lambda: 0.8)
    stop, thread = run_in_thread(sweepers._timer, "t", 0.5)
    try:
        wait_for(lambda: len(runs) >= 3, 10)
        gaps = [b - a for a, b in zip(runs, runs[1:], strict=False)]
        assert all(0.7 <= gap < 1.6 for gap in gaps), gaps
    finally:
        stop.set()
        thread.join(10)


def test_the_sweeper_backs_off_while_passes_find_nothing_and_a_task_start_brings_it_back(isolated, settings):
    settings.WORKFORCE_SWEEP_SECONDS = 0.2
    settings.WORKFORCE_SWEEP_IDLE_SECONDS = 0.8
    passes: list[float] = []
    sweepers.register_sweep("s", lambda: passes.append(time.monotonic()))
    stop, thread = run_in_thread(sweepers._loop, ["s"], 0.2)
    try:
        wait_for(lambda: len(passes) >= 5, 10)
        gaps = [b - a for a, b in zip(passes, passes[1:], strict=False)]
        # 0.2, 0.4, 0.8, then 0.8: doubling up to WORKFORCE_SWEEP_IDLE_SECONDS.
        assert gaps[0] < 0.35 and 0.35 <= gaps[1] < 0.6 and gaps[2] >= 0.7 and gaps[3] >= 0.7, gaps
        # A task that is not a periodic one starts in this worker: back to the busy cadence.
        sweepers.note_periodic_task("periodic.task")
        sweepers.on_task_start(task={"func": "periodic.task"})
        assert not sweepers._activity.is_set()
        seen = len(passes)
        sweepers.on_task_start(task={"func": "seats.tasks.deliver"})
        wait_for(lambda: len(passes) >= seen + 3, 10)
        after = [b - a for a, b in zip(passes[seen - 1 :], passes[seen:], strict=False)]
        assert after[1] < 0.35, after  # the pass after the wake-up comes at the busy cadence
    finally:
        stop.set()
        sweepers._activity.set()
        thread.join(10)


def test_a_pass_that_finds_work_keeps_the_busy_cadence(isolated, settings):
    settings.WORKFORCE_SWEEP_SECONDS = 0.2
    settings.WORKFORCE_SWEEP_IDLE_SECONDS = 5
    passes: list[float] = []

    def found_something():
        passes.append(time.monotonic())
        return {"requeued": [1]}

    sweepers.register_sweep("s", found_something)
    stop, thread = run_in_thread(sweepers._loop, ["s"], 0.2)
    try:
        wait_for(lambda: len(passes) >= 5, 10)
        gaps = [b - a for a, b in zip(passes, passes[1:], strict=False)]
        assert all(gap < 0.45 for gap in gaps), gaps
    finally:
        stop.set()
        thread.join(10)
