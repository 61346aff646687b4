"""fileTask, readBoard and read's boards key (spec "Filing and reading rows", "Holding a
board")."""

from __future__ import annotations

import re

import pytest
from rest_framework.test import APIClient

from boards.models import BoardTask, TaskChange
from boards.queries import SAFE_FIELDS
from workforce.models import Item, Request

from ..conftest import MEMBER, mailbox_md
from .conftest import BOARD_TREE, ESCALATIONS, FOLLOWUPS, INCIDENTS

pytestmark = pytest.mark.django_db


def test_file_task_says_where_the_row_landed(boards_open, act):
    req = act(INCIDENTS, "fileTask", {"board": "followups", "goal": "Rotate the leaked key.", "assignee": "analyst"})
    assert req.status == "completed", req.error
    out = req.output
    assert set(out) == {"board", "boardId", "taskId", "status"}
    assert out["board"] == "followups"
    assert out["boardId"] == "eng.incidents.followups"
    assert out["status"] == "pending"
    assert re.fullmatch(r"task_[0-9a-z]+_\d+_[0-9a-f]{6}", out["taskId"])
    row = BoardTask.objects.get(task_id=out["taskId"])
    assert (row.board_id, row.goal, row.assignee, row.organization_id) == (
        FOLLOWUPS,
        "Rotate the leaked key.",
        "analyst",
        "default",
    )
    assert row.metadata == {"authorVerified": False}
    assert TaskChange.objects.get(task=row).kind == "added"


def test_file_task_takes_every_optional_field_and_keeps_the_author_unverified(boards_open, act):
    req = act(
        INCIDENTS,
        "fileTask",
        {
            "board": "escalations",
            "goal": "Call the vendor.",
            "title": "Vendor",
            "context": "They owe us a patch.",
            "assignee": "lead",
            "priority": 5,
            "maxAttempts": 2,
            "labels": ["vendor", "p1"],
            "input": {"ticket": 7},
            "author": "eng.analyst",
        },
    )
    assert req.status == "completed", req.error
    row = BoardTask.objects.get(task_id=req.output["taskId"])
    assert row.board_id == ESCALATIONS
    assert (row.title, row.context, row.priority, row.max_attempts, row.labels, row.input) == (
        "Vendor",
        "They owe us a patch.",
        5,
        2,
        ["vendor", "p1"],
        {"ticket": 7},
    )
    assert row.metadata == {"author": "eng.analyst", "authorVerified": False}


def test_file_task_leaves_a_board_task_item_for_a_live_list(boards_open, act):
    req = act(INCIDENTS, "fileTask", {"board": "followups", "goal": "g"})
    item = Item.objects.get(request=req)
    assert item.component == "board-task"
    assert item.data["boardId"] == FOLLOWUPS
    assert item.data["task"]["id"] == req.output["taskId"]
    assert set(item.data["task"]) == set(SAFE_FIELDS)


def test_read_board_gives_every_row_with_the_browser_safe_fields(boards_open, act):
    ids = [
        act(INCIDENTS, "fileTask", {"board": "followups", "goal": f"g{i}", "context": "secret", "input": {"k": 1}}).output[
            "taskId"
        ]
        for i in range(3)
    ]
    act(INCIDENTS, "fileTask", {"board": "escalations", "goal": "other board"})
    req = act(INCIDENTS, "readBoard", {"board": "followups"})
    assert req.status == "completed", req.error
    out = req.output
    assert (out["board"], out["boardId"]) == ("followups", FOLLOWUPS)
    assert [t["id"] for t in out["tasks"]] == ids
    for row in out["tasks"]:
        assert tuple(row) == SAFE_FIELDS
        assert row["status"] == "pending" and row["attempts"] == 0 and row["maxAttempts"] == 3
        assert isinstance(row["createdAt"], int) and row["startedAt"] is None and row["completedAt"] is None
    assert SAFE_FIELDS == (
        "id",
        "title",
        "goal",
        "status",
        "assignee",
        "run",
        "priority",
        "attempts",
        "maxAttempts",
        "deps",
        "labels",
        "error",
        "createdAt",
        "updatedAt",
        "startedAt",
        "completedAt",
    )


def test_read_lists_held_boards_sorted_and_no_boards_key_without_one(boards_open, act):
    assert act(INCIDENTS, "read").output["boards"] == ["escalations", "followups"]
    assert "boards" not in act("eng.standup", "read").output


def _refused(req, reason):
    assert req.status == "failed"
    assert req.error["reason"] == reason
    return req.error["message"]


@pytest.mark.parametrize("action", ["fileTask", "readBoard"])
def test_a_board_the_mailbox_does_not_hold_is_refused_listing_what_it_holds(boards_open, act, action):
    payload = {"board": "postmortems", **({"goal": "g"} if action == "fileTask" else {})}
    message = _refused(act(INCIDENTS, action, payload), "board-not-declared")
    assert message == (
        'board-not-declared: eng.incidents does not hold a board "postmortems"; it holds escalations, followups. '
        "A mailbox reaches its own boards and no others."
    )
    assert BoardTask.objects.count() == 0


@pytest.mark.parametrize("board", ["escalations", "eng.incidents.followups", "followups"])
def test_another_mailbox_s_board_is_refused_the_same_way(boards_open, act, board):
    """support.help holds escalations only: incidents' followups, by name or ledger id, is
    not its board; and its own escalations is a different ledger from incidents'."""
    req = act("support.help", "fileTask", {"board": board, "goal": "g"})
    if board == "escalations":
        assert req.status == "completed"
        assert req.output["boardId"] == "support.help.escalations"
        assert not BoardTask.objects.filter(board_id=ESCALATIONS).exists()
        return
    message = _refused(req, "board-not-declared")
    assert "it holds escalations." in message
    assert BoardTask.objects.count() == 0


@pytest.mark.parametrize("action", ["fileTask", "readBoard"])
def test_a_mailbox_holding_no_board_answers_neither_action(boards_open, act, action):
    message = _refused(
        act("eng.standup", action, {"board": "followups", **({"goal": "g"} if action == "fileTask" else {})}),
        "board-not-declared",
    )
    assert message == "board-not-declared: eng.standup holds no board, so it answers neither fileTask nor readBoard."


def test_author_not_a_member_is_refused_and_nothing_is_written(boards_open, act):
    items_before = Item.objects.count()
    message = _refused(
        act(INCIDENTS, "fileTask", {"board": "followups", "goal": "g", "author": "support.devices"}), "author-not-a-member"
    )
    assert (
        message
        == 'author-not-a-member: "support.devices" is not a member of eng.incidents; its members are eng.lead, eng.analyst.'
    )
    assert BoardTask.objects.count() == 0 and TaskChange.objects.count() == 0
    assert Item.objects.count() == items_before
    assert Request.objects.filter(action="fileTask", status="failed").count() == 1


@pytest.mark.parametrize(
    "payload,fragment",
    [
        ({"board": "followups"}, "goal"),
        ({"board": "followups", "goal": ""}, "goal"),
        ({"board": "followups", "goal": 42}, "goal"),
        ({"board": "followups", "goal": "g", "priority": "5"}, "priority"),
        ({"board": "followups", "goal": "g", "priority": True}, "priority"),
        ({"board": "followups", "goal": "g", "maxAttempts": 0}, "maxAttempts"),
        ({"board": "followups", "goal": "g", "labels": [1]}, "labels"),
        ({"board": "followups", "goal": "g", "labels": "p1"}, "labels"),
        ({"board": "followups", "goal": "g", "deps": []}, "deps"),
        ({"board": "followups", "goal": "g", "status": "completed"}, "status"),
        ({"board": 3, "goal": "g"}, "board"),
    ],
)
def test_file_task_input_is_strict(boards_open, act, payload, fragment):
    message = _refused(act(INCIDENTS, "fileTask", payload), "invalid-input")
    assert fragment in message
    assert BoardTask.objects.count() == 0


def test_read_board_takes_only_board(boards_open, act):
    assert "status" in _refused(act(INCIDENTS, "readBoard", {"board": "followups", "status": "pending"}), "invalid-input")


def test_an_unopened_id_is_not_bound(boards_open, act):
    _refused(act("eng.nowhere", "fileTask", {"board": "followups", "goal": "g"}), "mailbox-not-bound")
    assert BoardTask.objects.count() == 0


def test_rows_are_organization_scoped(boards_open, open_tree, act, other_org):
    open_tree(BOARD_TREE, in_org=other_org)
    act(INCIDENTS, "fileTask", {"board": "followups", "goal": "ours"})
    act(INCIDENTS, "fileTask", {"board": "followups", "goal": "theirs"}, in_org=other_org)
    ours = act(INCIDENTS, "readBoard", {"board": "followups"}).output["tasks"]
    theirs = act(INCIDENTS, "readBoard", {"board": "followups"}, in_org=other_org).output["tasks"]
    assert [t["goal"] for t in ours] == ["ours"]
    assert [t["goal"] for t in theirs] == ["theirs"]


def test_the_board_list_is_re_derived_from_the_files_on_every_start(open_tree, act):
    tree = dict(BOARD_TREE)
    open_tree(tree)
    assert act(INCIDENTS, "read").output["boards"] == ["escalations", "followups"]
    tree["teams/eng/mailboxes/incidents/MAILBOX.md"] = mailbox_md("Incidents.", boards="[followups]")
    open_tree(tree)  # the next start: the mailbox is already open, its boards come from the file
    assert act(INCIDENTS, "read").output["boards"] == ["followups"]
    assert _refused(act(INCIDENTS, "readBoard", {"board": "escalations"}), "board-not-declared")


def test_http_status_codes(boards_open):
    client = APIClient()
    url = "/api/flows/mailbox/{}/actions/fileTask"
    ok = client.post(url.format(INCIDENTS), {"userId": MEMBER, "input": {"board": "followups", "goal": "g"}}, format="json")
    assert ok.status_code == 202 and ok.json()["output"]["boardId"] == FOLLOWUPS
    nope = client.post(url.format(INCIDENTS), {"userId": MEMBER, "input": {"board": "nope", "goal": "g"}}, format="json")
    assert nope.status_code == 404 and nope.json()["error"]["reason"] == "board-not-declared"
    author = client.post(
        url.format(INCIDENTS), {"userId": MEMBER, "input": {"board": "followups", "goal": "g", "author": "x.y"}}, format="json"
    )
    assert author.status_code == 403 and author.json()["error"]["reason"] == "author-not-a-member"


def test_the_on_task_filed_facet_hears_each_filing_and_not_refusals(boards_open, act):
    from workforce.flows import registry

    heard = []
    kind = registry.require("mailbox")
    kind.facets["on_task_filed"] = lambda ctx, board_id, task: heard.append((ctx.session.session_id, board_id, task.task_id))
    try:
        req = act(INCIDENTS, "fileTask", {"board": "followups", "goal": "g"})
        act(INCIDENTS, "fileTask", {"board": "followups", "goal": "g", "author": "x.y"})
    finally:
        kind.facets.pop("on_task_filed")
    assert heard == [(INCIDENTS, FOLLOWUPS, req.output["taskId"])]
