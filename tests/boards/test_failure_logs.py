"""A board row given up (errored: out of attempts, or abandoned by its lease) is one
warning line naming the board, the row and why; a failed attempt that will be retried
is an INFO line, without a traceback."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from boards.models import BoardTask
from boards.services import do_claim_task, do_release_lapsed_tasks
from workforce.llm import set_model_resolver
from workforce.testing import create_mock_model_resolver

from .conftest import FOLLOWUPS
from .test_seat_drain import file_task, hired, row, tree, worker_md  # noqa: F401 (fixtures)


def warnings(caplog) -> list[tuple[str, str]]:
    return [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_row_out_of_attempts_is_one_warning_line(hired, file_task, caplog):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    set_model_resolver(create_mock_model_resolver({"eng.lead": [RuntimeError, RuntimeError]}))
    caplog.set_level(logging.INFO)
    caplog.clear()  # hiring's board warnings
    task = row(file_task("Flaky.", maxAttempts=2))
    assert task.status == "errored"
    reason = "TurnFailed: model-error: mock: RuntimeError: mock: scripted failure"
    model_line = (
        "seats.turns",
        "model call failed: seat eng.lead, model embedded/echo: mock: RuntimeError: mock: scripted failure",
    )
    assert warnings(caplog) == [
        model_line,
        model_line,
        ("boards.services.rows", f"board row given up: board {FOLLOWUPS}, row {task.task_id}, after 2 of 2 attempts: {reason}"),
    ]
    retried = [r for r in caplog.records if r.name == "boards.services.claims" and r.levelno == logging.INFO]
    assert [r.getMessage() for r in retried] == [
        f"board {FOLLOWUPS}: run of {task.task_id} failed (attempt 1 of 2): {reason}",
        f"board {FOLLOWUPS}: run of {task.task_id} failed (attempt 2 of 2): {reason}",
    ]
    assert all(r.exc_info is None for r in caplog.records if r.levelno >= logging.INFO)


def test_a_row_abandoned_by_its_lease_on_its_last_attempt_is_one_warning_line(
    org, file_row, caplog, django_capture_on_commit_callbacks
):
    task = file_row(max_attempts=1)
    claimed = do_claim_task(org, FOLLOWUPS, worker_key="lead", run="r1", lease_seconds=60)
    BoardTask.objects.filter(pk=claimed.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    caplog.set_level(logging.INFO)
    with django_capture_on_commit_callbacks(execute=True):  # logged once the row is errored for good
        assert do_release_lapsed_tasks(org, FOLLOWUPS) == 1
    assert warnings(caplog) == [
        (
            "boards.services.rows",
            f"board row given up: board {FOLLOWUPS}, row {task.task_id}, after 1 of 1 attempts: "
            "its lease lapsed on its last attempt (1 of 1)",
        ),
    ]
