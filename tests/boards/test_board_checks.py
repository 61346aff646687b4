"""``manage.py check`` warns about the board problems hiring warns about: a drain of a
board no mailbox holds (mailboxes.W001), task tools of one (W002), a held board no
worker drains (W003). It writes nothing: no seat is hired."""

from __future__ import annotations

from mailboxes.checks import check_boards
from seats.models import Seat
from tests.conftest import mailbox_md, write_tree
from tests.seats.conftest import worker_md


def test_check_warns_about_unheld_drains_and_unattended_boards(settings, tmp_path, db):
    settings.WORKFORCE_ROOT = str(
        write_tree(
            tmp_path,
            {
                "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", boards="[followups, escalations]"),
                "teams/eng/workers/lead/WORKER.md": worker_md("Leads.", drains="[eng.incidents.followups]"),
                "teams/eng/workers/analyst/WORKER.md": worker_md(
                    "Analyses.", drains="[eng.incident.followups]", boardTools="[eng.incidents.nope]"
                ),
            },
        )
    )
    found = check_boards()
    assert [(w.id, w.msg) for w in found] == [
        (
            "mailboxes.W001",
            "seat eng.analyst drains board eng.incident.followups, which no mailbox holds: no mailbox "
            'eng.incident holds a board "followups". It drains a second, empty ledger; fix the mailbox '
            "id or board name it names.",
        ),
        (
            "mailboxes.W002",
            "seat eng.analyst holds the task tools of board eng.incidents.nope, which no mailbox holds: "
            'mailbox eng.incidents holds escalations, followups, not "nope". Its tools write to a second, '
            "empty ledger; fix the mailbox id or board name it names.",
        ),
        (
            "mailboxes.W003",
            'mailbox eng.incidents holds board "escalations" (eng.incidents.escalations), and no hired '
            "seat drains it: its rows wait until someone works them. If a seat should drain it, check the "
            "mailbox id and board name it names.",
        ),
    ]
    assert not Seat.objects.exists()
