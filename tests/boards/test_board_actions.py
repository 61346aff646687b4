"""boardActions: true (spec "Working the rows"): the eight task tools as
actions on the opted-in mailbox's own session, and nowhere else."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from boards.models import BoardTask, TaskChange
from boards.tools import TOOL_NAMES
from workforce.flows import registry

from ..conftest import MEMBER
from .conftest import BOARD_TREE, HELP_ESCALATIONS, force_status

pytestmark = pytest.mark.django_db

SX = "support_help_escalations"


def _file(act, goal="Refund the order."):
    req = act("support.help", "fileTask", {"board": "escalations", "goal": goal})
    assert req.status == "completed", req.error
    return req.output["taskId"]


def test_the_eight_actions_exist_for_an_opted_in_board_only(boards_open):
    kind = registry.require("mailbox")
    for tool in TOOL_NAMES:
        assert kind.find(f"{tool}_{SX}", internal=False) is not None
        # eng.incidents holds boards but did not opt in
        assert kind.find(f"{tool}_eng_incidents_followups", internal=False) is None
    assert kind.find(f"deleteTask_{SX}", internal=False) is None
    assert kind.find("cancelTask_", internal=False) is None


def test_actions_work_on_the_mailbox_s_own_session(boards_open, act):
    task_id = _file(act)
    req = act("support.help", f"assignTask_{SX}", {"taskId": task_id, "assignee": "devices"})
    assert req.status == "completed", req.error
    assert req.output["ok"] is True and req.output["task"]["assignee"] == "devices"
    listed = act("support.help", f"listTasks_{SX}", {})
    assert [t["id"] for t in listed.output["tasks"]] == [task_id]
    added = act("support.help", f"addTask_{SX}", {"goal": "Follow up."})
    assert added.output["ok"] is True and added.output["status"] == "pending"
    row = BoardTask.objects.get(task_id=added.output["taskId"])
    assert row.board_id == HELP_ESCALATIONS and row.author is None  # a caller is no seat: no author claim
    assert TaskChange.objects.get(task=row, kind="added").actor == MEMBER
    cancelled = act("support.help", f"cancelTask_{SX}", {"taskId": task_id, "reason": "dup"})
    assert cancelled.output["task"]["status"] == "cancelled"


def test_another_mailbox_s_session_gets_board_not_declared_and_the_row_is_untouched(boards_open, act):
    task_id = _file(act)
    before = BoardTask.objects.get(task_id=task_id)
    for session_id in ("eng.incidents", "eng.standup"):
        req = act(session_id, f"cancelTask_{SX}", {"taskId": task_id})
        assert req.status == "failed"
        assert req.error["reason"] == "board-not-declared"
        assert f"cancelTask_{SX} works only on support.help's own session" in req.error["message"]
    assert "it holds escalations, followups" in act("eng.incidents", f"listTasks_{SX}", {}).error["message"]
    after = BoardTask.objects.get(task_id=task_id)
    assert (after.status, after.updated_at) == (before.status, before.updated_at)
    assert TaskChange.objects.filter(task=after).count() == 1


def test_a_tool_refusal_fails_the_request_with_the_tool_s_code(boards_open, act):
    task_id = _file(act)
    missing = act("support.help", f"completeTask_{SX}", {"taskId": "task_nope"})
    assert (missing.status, missing.error["reason"]) == ("failed", "task_not_found")
    illegal = act("support.help", f"completeTask_{SX}", {"taskId": task_id})
    assert illegal.error["reason"] == "illegal_status_transition"
    assert illegal.error["message"].startswith(
        f"illegal_status_transition: completeTask_{SX} can't move {task_id}: it is pending"
    )
    force_status(BoardTask.objects.get(task_id=task_id), "completed")
    terminal = act("support.help", f"cancelTask_{SX}", {"taskId": task_id})
    assert terminal.error["reason"] == "task_terminal"


def test_bad_arguments_are_invalid_input(boards_open, act):
    req = act("support.help", f"assignTask_{SX}", {"taskId": "task_x", "assignee": "a", "author": "me"})
    assert (req.status, req.error["reason"]) == ("failed", "invalid-input")
    assert "does not take author" in req.error["message"]
    assert act("support.help", f"failTask_{SX}", {"taskId": "task_x"}).error["message"].endswith("error is required.")


def test_unknown_assignee_with_hired_drains(boards_open, act):
    from boards.drains import BoardDrain, set_board_drains

    set_board_drains([BoardDrain("support.devices", HELP_ESCALATIONS, ("devices",))])
    task_id = _file(act)
    req = act("support.help", f"assignTask_{SX}", {"taskId": task_id, "assignee": "accounts"})
    assert req.error["reason"] == "unknown_assignee"
    assert req.error["message"] == (
        f'unknown_assignee: "accounts" is not a worker of board {HELP_ESCALATIONS}; its workers are devices.'
    )
    assert BoardTask.objects.get(task_id=task_id).assignee is None


def test_http_status_of_board_action_refusals(boards_open, act):
    client = APIClient()
    url = f"/api/flows/mailbox/support.help/actions/completeTask_{SX}"
    assert client.post(url, {"userId": MEMBER, "input": {"taskId": "task_nope"}}, format="json").status_code == 404
    task_id = _file(act)
    assert client.post(url, {"userId": MEMBER, "input": {"taskId": task_id}}, format="json").status_code == 409
    other = "/api/flows/mailbox/eng.incidents/actions/completeTask_" + SX
    assert client.post(other, {"userId": MEMBER, "input": {"taskId": task_id}}, format="json").status_code == 404
    not_opted = "/api/flows/mailbox/eng.incidents/actions/completeTask_eng_incidents_followups"
    resp = client.post(not_opted, {"userId": MEMBER, "input": {"taskId": task_id}}, format="json")
    assert resp.status_code == 404 and resp.json()["error"]["reason"] == "action-not-found"


def test_board_actions_are_off_by_default(open_tree, act):
    tree = dict(BOARD_TREE)
    tree["teams/support/mailboxes/help/MAILBOX.md"] = tree["teams/support/mailboxes/help/MAILBOX.md"].replace(
        "boardActions: true\n", ""
    )
    open_tree(tree)
    from workforce.refusals import Refusal

    with pytest.raises(Refusal) as refused:
        act("support.help", f"listTasks_{SX}", {})
    assert refused.value.reason == "action-not-found"
