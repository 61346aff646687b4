"""fileTask refuses at the edge what the ledger can't keep or no worker would run:
an over-long assignee or author is ``invalid-input`` (a clean 400 on PostgreSQL, where
the column would raise), an assignee that no drain of the board declares is
``unknown-assignee`` naming the board's worker keys."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from boards.drains import BoardDrain, set_board_drains
from boards.models import BoardTask

from .conftest import FOLLOWUPS, INCIDENTS


def file_task(client, **input):
    input.setdefault("board", "followups")
    input.setdefault("goal", "Write the postmortem.")
    return client.post(f"/api/flows/mailbox/{INCIDENTS}/actions/fileTask", {"userId": "u_42", "input": input}, format="json")


@pytest.mark.parametrize("field", ["assignee", "author"])
def test_an_assignee_or_author_over_200_characters_is_invalid_input(boards_open, field):
    response = file_task(APIClient(), **{field: "a" * 201})
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["reason"] == "invalid-input"
    assert error["message"] == f"invalid-input: {field}: Ensure this field has no more than 200 characters."
    assert "DataError" not in response.content.decode()
    assert not BoardTask.objects.exists()


def test_an_assignee_no_drain_of_the_board_declares_is_unknown_assignee(boards_open):
    set_board_drains([BoardDrain("eng.analyst", FOLLOWUPS, ("analyst",)), BoardDrain("eng.lead", FOLLOWUPS, ("lead",))])
    response = file_task(APIClient(), assignee="accounts")
    assert response.status_code == 409, response.content
    assert response.json()["error"] == {
        "reason": "unknown-assignee",
        "message": f'unknown-assignee: "accounts" is not a worker of board {FOLLOWUPS}; its workers are analyst, lead.',
    }
    assert not BoardTask.objects.exists()
    accepted = file_task(APIClient(), assignee="lead")
    assert accepted.status_code == 202, accepted.content
    assert BoardTask.objects.get().assignee == "lead"


def test_with_no_drain_declared_any_assignee_is_accepted(boards_open):
    """A board only people read has no workers map to check against (as the task tools)."""
    response = file_task(APIClient(), assignee="someone")
    assert response.status_code == 202, response.content
    assert BoardTask.objects.get().assignee == "someone"


def test_the_task_tools_answer_an_over_long_assignee_or_title_as_invalid_arguments(boards_open, seat_ctx, file_row):
    """Tools never raise: a value longer than its column is the tool's error result."""
    from boards.tools import call_board_tool

    row = file_row()
    long = "a" * 201
    assert call_board_tool("addTask", FOLLOWUPS, seat_ctx, {"goal": "x", "assignee": long}) == {
        "refused": "invalid_arguments: assignee must be at most 200 characters."
    }
    assert call_board_tool("assignTask", FOLLOWUPS, seat_ctx, {"taskId": row.task_id, "assignee": long}) == {
        "refused": "invalid_arguments: assignee must be at most 200 characters."
    }
    assert call_board_tool("updateTask", FOLLOWUPS, seat_ctx, {"taskId": row.task_id, "title": "t" * 501}) == {
        "refused": "invalid_arguments: title must be at most 500 characters."
    }
    assert BoardTask.objects.count() == 1
    row.refresh_from_db()
    assert row.assignee is None and row.title is None


def test_a_board_action_with_an_over_long_assignee_is_invalid_input(boards_open, file_row):
    from .conftest import HELP_ESCALATIONS

    row = file_row(HELP_ESCALATIONS)
    response = APIClient().post(
        "/api/flows/mailbox/support.help/actions/assignTask_support_help_escalations",
        {"userId": "u_42", "input": {"taskId": row.task_id, "assignee": "a" * 201}},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert response.json()["error"] == {
        "reason": "invalid-input",
        "message": "invalid-input: assignee must be at most 200 characters.",
    }
