"""The ORM broker woken by PostgreSQL (``workforce.broker.ListeningORM``): a task
enqueued in a transaction notifies the pushers at its commit, never before and never on
a rollback; an empty dequeue waits for that notification instead of sleeping; a task is
claimed by one pusher only. On PostgreSQL, with real threads."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ

from tests.conftest import run_in_threads
from workforce.broker import CHANNEL, ListeningORM

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def conninfo() -> str:
    params = connection.get_connection_params()
    return psycopg.conninfo.make_conninfo(
        **{k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port")}
    )


@pytest.fixture
def listener():
    """A connection listening on the broker's channel, as a pusher's is."""
    conn = psycopg.connect(conninfo(), autocommit=True)
    conn.execute(f"LISTEN {CHANNEL}")
    yield conn
    conn.close()


def received(conn, timeout: float = 0.5) -> list[str]:
    return [n.payload for n in conn.notifies(timeout=timeout)]


@pytest.fixture
def broker(settings):
    settings.WORKFORCE_BROKER_IDLE_SECONDS = 30
    broker = ListeningORM(list_key="bench-q")
    yield broker
    broker.close_listener()
    OrmQ.objects.filter(key="bench-q").delete()


def test_the_notification_goes_with_the_commit(broker, listener):
    with transaction.atomic():
        broker.enqueue("task-1")
        assert received(listener, 0.3) == []  # not before the commit
    assert received(listener) == ["bench-q"]


def test_a_rolled_back_enqueue_notifies_nobody_and_leaves_no_task(broker, listener):
    with pytest.raises(RuntimeError), transaction.atomic():
        broker.enqueue("task-1")
        raise RuntimeError("the caller's transaction fails")
    assert received(listener) == [] and OrmQ.objects.filter(key="bench-q").count() == 0


def enqueue_later(broker: ORM, delay: float, payload: str) -> threading.Thread:
    def run():
        time.sleep(delay)
        broker.enqueue(payload)
        connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def dequeue_until(broker: ListeningORM, deadline: float) -> tuple[list, float]:
    started = time.monotonic()
    while time.monotonic() - started < deadline:
        claimed = broker.dequeue()
        if claimed:
            return claimed, time.monotonic() - started
    return [], time.monotonic() - started


def backed_off(broker: ListeningORM) -> ListeningORM:
    """The broker as an idle pusher's is once its queue stayed empty: its wait at the most
    (``WORKFORCE_BROKER_IDLE_SECONDS``)."""
    broker.idle.current = broker.idle.most
    return broker


def test_an_empty_dequeue_is_woken_by_the_commit_not_by_its_idle_wait(broker):
    backed_off(broker)._listening()  # a pusher that has waited once: it listens before the enqueue below
    thread = enqueue_later(ListeningORM(list_key="bench-q"), 0.5, "task-1")
    claimed, _took = dequeue_until(broker, 20)  # how soon (the idle wait is 30 s): bench/timeouts.py ("broker wake")
    thread.join()
    assert [payload for _, payload in claimed] == ["task-1"]


def test_control_an_enqueue_that_does_not_notify_is_found_only_after_the_idle_wait(broker, settings):
    """django-q2's own ORM enqueue sends nothing: the pusher sleeps its idle wait out."""
    settings.WORKFORCE_BROKER_IDLE_SECONDS = 2.0
    broker = backed_off(ListeningORM(list_key="bench-q"))
    broker._listening()
    thread = enqueue_later(ORM(list_key="bench-q"), 0.3, "task-1")
    started = time.monotonic()
    assert broker.dequeue() is None
    waited = time.monotonic() - started
    thread.join()
    assert waited >= 1.9
    assert [payload for _, payload in broker.dequeue()] == ["task-1"]


def test_a_task_is_claimed_by_one_pusher_only(broker):
    broker.enqueue("task-1")
    pushers = [ListeningORM(list_key="bench-q") for _ in range(6)]
    try:
        settled = run_in_threads(lambda i: pushers[i]._claim(), len(pushers))
    finally:
        for p in pushers:
            p.close_listener()
    assert sorted(len(c) for c in settled) == [0] * 5 + [1]


def test_the_cluster_uses_it_with_the_orm_broker():
    from django_q.brokers import get_broker

    assert isinstance(get_broker(), ListeningORM)


# --------------------------------------------------------------------- one NOTIFY per transaction


def notify_statements(queries) -> int:
    return sum("pg_notify" in q["sql"] for q in queries)


def test_a_fan_out_in_one_transaction_sends_one_notification(broker, listener):
    """25 enqueues in one transaction (a post to 25 members) notify once, at the commit:
    one statement each, its notification riding it, and PostgreSQL folds the
    transaction's identical notifications into one."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        for n in range(25):
            broker.enqueue(f"task-{n}")
    assert len([q for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]) == 25
    assert notify_statements(ctx.captured_queries) == 25
    assert received(listener) == ["bench-q"]
    assert OrmQ.objects.filter(key="bench-q").count() == 25


def test_an_enqueue_is_one_statement_with_its_notification(broker, listener, monkeypatch):
    """The task row and the pushers' notification go in one round trip, for each
    enqueue (PostgreSQL delivers the transaction's identical notifications once), and
    the payload, key and lock are django-q2's."""
    from django.test.utils import CaptureQueriesContext

    before = timezone.now()
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        first = broker.enqueue("task-1")
        second = broker.enqueue("task-2")
    statements = [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
    assert len(statements) == 2, statements
    assert statements[0].startswith('WITH task AS (INSERT INTO "django_q_ormq"') and "pg_notify" in statements[0]
    assert statements[1].startswith('WITH task AS (INSERT INTO "django_q_ormq"') and "pg_notify" in statements[1]
    assert received(listener) == ["bench-q"]
    rows = {t.pk: t for t in OrmQ.objects.filter(key="bench-q")}
    assert sorted(rows) == sorted([first, second]) and first < second
    assert [rows[first].payload, rows[second].payload] == ["task-1", "task-2"]
    assert all(before <= t.lock <= timezone.now() for t in rows.values())
    monkeypatch.setattr(Conf, "BULK", 2)
    assert broker.dequeue() == [(first, "task-1"), (second, "task-2")]


def test_control_enqueues_outside_a_transaction_each_notify(broker, listener):
    """Each autocommit enqueue is a transaction of its own: each one notifies."""
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        for n in range(3):
            broker.enqueue(f"task-{n}")
    assert notify_statements(ctx.captured_queries) == 3
    assert received(listener) == ["bench-q"] * 3


def test_a_savepoint_rolled_back_takes_its_notification_and_the_next_enqueue_sends_another(broker, listener):
    """PostgreSQL drops a NOTIFY sent inside a savepoint that rolls back; the enqueue after
    it must notify again, or its committed task would wait for the idle poll."""
    with transaction.atomic():
        with pytest.raises(RuntimeError), transaction.atomic():
            broker.enqueue("task-dropped")
            raise RuntimeError("the savepoint fails")
        broker.enqueue("task-kept")
    assert received(listener) == ["bench-q"]
    assert list(OrmQ.objects.filter(key="bench-q").values_list("payload", flat=True)) == ["task-kept"]


def test_two_queues_in_one_transaction_are_each_notified(broker, listener):
    other = ListeningORM(list_key="other-q")
    try:
        with transaction.atomic():
            broker.enqueue("task-1")
            other.enqueue("task-2")
            broker.enqueue("task-3")
        assert sorted(received(listener)) == ["bench-q", "other-q"]
    finally:
        OrmQ.objects.filter(key="other-q").delete()


# --------------------------------------------------------------------- claims in one statement


def test_a_dequeue_claims_up_to_bulk_oldest_first_in_one_statement(broker, monkeypatch):
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "BULK", 3)
    for n in range(5):
        broker.enqueue(f"task-{n}")
    with CaptureQueriesContext(connection) as ctx:
        first = broker.dequeue()
    assert [payload for _, payload in first] == ["task-0", "task-1", "task-2"]
    assert len(ctx.captured_queries) == 1
    assert all(
        lock > timezone.now() for lock in OrmQ.objects.filter(pk__in=[pk for pk, _ in first]).values_list("lock", flat=True)
    )
    assert [payload for _, payload in broker.dequeue()] == ["task-3", "task-4"]
    # Claimed tasks are not handed out again until their lock lapses (Q_CLUSTER retry).
    assert broker._claim() == []


def test_bulk_claims_by_many_pushers_never_overlap(broker, monkeypatch):
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "BULK", 4)
    for n in range(40):
        broker.enqueue(f"task-{n}")
    pushers = [ListeningORM(list_key="bench-q") for _ in range(6)]

    def drain(i: int) -> list:
        got = []
        while claimed := pushers[i]._claim():
            got.extend(pk for pk, _ in claimed)
        return got

    try:
        settled = run_in_threads(drain, len(pushers))
    finally:
        for p in pushers:
            p.close_listener()
    every = [pk for claimed in settled for pk in claimed]
    assert len(every) == 40 and len(set(every)) == 40


def test_control_a_claim_that_does_not_lock_hands_one_task_to_several_pushers(broker):
    """Without ``FOR UPDATE SKIP LOCKED`` (read the oldest, then lock them), pushers that
    read at the same moment all claim the same tasks."""
    from django.utils import timezone

    for n in range(8):
        broker.enqueue(f"task-{n}")
    read = threading.Barrier(3)

    def naive(i: int) -> list:
        ids = list(OrmQ.objects.filter(key="bench-q", lock__lt=timezone.now()).order_by("id").values_list("id", flat=True)[:4])
        read.wait(timeout=30)
        OrmQ.objects.filter(id__in=ids).update(lock=broker.timeout(None))
        return ids

    settled = run_in_threads(naive, 3)
    every = [pk for claimed in settled for pk in claimed]
    assert len(every) == 12 and len(set(every)) == 4


def test_an_idle_pusher_backs_off_from_the_poll_to_the_idle_wait_and_a_claim_resets_it(broker, settings):
    """An empty queue is looked at after Q_CLUSTER["poll"], then twice as long each time,
    up to WORKFORCE_BROKER_IDLE_SECONDS (30 here); a claim starts again from the poll."""
    from django_q.conf import Conf

    broker._listening()
    waits = []
    for _ in range(4):
        started = time.monotonic()
        assert broker.dequeue() is None
        waits.append(time.monotonic() - started)
    poll = float(Conf.POLL)
    for n, waited in enumerate(waits):
        assert waited >= poll * 2**n * 0.9, waits
    assert broker.idle.current == poll * 2**4
    for _ in range(12):
        broker.idle.next()
    assert broker.idle.current == 30
    broker.enqueue("task-1")
    assert [payload for _, payload in broker.dequeue()] == ["task-1"]
    assert broker.idle.current == poll
