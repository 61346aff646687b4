"""Working the rows (spec "Working the rows"): claim order, priority,
deps, retries, leases and abandonments, the drain and its django-q2 entry."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from boards.models import BoardTask, TaskChange
from boards.services import (
    ParkTask,
    do_cancel_task,
    do_claim_task,
    do_complete_task,
    do_drain_board,
    do_extend_lease,
    do_release_lapsed_tasks,
    do_settle_claim,
)

from .conftest import ESCALATIONS, FOLLOWUPS

pytestmark = pytest.mark.django_db

LATER = timedelta(seconds=301)


def claim(org, **kw):
    return do_claim_task(org, FOLLOWUPS, **kw)


def test_a_claim_sets_in_progress_attempts_lease_started_and_run(org, file_row):
    task = file_row()
    now = timezone.now()
    claimed = claim(org, worker_key="analyst", run="run_1", lease_seconds=60, now=now)
    assert claimed.pk == task.pk
    assert (claimed.status, claimed.attempts, claimed.run, claimed.claimed_by) == ("in_progress", 1, "run_1", "analyst")
    assert claimed.lease_until == now + timedelta(seconds=60)
    assert claimed.started_at == now and claimed.claim_token
    change = TaskChange.objects.filter(task=task).order_by("-id").first()
    assert (change.kind, change.from_status, change.to_status, change.actor, change.run) == (
        "claimed",
        "pending",
        "in_progress",
        "analyst",
        "run_1",
    )
    assert claim(org) is None  # nothing else to claim


def test_oldest_first(org, file_row):
    rows = [file_row(goal=f"g{i}") for i in range(4)]
    assert [claim(org).pk for _ in rows] == [r.pk for r in rows]


def test_highest_priority_first_when_set_unset_counts_as_zero(org, file_row):
    plain = file_row(goal="plain")
    low = file_row(goal="low", priority=-1)
    high = file_row(goal="high", priority=5)
    mid = file_row(goal="mid", priority=2)
    mid2 = file_row(goal="mid2", priority=2)
    order = [claim(org).goal for _ in range(5)]
    assert order == ["high", "mid", "mid2", "plain", "low"]
    assert {plain.pk, low.pk, high.pk, mid.pk, mid2.pk}


def test_a_row_waits_for_every_dep_to_complete(org, file_row):
    a, b = file_row(goal="a"), file_row(goal="b")
    c = file_row(goal="c", deps=[a.task_id, b.task_id], priority=10)
    first = claim(org)
    assert first.goal == "a"  # c has the priority but its deps are open
    do_settle_claim(first, output="ok")
    second = claim(org)
    assert second.goal == "b"
    assert claim(org) is None  # c still waits on b
    do_settle_claim(second, output="ok")
    assert claim(org).pk == c.pk


def test_a_dep_that_errored_or_was_cancelled_never_frees_the_row(org, file_row):
    a = file_row(goal="a")
    file_row(goal="c", deps=[a.task_id])
    do_cancel_task(org, FOLLOWUPS, a.task_id)
    assert claim(org) is None


def test_a_drain_claims_rows_for_its_worker_key_or_unassigned(org, file_row):
    mine = file_row(goal="mine", assignee="analyst")
    file_row(goal="theirs", assignee="lead")
    free = file_row(goal="free")
    got = [claim(org, worker_key="analyst").pk for _ in range(2)]
    assert got == [mine.pk, free.pk]
    assert claim(org, worker_key="analyst") is None
    assert claim(org, worker_key="lead").goal == "theirs"


def test_boards_and_organizations_are_separate_ledgers(org, other_org, file_row):
    file_row(ESCALATIONS)
    file_row(FOLLOWUPS, in_org=other_org)
    assert claim(org) is None


def test_a_failed_row_is_retried_until_max_attempts_then_errored(org, file_row):
    task = file_row(max_attempts=3)
    for attempt in (1, 2, 3):
        claimed = claim(org)
        assert claimed.pk == task.pk and claimed.attempts == attempt
        settled = do_settle_claim(claimed, error=f"boom {attempt}")
        assert settled.status == ("pending" if attempt < 3 else "errored")
    row = BoardTask.objects.get(pk=task.pk)
    assert (row.status, row.attempts, row.error) == ("errored", 3, "boom 3")
    assert row.completed_at is not None
    assert claim(org) is None
    kinds = list(TaskChange.objects.filter(task=task).order_by("id").values_list("kind", flat=True))
    assert kinds == ["added", "claimed", "retried", "claimed", "retried", "claimed", "errored"]


def test_a_lapsed_lease_makes_the_row_claimable_again(org, file_row):
    task = file_row()
    t0 = timezone.now()
    first = claim(org, run="run_a", now=t0)
    assert claim(org, now=t0 + timedelta(seconds=10)) is None  # lease still held
    second = claim(org, run="run_b", now=t0 + LATER)
    assert second.pk == task.pk
    assert (second.attempts, second.abandonments, second.run) == (2, 1, "run_b")
    assert second.claim_token != first.claim_token
    # the first claim is stale: its settle changes nothing
    assert do_settle_claim(first, output="late") is None
    assert BoardTask.objects.get(pk=task.pk).status == "in_progress"
    kinds = list(TaskChange.objects.filter(task=task).order_by("id").values_list("kind", flat=True))
    assert kinds == ["added", "claimed", "abandoned", "claimed"]


def test_three_abandonments_error_the_row(org, file_row):
    task = file_row(max_attempts=10)
    t = timezone.now()
    for _ in range(3):
        assert claim(org, now=t).pk == task.pk
        t += LATER
    # the third lease lapses: the row is errored instead of claimed again
    assert claim(org, now=t) is None
    row = BoardTask.objects.get(pk=task.pk)
    assert (row.status, row.abandonments, row.attempts) == ("errored", 3, 3)
    assert row.error == "abandoned 3 times: its lease lapsed before a drain settled it"
    assert row.lease_until is None


def test_a_lapse_on_the_last_attempt_errors_the_row(org, file_row):
    task = file_row(max_attempts=1)
    t = timezone.now()
    claim(org, now=t)
    assert claim(org, now=t + LATER) is None
    row = BoardTask.objects.get(pk=task.pk)
    assert (row.status, row.abandonments) == ("errored", 1)
    assert row.error == "its lease lapsed on its last attempt (1 of 1)"


def test_the_sweep_releases_lapsed_rows(org, file_row):
    task = file_row()
    t = timezone.now()
    claim(org, now=t)
    assert do_release_lapsed_tasks(org, FOLLOWUPS, now=t + timedelta(seconds=5)) == 0
    assert do_release_lapsed_tasks(org, FOLLOWUPS, now=t + LATER) == 1
    row = BoardTask.objects.get(pk=task.pk)
    assert (row.status, row.abandonments, row.lease_until, row.claim_token) == ("pending", 1, None, None)
    change = TaskChange.objects.filter(task=task).order_by("-id").first()
    assert (change.kind, change.from_status, change.to_status, change.actor) == ("abandoned", "in_progress", "pending", "lease")


def test_extending_a_lease_keeps_the_row(org, file_row):
    file_row()
    t = timezone.now()
    claimed = claim(org, now=t, lease_seconds=1)
    assert do_extend_lease(claimed, lease_seconds=600)
    assert claim(org, now=t + timedelta(seconds=5)) is None
    do_cancel_task(org, FOLLOWUPS, claimed.task_id)
    assert not do_extend_lease(claimed)


def test_cancelling_a_row_a_drain_is_working_makes_its_settle_a_no_op(org, file_row):
    file_row()
    claimed = claim(org)
    do_cancel_task(org, FOLLOWUPS, claimed.task_id, actor="eng.lead")
    assert do_settle_claim(claimed, output="done anyway") is None
    assert BoardTask.objects.get(pk=claimed.pk).status == "cancelled"


def test_a_settled_row_can_also_be_completed_by_a_tool_while_claimed(org, file_row):
    file_row()
    claimed = claim(org)
    do_complete_task(org, FOLLOWUPS, claimed.task_id, output="by hand")
    assert do_settle_claim(claimed, error="late failure") is None
    assert BoardTask.objects.get(pk=claimed.pk).output == "by hand"


def test_drain_runs_every_row_and_reports(org, file_row):
    rows = [file_row(goal=f"g{i}") for i in range(3)]
    flaky = file_row(goal="flaky", max_attempts=2)
    parked = file_row(goal="park me")
    seen = []

    def run_row(task):
        seen.append(task.goal)
        assert task.status == "in_progress" and task.run == "run_x"
        if task.goal == "flaky":
            raise ValueError("nope")
        if task.goal == "park me":
            raise ParkTask("needs approval")
        return {"did": task.goal}

    report = do_drain_board(org, FOLLOWUPS, worker_key=None, run_row=run_row, run="run_x")
    assert seen == ["g0", "g1", "g2", "flaky", "flaky", "park me"]  # a retried row is still the oldest
    assert (report.claimed, report.completed, report.retried, report.errored, report.parked, report.lost) == (6, 3, 1, 1, 1, 0)
    assert [BoardTask.objects.get(pk=r.pk).output for r in rows] == [{"did": "g0"}, {"did": "g1"}, {"did": "g2"}]
    f = BoardTask.objects.get(pk=flaky.pk)
    assert (f.status, f.attempts, f.error) == ("errored", 2, "ValueError: nope")
    p = BoardTask.objects.get(pk=parked.pk)
    assert p.status == "parked" and p.run == "run_x"
    assert TaskChange.objects.filter(task=p, kind="parked").get().data == {"reason": "needs approval"}
    assert report.as_dict()["taskIds"][0] == rows[0].task_id


def test_drain_max_rows(org, file_row):
    for i in range(3):
        file_row(goal=f"g{i}")
    report = do_drain_board(org, FOLLOWUPS, worker_key=None, run_row=lambda t: None, max_rows=2)
    assert report.claimed == 2
    assert BoardTask.objects.filter(status="pending").count() == 1


def run_row_for_test(task):
    """The runner the django-q2 entry imports by dotted path."""
    return {"ran": task.task_id}


def test_the_django_q_entry_drains_by_ids(org, file_row):
    from django_q.tasks import async_task

    task = file_row()
    async_task("boards.tasks.drain_board", org.pk, FOLLOWUPS, None, "tests.boards.test_drain.run_row_for_test", "run_q")
    row = BoardTask.objects.get(pk=task.pk)
    assert (row.status, row.output, row.run) == ("completed", {"ran": task.task_id}, "run_q")


def test_the_django_q_entry_returns_the_report(org, file_row):
    from boards.tasks import drain_board, release_lapsed_tasks

    file_row()
    report = drain_board(org.pk, FOLLOWUPS, "analyst", "tests.boards.test_drain.run_row_for_test")
    assert report["claimed"] == 1 and report["completed"] == 1 and report["boardId"] == FOLLOWUPS
    assert release_lapsed_tasks(org.pk, FOLLOWUPS) == 0


def test_many_rows_errored_on_their_last_lapse_do_not_hide_a_pending_row(org, file_row):
    from .conftest import force_status

    stale = [force_status(file_row(goal=f"stale {i}"), "in_progress", lapsed=True) for i in range(70)]
    BoardTask.objects.filter(pk__in=[t.pk for t in stale]).update(abandonments=2)
    fresh = file_row(goal="fresh")
    assert claim(org).pk == fresh.pk
    assert BoardTask.objects.filter(status="errored").count() == 70
