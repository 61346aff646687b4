"""A board row's turn killed by a crash runs once (spec "Working the rows": one
``runTask`` request per claim; the row settles with its turn). A real process runs the
seat's drain step and is killed (``os._exit``) at a chosen moment; the test then looks at
what the database kept and lets the row be claimed again, on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from boards.models import BoardTask, TaskChange
from boards.services import do_file_task
from seats.drains import configure_board_drains, do_seat_drain
from seats.models import TurnSlot
from workforce.models import Request

from ..conftest import hire_tree, open_mailboxes, wired_by_hand
from .test_seat_drain import FOLLOWUPS, LEAD_RUN, tree, worker_md

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

REPO = Path(__file__).resolve().parents[2]

# The child runs one step of eng.lead's drain and kills itself: ``after-commit`` at the
# first commit after which the row's runTask request is completed (before settling moved
# into the turn's transaction, that commit left the row in progress), ``model-returned``
# as soon as the model answered, before anything of the turn's end is written.
CHILD = textwrap.dedent("""
    import os, sys
    sys.path.insert(0, sys.argv[1])
    os.environ["DJANGO_SETTINGS_MODULE"] = "workforce_project.settings_test"
    import django
    django.setup()
    from django.db import transaction
    from seats import drains
    from workforce.models import Request

    mode, org_id, board_id = sys.argv[2], sys.argv[3], sys.argv[4]
    if mode == "after-commit":
        exit_atomic = transaction.Atomic.__exit__

        def watched(self, *exc):
            result = exit_atomic(self, *exc)
            if not transaction.get_connection(self.using).in_atomic_block and exc[0] is None:
                if Request.objects.filter(action="runTask", status="completed").exists():
                    os._exit(41)
            return result

        transaction.Atomic.__exit__ = watched
    else:
        from seats import agent  # the agent kind's row turn (seats.agent.work_board_row) runs the model

        run_turn = agent.run_turn

        def answered(*args, **kwargs):
            run_turn(*args, **kwargs)
            os._exit(42)

        agent.run_turn = answered
    drains.do_seat_drain(org_id, board_id, "eng.lead", "lead")
    os._exit(0)
""")


def run_killed_drain(mode: str, org_id: str) -> int:
    db = connection.settings_dict
    env = dict(os.environ, DATABASE_URL=f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), mode, org_id, FOLLOWUPS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (41, 42), done.stderr[-3000:]
    return done.returncode


@pytest.fixture
def filed(make_tree, org):
    """eng.lead drains eng.incidents.followups; one row filed, no drain woken yet."""
    with wired_by_hand("mailbox"):
        root = make_tree(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
        open_mailboxes(root, org)
        configure_board_drains("mailbox", hire_tree(root), [FOLLOWUPS])
        yield do_file_task(org, FOLLOWUPS, goal="Run me once.")


def turns() -> list[str]:
    return sorted(Request.objects.filter(session__session_id=LEAD_RUN, action="runTask").values_list("status", flat=True))


def lapse_and_drain_again(org) -> None:
    """Let the killed step's time run out: its row's lease and its seat's turn slot lapse
    (the slot a second sooner, seats.turns.slot_hold_seconds)."""
    BoardTask.objects.filter(status="in_progress").update(lease_until=timezone.now() - timedelta(seconds=1))
    TurnSlot.objects.exclude(claim_token="").update(lease_until=timezone.now() - timedelta(seconds=2))
    while do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")["claimed"]:
        pass


def test_a_kill_right_after_the_turn_commits_leaves_the_row_settled_and_run_once(filed, org):
    assert run_killed_drain("after-commit", org.pk) == 41
    task = BoardTask.objects.get(pk=filed.pk)
    assert (task.status, task.attempts, task.abandonments) == ("completed", 1, 0)
    assert task.output.startswith("eng.lead heard: Task ")
    lapse_and_drain_again(org)  # a redelivered drain, a sweep: nothing is left to run
    task.refresh_from_db()
    assert (task.status, task.attempts) == ("completed", 1)
    assert turns() == ["completed"]
    assert list(TaskChange.objects.filter(task=task).order_by("id").values_list("kind", flat=True)) == [
        "added",
        "claimed",
        "completed",
    ]


def test_a_kill_after_the_model_answered_and_before_the_commit_runs_the_row_again_once(filed, org):
    assert run_killed_drain("model-returned", org.pk) == 42
    task = BoardTask.objects.get(pk=filed.pk)
    assert (task.status, task.attempts) == ("in_progress", 1)
    assert turns() == ["running"]  # nothing of the turn's end was written
    lapse_and_drain_again(org)
    task.refresh_from_db()
    assert (task.status, task.attempts, task.abandonments) == ("completed", 2, 1)
    assert turns() == ["aborted", "completed"]  # exactly one completed runTask
    assert list(TaskChange.objects.filter(task=task).order_by("id").values_list("kind", flat=True)) == [
        "added",
        "claimed",
        "abandoned",
        "claimed",
        "completed",
    ]
