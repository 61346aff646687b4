"""What each process of ``serve`` loads (docs/running.md "Memory"; issue 26 item 3): the
module groups left out of a process must stay out, or its memory grows back silently.

Each check runs in a fresh interpreter, started the way the process starts: the cluster
(``manage.py serve_qcluster``, whose one worker at the defaults is a thread of its own
process) after ``django.setup()`` with its command, django-q2's worker and every app's task
module loaded; the web process with its URLconf, its ASGI application and its connection
pool switched on. And the cluster's in-process worker: a new thread when it stops, the
cluster's end when its task runs past the timeout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from django.db import connection

REPO = Path(__file__).resolve().parents[2]

# Loaded by no process of serve: DRF's optional extras (workforce_project.lean), the
# WebSocket protocol, the MCP SDK before the first /mcp request, the redis client with
# the ORM broker.
NEVER = ["requests", "urllib3", "pygments", "markdown", "django.contrib.postgres", "websockets", "mcp", "redis"]
# Loaded by the web process only: its URLconf, DRF's views, the schema's generator, the
# ASGI server.
WEB_ONLY = ["workforce_project.urls", "rest_framework.views", "drf_spectacular.openapi", "uvicorn", "django.test"]
# On SQLite no process loads the PostgreSQL driver.
POSTGRES_ONLY = ["psycopg", "psycopg_pool"]

CLUSTER = """
import django
django.setup()
import workforce_project.management.commands.serve_qcluster, django_q.worker
import boards.tasks, coordinators.tasks, mail.tasks, mailboxes.tasks, seats.tasks
"""

WEB = """
import django
django.setup()
import workforce_project.management.commands.serve, workforce_project.urls, workforce_project.asgi
from workforce_project.deployment import enable_web_pool
enable_web_pool()
"""

REPORT = """
import json, sys
print(json.dumps(sorted(name for name in {names} if name in sys.modules)))
"""


def loaded(script: str, names: list[str]) -> list[str]:
    """Which of ``names`` are in ``sys.modules`` after ``script``, in a fresh interpreter
    on this test's database, with the server's settings."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "workforce_project.settings"}
    env.pop("WORKFORCE_BROKER_URL", None)  # the default broker: the ORM's
    result = subprocess.run(
        [sys.executable, "-c", script + REPORT.format(names=names)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def left_out(*, web: bool) -> list[str]:
    names = list(NEVER) + ([] if web else list(WEB_ONLY))
    if connection.vendor == "sqlite":
        names += POSTGRES_ONLY
    return names


def test_the_cluster_and_its_worker_load_no_web_module_and_no_extra():
    assert loaded(CLUSTER, left_out(web=False)) == []


def test_the_web_process_at_start_loads_no_extra():
    assert loaded(WEB, left_out(web=True)) == []


def test_the_extras_stay_importable_for_whoever_needs_them():
    names = ["requests", "pygments", "yaml", "django.contrib.postgres"]
    script = CLUSTER + "\nimport requests, pygments, yaml, django.contrib.postgres\n"
    assert loaded(script, names) == sorted(names)


@pytest.fixture
def sentinel(monkeypatch):
    from workforce_project.management.commands.serve_qcluster import ServeSentinel

    made = ServeSentinel(threading.Event(), threading.Event(), uuid.uuid4(), broker=object(), start=False)
    made.pool_size = 1
    yield made
    for worker in made.pool:
        made.task_queue.put("STOP")
        worker.join(5)


def test_the_one_worker_is_a_thread_of_the_cluster_process(sentinel):
    sentinel.spawn_worker()
    (worker,) = sentinel.pool
    assert isinstance(worker, threading.Thread) and worker.is_alive()
    assert worker.pid == os.getpid()
    assert worker.timer.value == -1  # idle, as django-q2's guard reads it


def test_a_stopped_worker_thread_is_replaced(sentinel):
    sentinel.spawn_worker()
    (first,) = sentinel.pool
    first.timer.value = -2  # recycled
    sentinel.task_queue.put("STOP")
    first.join(5)
    sentinel.reincarnate(first)
    (second,) = sentinel.pool
    assert second is not first and second.is_alive()
    assert sentinel.reincarnations == 1


def test_a_task_past_the_timeout_in_the_worker_thread_ends_the_cluster(sentinel, monkeypatch):
    from workforce_project.management.commands import serve_qcluster

    exits = []

    def fake_exit(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(serve_qcluster.os, "_exit", fake_exit)
    sentinel.spawn_worker()
    (worker,) = sentinel.pool
    worker.timer.value = 0  # what django-q2's guard counts a busy worker down to
    with pytest.raises(SystemExit):
        sentinel.reincarnate(worker)
    assert exits == [serve_qcluster.TIMEOUT_EXIT]


def test_stopping_the_worker_thread_closes_its_queue_only_after_it_ended(monkeypatch):
    """The worker thread reads this process's end of the task queue: the stop waits for
    it to take its STOP and end before closing that end (closed under it, the thread
    died with ``OSError: Bad file descriptor`` at every few stops of serve)."""
    from workforce_project.management.commands.serve_qcluster import ServeSentinel

    died: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    for _ in range(20):
        sentinel = ServeSentinel(threading.Event(), threading.Event(), uuid.uuid4(), broker=object(), start=False)
        sentinel.pool_size = 1
        sentinel.spawn_worker()
        (worker,) = sentinel.pool
        closed_while_alive: list[bool] = []

        def close(queue=sentinel.task_queue, close=sentinel.task_queue.close, worker=worker, seen=closed_while_alive):
            seen.append(worker.is_alive())
            close()

        monkeypatch.setattr(sentinel.task_queue, "close", close)
        sentinel.stop_workers(pause=0.001)
        worker.join(5)
        assert (sentinel.pool, closed_while_alive, worker.is_alive(), died) == ([], [False], False, [])
