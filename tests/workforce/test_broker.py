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
from django_q.brokers.orm import ORM
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


def test_an_empty_dequeue_is_woken_by_the_commit_not_by_its_idle_wait(broker):
    broker._listening()  # a pusher that has waited once: it listens before the enqueue below
    thread = enqueue_later(ListeningORM(list_key="bench-q"), 0.5, "task-1")
    claimed, took = dequeue_until(broker, 20)
    thread.join()
    assert [payload for _, payload in claimed] == ["task-1"]
    assert took < 10, f"the idle wait is 30 s: the notification woke it after {took:.2f} s"


def test_control_an_enqueue_that_does_not_notify_is_found_only_after_the_idle_wait(broker, settings):
    """django-q2's own ORM enqueue sends nothing: the pusher sleeps its idle wait out."""
    settings.WORKFORCE_BROKER_IDLE_SECONDS = 2.0
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
