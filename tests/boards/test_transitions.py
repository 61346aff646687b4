"""The status machine (spec "Working the rows"): every transition allowed and refused, in the
table and through the services, and the calls each status names."""

from __future__ import annotations

import itertools

import pytest

from boards.errors import TaskError
from boards.models import BoardTask, TaskChange, TaskStatus
from boards.services import (
    do_block_task,
    do_cancel_task,
    do_complete_task,
    do_fail_task,
    do_resume_task,
    do_unblock_task,
)
from boards.transitions import ALLOWED, CALLS, calls_from, can_transition, describe_calls_from, is_terminal

from .conftest import FOLLOWUPS, force_status

S = TaskStatus
EXPECTED = {
    "pending": {"in_progress", "blocked", "cancelled"},
    "in_progress": {"completed", "errored", "parked", "pending", "cancelled"},
    "blocked": {"pending", "cancelled"},
    "parked": {"pending", "completed", "cancelled", "errored"},
    "completed": set(),
    "errored": set(),
    "cancelled": set(),
}


@pytest.mark.parametrize("from_status,to_status", list(itertools.product(S.values, S.values)))
def test_every_pair_is_allowed_exactly_as_listed(from_status, to_status):
    assert can_transition(from_status, to_status) is (to_status in EXPECTED[from_status])


def test_the_table_is_the_issue_s_list_and_three_statuses_are_terminal():
    assert {k: set(v) for k, v in ALLOWED.items()} == EXPECTED
    assert {s for s in S.values if is_terminal(s)} == {"completed", "errored", "cancelled"}


def test_every_call_moves_along_an_allowed_transition_and_every_transition_has_a_call():
    covered = set()
    for call in CALLS:
        for from_status, targets in call.moves.items():
            for to_status in targets:
                assert can_transition(from_status, to_status), (call.name, from_status, to_status)
                covered.add((from_status, to_status))
    assert covered == {(f, t) for f, ts in EXPECTED.items() for t in ts}


def test_calls_named_per_status():
    sx = "eng_incidents_followups"
    assert calls_from("pending", sx) == [f"blockTask_{sx}", f"cancelTask_{sx}", "a drain claiming it"]
    assert calls_from("in_progress", sx) == [
        f"completeTask_{sx}",
        f"failTask_{sx}",
        f"cancelTask_{sx}",
        "its drain parking it",
        "its lease lapsing",
    ]
    assert calls_from("blocked", sx) == [f"blockTask_{sx} with unblock: true", f"cancelTask_{sx}"]
    assert calls_from("parked", sx) == [f"completeTask_{sx}", f"failTask_{sx}", f"cancelTask_{sx}", "resuming it"]
    for terminal in ("completed", "errored", "cancelled"):
        assert calls_from(terminal, sx) == []
        assert describe_calls_from(terminal, sx) == f"{terminal} is terminal: no call changes it"
    assert describe_calls_from("blocked", sx) == (
        f"from blocked the calls are blockTask_{sx} with unblock: true, or cancelTask_{sx}"
    )


# --- through the services: each call from each status ---------------------------------

CALL_FNS = {
    "completeTask": lambda org, t: do_complete_task(org, FOLLOWUPS, t.task_id, output={"done": True}),
    "failTask": lambda org, t: do_fail_task(org, FOLLOWUPS, t.task_id, error="boom"),
    "blockTask": lambda org, t: do_block_task(org, FOLLOWUPS, t.task_id, reason="waiting on legal"),
    "unblock": lambda org, t: do_unblock_task(org, FOLLOWUPS, t.task_id),
    "cancelTask": lambda org, t: do_cancel_task(org, FOLLOWUPS, t.task_id),
    "resume": lambda org, t: do_resume_task(org, FOLLOWUPS, t.task_id),
}
# (call, from status) -> (status after, change kind); anything not listed is refused.
OUTCOMES = {
    ("completeTask", "in_progress"): ("completed", "completed"),
    ("completeTask", "parked"): ("completed", "completed"),
    ("failTask", "in_progress"): ("pending", "retried"),
    ("failTask", "parked"): ("pending", "retried"),
    ("blockTask", "pending"): ("blocked", "blocked"),
    ("unblock", "blocked"): ("pending", "unblocked"),
    ("cancelTask", "pending"): ("cancelled", "cancelled"),
    ("cancelTask", "in_progress"): ("cancelled", "cancelled"),
    ("cancelTask", "blocked"): ("cancelled", "cancelled"),
    ("cancelTask", "parked"): ("cancelled", "cancelled"),
    ("resume", "parked"): ("pending", "resumed"),
}


@pytest.mark.parametrize("call,from_status", list(itertools.product(CALL_FNS, S.values)))
def test_each_call_from_each_status(org, file_row, call, from_status):
    task = force_status(file_row(), from_status)
    before = TaskChange.objects.count()
    expected = OUTCOMES.get((call, from_status))
    if expected is not None:
        moved = CALL_FNS[call](org, task)
        assert moved.status == expected[0]
        row = BoardTask.objects.get(pk=task.pk)
        assert row.status == expected[0]
        change = TaskChange.objects.order_by("-id").first()
        assert (change.kind, change.from_status, change.to_status) == (expected[1], from_status, expected[0])
        assert row.lease_until is None and row.claim_token is None
        assert (row.completed_at is not None) is is_terminal(row.status)
        return
    with pytest.raises(TaskError) as refused:
        CALL_FNS[call](org, task)
    row = BoardTask.objects.get(pk=task.pk)
    assert row.status == from_status  # untouched
    assert TaskChange.objects.count() == before
    if is_terminal(from_status):
        assert refused.value.code == "task_terminal"
        assert refused.value.message == f"{task.task_id} is {from_status}, a terminal status: no call changes it."
    else:
        assert refused.value.code == "illegal_status_transition"
        assert f"it is {from_status}" in refused.value.message
        assert describe_calls_from(from_status, "eng_incidents_followups") in refused.value.message


def test_illegal_message_names_the_calls_from_the_row_s_status(org, file_row):
    task = file_row()
    with pytest.raises(TaskError) as refused:
        do_complete_task(org, FOLLOWUPS, task.task_id)
    sx = "eng_incidents_followups"
    assert refused.value.code == "illegal_status_transition"
    assert refused.value.message == (
        f"completeTask_{sx} can't move {task.task_id}: it is pending, and from pending the calls are "
        f"blockTask_{sx}, cancelTask_{sx}, or a drain claiming it."
    )


def test_fail_on_the_last_attempt_errors_the_row(org, file_row):
    task = force_status(file_row(max_attempts=2), "in_progress", attempts=2)
    failed = do_fail_task(org, FOLLOWUPS, task.task_id, error="still broken")
    assert (failed.status, failed.error) == ("errored", "still broken")
    assert TaskChange.objects.order_by("-id").first().kind == "errored"


def test_resume_with_no_attempts_left_is_refused(org, file_row):
    task = force_status(file_row(max_attempts=1), "parked", attempts=1)
    with pytest.raises(TaskError) as refused:
        do_resume_task(org, FOLLOWUPS, task.task_id)
    assert refused.value.code == "illegal_status_transition"
    assert BoardTask.objects.get(pk=task.pk).status == "parked"
