"""Same-process dispatch (``workforce.inline``): serve's web process runs a committed task
an app allowed on a free thread of its own, after the commit and never on a rollback,
and hands it to the cluster (a broker row) when every thread is busy or the runner is
stopping. With real threads, on both databases (django-q2 not in sync mode here)."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from django.db import connection, transaction
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from workforce import inline
from workforce.dispatch import enqueue

pytestmark = pytest.mark.django_db(transaction=True)

HOLD = "tests.workforce.test_inline.hold"
FAIL = "tests.workforce.test_inline.fail"
RAN: list[tuple[str, int, str]] = []  # (task, arg, thread name)
GATE = threading.Event()


def hold(n: int) -> str:
    """A task that waits for GATE, reading the database first (a connection of its own)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    RAN.append(("hold", n, threading.current_thread().name))
    GATE.wait(10)
    return "done"


def fail(n: int) -> str:
    RAN.append(("fail", n, threading.current_thread().name))
    raise RuntimeError(f"task {n} broke")


def wait_until(check, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def runner(monkeypatch):
    """This process's runner with two threads, HOLD and FAIL allowed, the broker real
    (django-q2 not in sync mode): a task the runner does not take is an OrmQ row."""
    RAN.clear()
    GATE.clear()
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(inline, "_allowed", {HOLD, FAIL})
    started = inline.start(2)
    assert started is not None
    yield started
    GATE.set()
    assert inline.stop(deadline=time.monotonic() + 10)
    inline.start(0)
    OrmQ.objects.all().delete()


def queued() -> list[tuple[str, list]]:
    return [(p["func"], list(p["args"])) for p in (SignedPackage.loads(q.payload) for q in OrmQ.objects.all())]


def test_a_committed_task_runs_on_the_runner_after_the_commit_and_writes_no_broker_row(runner):
    with transaction.atomic():
        enqueue(HOLD, 1)
        time.sleep(0.2)
        assert RAN == []  # not before the commit
        assert OrmQ.objects.count() == 0
    wait_until(lambda: RAN)
    assert RAN == [("hold", 1, RAN[0][2])]
    assert RAN[0][2].startswith("inline-turn")
    assert queued() == []
    assert runner.running() == 1
    GATE.set()
    wait_until(lambda: runner.running() == 0)
    assert runner.ran == 1


def test_a_rolled_back_task_never_runs_and_leaves_no_row(runner):
    with pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            enqueue(HOLD, 2)
            1 / 0  # noqa: B018
    time.sleep(0.3)
    assert RAN == []
    assert queued() == []
    assert runner.running() == 0


def test_with_every_thread_busy_the_task_goes_to_the_cluster(runner):
    enqueue(HOLD, 1)
    enqueue(HOLD, 2)
    wait_until(lambda: len(RAN) == 2)
    with transaction.atomic():
        enqueue(HOLD, 3)
        assert queued() == []  # decided at the commit, not before
    assert queued() == [(HOLD, [3])]
    assert sorted(n for _, n, _ in RAN) == [1, 2]
    GATE.set()
    wait_until(lambda: runner.running() == 0)
    assert runner.offer(HOLD, (4,))  # a thread is free again
    wait_until(lambda: len(RAN) == 3)


def test_a_task_no_app_allowed_goes_to_the_cluster_as_before(runner):
    with transaction.atomic():
        enqueue("tests.workforce.test_inline.not_allowed", 5)
        assert queued() == [("tests.workforce.test_inline.not_allowed", [5])]  # in the transaction (ORM broker)
    time.sleep(0.2)
    assert RAN == []


def test_a_task_that_raises_is_logged_and_frees_its_thread(runner, caplog):
    with caplog.at_level(logging.ERROR, logger="workforce.inline"):
        enqueue(FAIL, 7)
        wait_until(lambda: runner.running() == 0 and runner.ran == 1)
    assert RAN[0][:2] == ("fail", 7)
    [record] = [r for r in caplog.records if r.name == "workforce.inline"]
    assert record.getMessage() == (
        "tests.workforce.test_inline.fail[7] failed in the web process; its sweeper hands it to the cluster"
    )
    assert "task 7 broke" in caplog.text


def test_stopping_takes_no_more_and_waits_for_those_running(runner):
    enqueue(HOLD, 1)
    wait_until(lambda: RAN)
    # The deadline passes with the task still running: False.
    assert runner.stop(deadline=time.monotonic() + 0.2) is False
    enqueue(HOLD, 2)  # stopping: to the cluster
    assert queued() == [(HOLD, [2])]
    assert runner.offer(HOLD, (3,)) is False
    GATE.set()
    assert runner.stop(deadline=time.monotonic() + 5) is True
    assert runner.running() == 0
    assert [n for _, n, _ in RAN] == [1]


def test_without_a_runner_every_task_goes_to_the_cluster(monkeypatch):
    RAN.clear()
    monkeypatch.setattr(Conf, "SYNC", False)
    monkeypatch.setattr(inline, "_allowed", {HOLD})
    assert inline.start(0) is None
    assert inline.runner() is None
    try:
        with transaction.atomic():
            enqueue(HOLD, 9)
            assert queued() == [(HOLD, [9])]
        assert RAN == []
        assert inline.stop() is True
    finally:
        OrmQ.objects.all().delete()


def test_the_apps_allow_their_claimed_tasks_and_nothing_else():
    assert inline.allowed("mailboxes.tasks.deliver_post")
    assert inline.allowed("mailboxes.tasks.route_post")
    assert inline.allowed("coordinators.tasks.deliver_delegated_post")
    assert inline.allowed("coordinators.tasks.run_job")
    assert not inline.allowed("mailboxes.tasks.sweep_deliveries")
    assert not inline.allowed("coordinators.tasks.close_round_at_deadline")


def test_after_each_task_the_runner_calls_after_task_on_the_same_thread(monkeypatch):
    RAN.clear()
    GATE.set()
    monkeypatch.setattr(inline, "_allowed", {HOLD, FAIL})
    after: list[str] = []
    runner = inline.Runner(1, after_task=lambda: after.append(threading.current_thread().name))
    try:
        assert runner.offer(HOLD, (1,))
        wait_until(lambda: runner.ran == 1)
        assert runner.offer(FAIL, (2,))  # also after a task that raised
        wait_until(lambda: runner.ran == 2)
        assert after == [RAN[0][2], RAN[1][2]]
    finally:
        assert runner.stop(deadline=time.monotonic() + 5)


def test_while_the_process_is_busy_the_runner_takes_nothing(monkeypatch):
    RAN.clear()
    GATE.set()
    busy = [True]
    runner = inline.Runner(2, busy=lambda: busy[0])
    try:
        assert runner.offer(HOLD, (1,)) is False
        assert runner.running() == 0 and RAN == []
        busy[0] = False
        assert runner.offer(HOLD, (2,)) is True
        wait_until(lambda: runner.ran == 1)
        assert [n for _, n, _ in RAN] == [2]
    finally:
        assert runner.stop(deadline=time.monotonic() + 5)


@pytest.mark.parametrize(("turns", "web", "threads"), [(2, 16, 2), (2, 2, 1), (4, 4, 3), (2, 1, 0), (0, 16, 0)])
def test_serve_leaves_the_web_at_least_one_connection(settings, turns, web, threads):
    """Each turn in the web process holds one of its connections for the whole turn:
    serve runs at most WORKFORCE_WEB_CONCURRENCY - 1 (break-it: with every one held a
    read waited 10 s and answered 503)."""
    from workforce_project.management.commands.serve import inline_threads

    settings.WORKFORCE_INLINE_TURNS, settings.WORKFORCE_WEB_CONCURRENCY = turns, web
    assert inline_threads() == threads
