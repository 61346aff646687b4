"""Hire-time warnings about boards (spec "Working the rows") and the HTTP read of a
board's rows; the admin is read-only."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from boards.drains import BoardDrain, board_worker_keys, set_board_drains, unattended_board_warnings, unknown_drain_warnings
from boards.queries import SAFE_FIELDS

from .conftest import FOLLOWUPS, force_status

HELD = ["eng.incidents.followups", "eng.incidents.escalations", "support.help.escalations"]


def test_a_held_board_no_seat_drains_warns_naming_the_mailbox_and_the_board():
    warnings = unattended_board_warnings(HELD, ["eng.incidents.followups"])
    assert [w.board_id for w in warnings] == ["eng.incidents.escalations", "support.help.escalations"]
    first = warnings[0]
    assert (first.code, first.mailbox_id, first.board, first.seat_id) == (
        "unattended-board",
        "eng.incidents",
        "escalations",
        None,
    )
    assert str(first) == (
        'mailbox eng.incidents holds board "escalations" (eng.incidents.escalations), and no hired seat drains it: '
        "its rows wait until someone works them. If a seat should drain it, check the mailbox id and board name it names."
    )
    assert unattended_board_warnings(HELD, HELD) == []


def test_a_drain_of_a_board_no_mailbox_holds_warns_naming_the_mailbox_and_the_board():
    drains = [
        BoardDrain("eng.analyst", "eng.incidents.followup", ("analyst",)),  # typo in the board
        ("eng.lead", "eng.incident.followups"),  # typo in the mailbox
        BoardDrain("eng.lead", "eng.incidents.followups", ("lead",)),  # right
    ]
    warnings = unknown_drain_warnings(drains, HELD)
    assert [(w.seat_id, w.mailbox_id, w.board) for w in warnings] == [
        ("eng.lead", "eng.incident", "followups"),
        ("eng.analyst", "eng.incidents", "followup"),
    ]
    assert warnings[0].message == (
        "seat eng.lead drains board eng.incident.followups, which no mailbox holds: no mailbox eng.incident holds a "
        'board "followups". It drains a second, empty ledger; fix the mailbox id or board name it names.'
    )
    assert 'mailbox eng.incidents holds escalations, followups, not "followup"' in warnings[1].message
    assert all(w.code == "unknown-board-drain" for w in warnings)


def test_the_drain_registry_gives_a_board_s_worker_keys():
    set_board_drains([BoardDrain("eng.analyst", FOLLOWUPS, ("analyst",)), BoardDrain("eng.lead", FOLLOWUPS, ("lead", "analyst"))])
    assert board_worker_keys(FOLLOWUPS) == {"analyst", "lead"}
    assert board_worker_keys("eng.incidents.escalations") is None


@pytest.mark.django_db
def test_the_board_endpoint_pages_and_filters(file_row, other_org):
    rows = [file_row(goal=f"g{i}", assignee="analyst" if i % 2 else None) for i in range(5)]
    force_status(rows[1], "in_progress")
    file_row(goal="theirs", in_org=other_org)
    client = APIClient()
    url = f"/api/boards/{FOLLOWUPS}/tasks"
    page = client.get(url, {"limit": 2}).json()
    assert page["boardId"] == FOLLOWUPS
    assert [t["id"] for t in page["tasks"]] == [rows[0].task_id, rows[1].task_id]
    assert page["next"] == rows[1].task_id and tuple(page["tasks"][0]) == SAFE_FIELDS
    rest = client.get(url, {"limit": 10, "after": page["next"]}).json()
    assert [t["id"] for t in rest["tasks"]] == [r.task_id for r in rows[2:]] and rest["next"] is None
    assigned = client.get(url, {"assignee": "analyst"}).json()["tasks"]
    assert [t["id"] for t in assigned] == [rows[1].task_id, rows[3].task_id]
    running = client.get(url, {"status": "in_progress"}).json()["tasks"]
    assert [t["id"] for t in running] == [rows[1].task_id]
    bad = client.get(url, {"status": "done"})
    assert bad.status_code == 400 and bad.json()["error"]["reason"] == "invalid-input"
    assert client.get("/api/boards/eng.nowhere.board/tasks").json()["tasks"] == []
    for cursor in ("zzz", "-1", "task_not_here"):
        refused = client.get(url, {"after": cursor})
        assert refused.status_code == 400 and refused.json()["error"]["reason"] == "invalid-input"
    theirs = client.get(url, {"after": file_row(goal="theirs too", in_org=other_org).task_id})
    assert theirs.status_code == 400  # another organization's row is no cursor here


@pytest.mark.django_db
def test_the_admin_shows_rows_read_only(admin_client, file_row):
    task = file_row()
    listing = admin_client.get("/admin/boards/boardtask/?mailbox=eng.incidents&status=pending")
    assert listing.status_code == 200 and task.task_id in listing.content.decode()
    other = admin_client.get("/admin/boards/boardtask/?mailbox=eng.standup")
    assert task.task_id not in other.content.decode()
    detail = admin_client.get(f"/admin/boards/boardtask/{task.pk}/change/")
    assert detail.status_code == 200
    assert admin_client.get("/admin/boards/boardtask/add/").status_code == 403
