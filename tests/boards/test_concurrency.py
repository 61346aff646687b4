"""Exactly one claimer wins each row (spec "Working the rows"), on
PostgreSQL with real threads and real processes (SQLite has no row locks to test), beside a control showing an unlocked read-then-write double-claims."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

import boards.services.claims as services
from boards.models import BoardTask, TaskChange, TaskStatus
from boards.queries import claimable_tasks
from boards.services import do_claim_task, do_file_task
from tests.conftest import run_in_threads

from .conftest import FOLLOWUPS

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 8
ROWS = 120
REPO = Path(__file__).resolve().parents[2]


def _file_rows(org, n: int) -> list[BoardTask]:
    return [do_file_task(org, FOLLOWUPS, goal=f"row {i}") for i in range(n)]


def _barrier_before_first_read(monkeypatch, n: int) -> None:
    """Every claimer's first candidate read happens at the same moment, so the race is real:
    the read-then-update path's first ``claimable_pending``, or the one-statement claim's
    first statement (PostgreSQL), whichever the claimer reaches first."""
    barrier = threading.Barrier(n)
    waited = threading.local()

    def at_once(original):
        def wrapped(*args, **kwargs):
            if not getattr(waited, "done", False):
                waited.done = True
                barrier.wait(timeout=30)
            return original(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(services, "claimable_pending", at_once(services.claimable_pending))
    monkeypatch.setattr(services, "_claim_sql_for", at_once(services._claim_sql_for))


def _drain_in_threads(org) -> list[list[int]]:
    def claim_all(i: int) -> list[int]:
        mine = []
        while True:
            task = do_claim_task(org, FOLLOWUPS, worker_key=f"w{i}", run=f"run_{i}")
            if task is None:
                return mine
            mine.append(task.pk)

    return run_in_threads(claim_all, THREADS, barrier=False)


def _assert_one_winner_per_row(rows, per_thread) -> None:
    claimed = [pk for mine in per_thread for pk in mine]
    assert len(claimed) == len(rows), "a row was claimed twice or not at all"
    assert Counter(claimed) == Counter(r.pk for r in rows)
    assert set(BoardTask.objects.values_list("status", flat=True)) == {TaskStatus.IN_PROGRESS}
    assert set(BoardTask.objects.values_list("attempts", flat=True)) == {1}
    per_row = Counter(TaskChange.objects.filter(kind="claimed").values_list("task_id", flat=True))
    assert set(per_row.values()) == {1} and len(per_row) == len(rows)
    assert sum(1 for mine in per_thread if mine) > 1, "only one thread ever claimed: the race was not exercised"


def test_many_threads_claim_at_once_and_each_row_has_exactly_one_winner(org, monkeypatch):
    rows = _file_rows(org, ROWS)
    _barrier_before_first_read(monkeypatch, THREADS)
    _assert_one_winner_per_row(rows, _drain_in_threads(org))


def test_without_skip_locked_the_conditional_update_alone_keeps_one_winner(org, monkeypatch):
    """The path SQLite takes: a plain read, then an UPDATE conditional on the row being as
    read. Every thread reads the same first row; one UPDATE wins, the rest retry."""
    monkeypatch.setattr(type(connection.features), "has_select_for_update_skip_locked", False)
    rows = _file_rows(org, ROWS)
    _barrier_before_first_read(monkeypatch, THREADS)
    _assert_one_winner_per_row(rows, _drain_in_threads(org))


def test_control_an_unlocked_read_then_write_double_claims(org):
    """The same race with neither the row lock nor the conditional UPDATE: every thread
    reads the same oldest row and writes it, so it is claimed more than once."""
    rows = [do_file_task(org, FOLLOWUPS, goal=f"row {i}", max_attempts=THREADS * 2) for i in range(5)]
    barrier = threading.Barrier(THREADS)

    def naive_claim(i: int) -> int:
        with transaction.atomic():
            task = claimable_tasks(org, FOLLOWUPS, now=timezone.now()).first()
            barrier.wait(timeout=30)
            BoardTask.objects.filter(pk=task.pk).update(
                status=TaskStatus.IN_PROGRESS,
                attempts=F("attempts") + 1,
                claim_token=f"t{i}",
                lease_until=timezone.now(),
                claimed_by=f"w{i}",
            )
            return task.pk

    winners = Counter(run_in_threads(naive_claim, THREADS, barrier=False))
    assert winners[rows[0].pk] == THREADS  # every thread "won" the same row
    assert BoardTask.objects.get(pk=rows[0].pk).attempts == THREADS


def pid_runner(task):
    """The runner each drain process uses: the row's output names the process."""
    return {"pid": os.getpid()}


DRAIN_SCRIPT = """
import os, sys, time
sys.path.insert(0, {repo!r})
os.environ["DJANGO_SETTINGS_MODULE"] = "workforce_project.settings_test"
import django
django.setup()
from boards.services import do_drain_board
from tests.boards.test_concurrency import pid_runner
from workforce.models import Organization
org = Organization.objects.get(pk={org!r})
while time.time() < {start_at!r}:
    time.sleep(0.01)
report = do_drain_board(org, {board!r}, worker_key=None, run_row=pid_runner, run=f"run_{{os.getpid()}}")
print(report.claimed)
"""


def _database_url() -> str:
    s = connection.settings_dict
    auth = quote(s["USER"] or "postgres")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def test_four_processes_drain_a_thousand_rows_each_exactly_once(org):
    """4 processes draining one board of 1,000 rows: every row
    completed exactly once, no row claimed twice, attempts 1 for every row."""
    BoardTask.objects.bulk_create([BoardTask(organization=org, board_id=FOLLOWUPS, goal=f"row {i}") for i in range(1000)])
    env = {**os.environ, "DATABASE_URL": _database_url()}
    start_at = time.time() + 3
    script = DRAIN_SCRIPT.format(repo=str(REPO), org=org.pk, start_at=start_at, board=FOLLOWUPS)
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err[-2000:] for _, err in outs]
    claimed = [int(out.strip().splitlines()[-1]) for out, _ in outs]
    assert sum(claimed) == 1000
    assert BoardTask.objects.filter(status=TaskStatus.COMPLETED).count() == 1000
    assert set(BoardTask.objects.values_list("attempts", flat=True)) == {1}
    per_row = Counter(TaskChange.objects.filter(kind="claimed").values_list("task_id", flat=True))
    assert len(per_row) == 1000 and set(per_row.values()) == {1}
    completed = Counter(TaskChange.objects.filter(kind="completed").values_list("task_id", flat=True))
    assert len(completed) == 1000 and set(completed.values()) == {1}
    pids = {row["pid"] for row in BoardTask.objects.values_list("output", flat=True)}
    assert len(pids) > 1, f"one process drained everything: {claimed}"
    print("claims per process:", claimed)
