"""The claim path's statements (issue 15, "Claims"): a claim is one statement on
PostgreSQL, its change records included, and a seat's drain claims the next row in the
same task; exact counts per database guard both. Beside them, the one-statement claim
under 4+ real threads holding their claims open, and a control without its row lock and
its guard that double-claims under the same choreography (spec "Working the rows":
exactly one claimer wins a row)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import boards.services.claims as claims
import seats.drains
from boards.models import BoardTask, TaskChange, TaskStatus
from boards.services import do_claim_task, do_file_task
from tests.conftest import on_postgres, run_in_threads

from .test_seat_drain import FOLLOWUPS, drain_runtime, hired, tree, worker_md  # noqa: F401 (fixtures)

# One claim: on PostgreSQL the one statement; on SQLite the read-then-update path in
# one transaction (here a savepoint): the lapsed and the pending candidate, the
# conditional UPDATE, the change record.
CLAIM_STATEMENTS = {"postgresql": 1, "sqlite": 6}
# A seat's drain: what one more row costs in the same task (its claim, the turn's start,
# finish and cancellation check, the settle), and the step's fixed part around them.
# (21 / 26 before the lean post path and the lean wake landed beside this one; 19 on
# PostgreSQL before each turn item became one statement with its counter's bump, and the
# turn's end one statement with its reply; 16 / 24 before the one turn path ran the turn's
# end in its settle transaction, with no SAVEPOINT and RELEASE around it; 14 / 22 before
# the row's turn started in the one turn path's start step, in its transaction, with no
# SAVEPOINT and RELEASE of the kind's own and of start_turn's around it; 10 on PostgreSQL
# before the turn's request and its prompt item became one statement.)
DRAINED_ROW_STATEMENTS = {"postgresql": 9, "sqlite": 18}


def _vendor() -> str:
    return connection.vendor


@pytest.mark.django_db
def test_one_claim_is_one_statement_on_postgresql(org, django_assert_num_queries):
    rows = [do_file_task(org, FOLLOWUPS, goal=f"row {i}") for i in range(3)]
    with django_assert_num_queries(CLAIM_STATEMENTS[_vendor()]):
        task = do_claim_task(org, FOLLOWUPS, worker_key="lead", run="run_1")
    assert (task.pk, task.status, task.attempts, task.claimed_by, task.run) == (rows[0].pk, "in_progress", 1, "lead", "run_1")
    assert task.deps == [] and task.labels == [] and task.metadata == {"authorVerified": False}  # JSON read back as JSON
    change = TaskChange.objects.filter(task=task).order_by("-id").first()
    assert (change.kind, change.from_status, change.to_status, change.actor, change.run, change.data) == (
        "claimed",
        "pending",
        "in_progress",
        "lead",
        "run_1",
        {"attempt": 1},
    )


@pytest.mark.django_db
def test_a_claim_that_finds_nothing_is_one_statement_on_postgresql(org, django_assert_num_queries):
    with django_assert_num_queries(1 if on_postgres() else 4):  # SQLite: savepoint, two reads, release
        assert do_claim_task(org, FOLLOWUPS) is None


@pytest.mark.django_db
def test_a_lapsed_row_is_claimed_again_with_its_abandonment_in_the_same_statement(org, django_assert_num_queries):
    task = do_file_task(org, FOLLOWUPS, goal="lapses")
    t0 = timezone.now()
    do_claim_task(org, FOLLOWUPS, worker_key="a", run="run_a", now=t0)
    with django_assert_num_queries(1 if on_postgres() else 7):  # SQLite: one more INSERT, the abandoned record
        again = do_claim_task(org, FOLLOWUPS, worker_key="b", run="run_b", now=t0 + timedelta(seconds=301))
    assert (again.pk, again.attempts, again.abandonments, again.claimed_by) == (task.pk, 2, 1, "b")
    changes = list(
        TaskChange.objects.filter(task=task).order_by("id").values_list("kind", "from_status", "to_status", "actor", "data")
    )
    assert changes[1:] == [
        ("claimed", "pending", "in_progress", "a", {"attempt": 1}),
        ("abandoned", "in_progress", "pending", "lease", {"abandonments": 1, "claimedBy": "a"}),
        ("claimed", "pending", "in_progress", "b", {"attempt": 2}),
    ]


@pytest.mark.django_db
def test_one_drained_row_costs_a_fixed_number_of_statements_and_no_fresh_task(
    hired,  # noqa: F811
    org,
    monkeypatch,
):
    """The marginal cost of a row in a seat's drain step: the step with two rows minus
    the step with one. The step's own part (the seat, its session, the turn slot, the
    lapsed sweep, the final claim that finds nothing) is paid once per task."""
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    enqueued = []
    monkeypatch.setattr(seats.drains, "enqueue_drain", lambda *args: enqueued.append(args))
    do_file_task(org, FOLLOWUPS, goal="makes the board session")
    seats.drains.do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")

    def step_with(n: int) -> int:
        for i in range(n):
            do_file_task(org, FOLLOWUPS, goal=f"row {n}.{i}")
        with CaptureQueriesContext(connection) as ctx:
            report = seats.drains.do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
        assert (report["claimed"], report["completed"], report["drained"]) == (n, n, True)
        return len(ctx.captured_queries)

    one, two, three = step_with(1), step_with(2), step_with(3)
    assert two - one == three - two == DRAINED_ROW_STATEMENTS[_vendor()]
    assert enqueued == []  # drained: no next step, and no task per row
    assert set(BoardTask.objects.values_list("status", flat=True)) == {"completed"}


# ----------------------------------------------------------------------------- under real threads

CLAIMERS = 6
ROWS = 36
HOLD_SECONDS = 0.05  # each claim's transaction stays open this long, so claimers meet locked rows


def _claim_holding(org, i: int) -> list[int]:
    mine = []
    while True:
        with transaction.atomic():
            task = do_claim_task(org, FOLLOWUPS, worker_key=f"w{i}", run=f"run_{i}")
            if task is None:
                return mine
            time.sleep(HOLD_SECONDS)
        mine.append(task.pk)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_one_statement_claim_gives_each_row_one_claimer_under_six_threads(org):
    rows = [do_file_task(org, FOLLOWUPS, goal=f"row {i}") for i in range(ROWS)]
    per_thread = run_in_threads(lambda i: _claim_holding(org, i), CLAIMERS)
    claimed = [pk for mine in per_thread for pk in mine]
    assert Counter(claimed) == Counter(r.pk for r in rows)  # every row once, none twice
    assert sum(1 for mine in per_thread if mine) == CLAIMERS, "a claimer waited instead of skipping the locked rows"
    assert {(t.status, t.attempts) for t in BoardTask.objects.all()} == {(TaskStatus.IN_PROGRESS, 1)}
    per_row = Counter(TaskChange.objects.filter(kind="claimed").values_list("task_id", flat=True))
    assert len(per_row) == ROWS and set(per_row.values()) == {1}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_control_the_same_statement_without_its_lock_and_guard_double_claims(org, monkeypatch):
    """The same statement with ``FOR UPDATE SKIP LOCKED`` and the UPDATE's guard on status
    and attempts taken out: claimers that read the same oldest row wait on each other's
    UPDATE and then write it again, so rows are claimed more than once."""
    monkeypatch.setattr(claims, "_locked_candidate_sql", _unlocked_candidate_sql)
    unguarded = claims._CLAIM_SQL.replace("AND t.status = p.status AND t.attempts = p.attempts ", "")
    assert unguarded != claims._CLAIM_SQL
    monkeypatch.setattr(claims, "_CLAIM_SQL", unguarded)
    [do_file_task(org, FOLLOWUPS, goal=f"row {i}", max_attempts=CLAIMERS * ROWS) for i in range(ROWS // 6)]
    barrier = threading.Barrier(CLAIMERS)

    def claim_once(i: int) -> int:
        barrier.wait(timeout=30)
        with transaction.atomic():
            task = do_claim_task(org, FOLLOWUPS, worker_key=f"w{i}", run=f"run_{i}")
            time.sleep(HOLD_SECONDS)
        return task.pk

    winners = Counter(run_in_threads(claim_once, CLAIMERS, barrier=False))
    assert max(winners.values()) > 1, f"no row was claimed twice: {winners}"
    assert max(BoardTask.objects.values_list("attempts", flat=True)) > 1


def _unlocked_candidate_sql(qs):
    sql, params = qs.values(*claims._CANDIDATE_COLUMNS)[:1].query.sql_with_params()
    return sql, tuple(params)
