"""Board fixtures: a tree whose mailboxes hold boards, rows forced into any status, and a
tool context for a seat."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from boards.drains import set_board_drains
from boards.models import TERMINAL_STATUSES, BoardTask, TaskStatus
from boards.services import do_file_task
from workforce.tools import ToolContext

from ..conftest import mailbox_md

INCIDENTS = "eng.incidents"
FOLLOWUPS = "eng.incidents.followups"
ESCALATIONS = "eng.incidents.escalations"
HELP_ESCALATIONS = "support.help.escalations"

BOARD_TREE = {
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", body="Post what you finished."),
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
        "Where the engineering team works incidents.", boards="[followups, escalations]", body="Post the timeline here."
    ),
    "teams/support/mailboxes/help/MAILBOX.md": mailbox_md(
        "Ask the support team anything.",
        members=("support.devices", "support.accounts"),
        boards="[escalations]",
        boardActions="true",
        body="Be kind.",
    ),
}


@pytest.fixture(autouse=True)
def _no_drains():
    """No hired drains unless a test declares them."""
    set_board_drains(())
    yield
    set_board_drains(())


@pytest.fixture
def boards_open(open_tree):
    """The board tree, bound and opened: eng.standup (no board), eng.incidents (followups,
    escalations), support.help (escalations, boardActions: true)."""
    return open_tree(BOARD_TREE)


@pytest.fixture
def seat_ctx(org):
    """A tool context for seat ``eng.analyst`` in the default organization."""
    return ToolContext(org=org, seat_id="eng.analyst")


@pytest.fixture
def file_row(org):
    """``file_row(board_id=FOLLOWUPS, **fields) -> BoardTask`` (pending)."""

    def _file(board_id: str = FOLLOWUPS, *, in_org=None, **fields):
        fields.setdefault("goal", "Write the postmortem.")
        return do_file_task(in_org or org, board_id, **fields)

    return _file


def force_status(task: BoardTask, status: str, *, attempts: int | None = None, lapsed: bool = False) -> BoardTask:
    """Put ``task`` into ``status`` directly (the fields each status needs), bypassing the
    services, to test what every status allows."""
    now = timezone.now()
    fields = {"status": status, "lease_until": None, "claim_token": None, "completed_at": None}
    if status == TaskStatus.IN_PROGRESS:
        fields.update(
            lease_until=now + timedelta(seconds=-5 if lapsed else 300),
            claim_token=f"forced-{task.pk}",
            started_at=now,
        )
        fields["attempts"] = attempts if attempts is not None else max(task.attempts, 1)
    elif attempts is not None:
        fields["attempts"] = attempts
    if status in TERMINAL_STATUSES:
        fields["completed_at"] = now
    BoardTask.objects.filter(pk=task.pk).update(**fields)
    task.refresh_from_db()
    return task
