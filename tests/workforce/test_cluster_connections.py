"""The task cluster keeps its database connections and its results lean
(``workforce.broker.keep_connections``, ``Q_CLUSTER["save_limit"]``; docs/architecture.md
"A post end to end", the task queue): django-q2 closes old connections before every task
and poll, which with ``CONN_MAX_AGE = 0`` opened a new connection each time; and it
re-read every kept result to prune one at each save."""

from __future__ import annotations

import copy
import uuid

import pytest
from django.db import close_old_connections, connection, connections
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import Failure, Success, Task

from workforce.broker import ListeningORM, keep_connections


@pytest.fixture
def restore_connection_settings():
    """keep_connections changes the settings every connection of this process reads."""
    saved = {alias: copy.deepcopy(connections.settings[alias]) for alias in connections}
    yield
    for alias, conf in saved.items():
        connections.settings[alias].clear()
        connections.settings[alias].update(conf)
    connections.close_all()


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()" if connection.vendor == "postgresql" else "SELECT 1")
        return cursor.fetchone()[0]


@pytest.mark.postgres  # an in-memory SQLite test database is never closed
@pytest.mark.django_db(transaction=True)
def test_kept_connections_survive_close_old_connections(restore_connection_settings):
    assert keep_connections(30) == list(connections)
    assert connection.settings_dict["CONN_MAX_AGE"] == 30 and connection.settings_dict["CONN_HEALTH_CHECKS"] is True
    connection.close()  # the next one opens with the new lifetime
    first = backend_pid()
    raw = connection.connection
    for _ in range(3):  # what django-q2 does before each task, each result and each poll
        close_old_connections()
        assert backend_pid() == first
    assert connection.connection is raw


@pytest.mark.postgres  # an in-memory SQLite test database is never closed
@pytest.mark.django_db(transaction=True)
def test_control_without_it_every_close_old_connections_drops_the_connection(restore_connection_settings):
    connection.settings_dict["CONN_MAX_AGE"] = 0
    connection.close()
    backend_pid()
    raw = connection.connection
    close_old_connections()
    assert connection.connection is None  # closed: the next query connects again
    backend_pid()
    assert connection.connection is not raw


@pytest.mark.postgres  # an in-memory SQLite test database is never closed
@pytest.mark.django_db(transaction=True)
def test_a_broken_kept_connection_is_replaced_before_its_next_use(restore_connection_settings):
    keep_connections(30)
    connection.close()
    backend_pid()
    connection.connection.close()  # the server went away under it
    close_old_connections()  # before the next task: the health check runs on first use
    assert backend_pid() is not None


@pytest.mark.postgres  # an in-memory SQLite test database is never closed
@pytest.mark.django_db(transaction=True)
def test_a_pooled_alias_and_zero_are_left_alone(restore_connection_settings):
    assert keep_connections(0) == []
    assert connection.settings_dict["CONN_MAX_AGE"] == 0
    connections.settings["default"].setdefault("OPTIONS", {})["pool"] = {"max_size": 2}
    assert keep_connections(30) == []
    assert connection.settings_dict["CONN_MAX_AGE"] == 0


@pytest.mark.postgres  # an in-memory SQLite test database is never closed
@pytest.mark.django_db(transaction=True)
def test_the_sentinels_ping_switches_the_cluster_to_kept_connections(restore_connection_settings, settings):
    settings.WORKFORCE_CLUSTER_CONN_MAX_AGE = 45
    assert ListeningORM().ping() is True
    assert connection.settings_dict["CONN_MAX_AGE"] == 45


# ----------------------------------------------------------------------------- task results


def result(success: bool) -> dict:
    now = timezone.now()
    return {
        "id": uuid.uuid4().hex,
        "name": f"task-{uuid.uuid4().hex[:8]}",
        "func": "mailboxes.tasks.deliver_post",
        "args": (1,),
        "kwargs": {},
        "started": now,
        "stopped": now,
        "result": None if success else "RuntimeError: boom",
        "success": success,
        "sync": True,  # keep this test's connection (django-q2 closes old ones otherwise)
    }


def test_the_cluster_keeps_no_result_of_a_task_that_succeeded():
    from django.conf import settings

    assert settings.Q_CLUSTER["save_limit"] == -1 and Conf.SAVE_LIMIT == -1
    assert settings.Q_CLUSTER["ack_failures"] is True


@pytest.mark.django_db
def test_a_success_writes_no_row_and_a_failure_stays_visible():
    from django_q.monitor import save_task

    broker = ListeningORM(list_key="results-q")
    for _ in range(3):
        save_task(result(True), broker)
    failed = result(False)
    save_task(failed, broker)
    assert Success.objects.count() == 0
    assert list(Failure.objects.values_list("name", flat=True)) == [failed["name"]]
    assert Task.objects.count() == 1
