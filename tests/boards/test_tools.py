"""The eight task tools per board (spec "Working the rows"): names,
schemas, results and error codes; they never raise."""

from __future__ import annotations

import pytest

from boards.drains import BoardDrain, set_board_drains
from boards.models import BoardTask, TaskChange, TaskDep
from boards.tools import TOOL_NAMES, board_task_tools, call_board_tool
from workforce.tools import ToolContext, refusal_code

from .conftest import ESCALATIONS, FOLLOWUPS, force_status

pytestmark = pytest.mark.django_db

SX = "eng_incidents_followups"


def tools(board_id=FOLLOWUPS, **kw):
    return {t.name: t for t in board_task_tools(board_id, **kw)}


def test_eight_tools_named_for_their_board():
    names = [t.name for t in board_task_tools("engineering.incidents.followups")]
    assert names == [
        "addTask_engineering_incidents_followups",
        "assignTask_engineering_incidents_followups",
        "updateTask_engineering_incidents_followups",
        "listTasks_engineering_incidents_followups",
        "completeTask_engineering_incidents_followups",
        "failTask_engineering_incidents_followups",
        "blockTask_engineering_incidents_followups",
        "cancelTask_engineering_incidents_followups",
    ]
    assert TOOL_NAMES == (
        "addTask",
        "assignTask",
        "updateTask",
        "listTasks",
        "completeTask",
        "failTask",
        "blockTask",
        "cancelTask",
    )


def test_two_boards_give_sixteen_distinct_tools():
    both = board_task_tools(FOLLOWUPS) + board_task_tools(ESCALATIONS)
    assert len({t.name for t in both}) == 16


def test_schemas_are_closed_objects():
    for tool in board_task_tools(FOLLOWUPS):
        params = tool.parameters
        assert params["type"] == "object" and params["additionalProperties"] is False
        assert tool.openai_schema()["function"]["name"] == tool.name
        assert FOLLOWUPS in tool.description
    t = tools()
    assert t[f"addTask_{SX}"].parameters["required"] == ["goal"]
    assert t[f"assignTask_{SX}"].parameters["required"] == ["taskId", "assignee"]
    assert t[f"failTask_{SX}"].parameters["required"] == ["taskId", "error"]


def test_add_list_assign_update(seat_ctx):
    t = tools()
    added = t[f"addTask_{SX}"].call(seat_ctx, {"goal": "Rotate keys.", "labels": ["sec"], "priority": 2})
    assert added["ok"] is True and added["status"] == "pending"
    task_id = added["taskId"]
    row = BoardTask.objects.get(task_id=task_id)
    assert row.metadata == {"author": "eng.analyst", "authorVerified": False}
    listed = t[f"listTasks_{SX}"].call(seat_ctx, {})
    assert listed["ok"] is True and [r["id"] for r in listed["tasks"]] == [task_id] and listed["more"] is False
    assert t[f"listTasks_{SX}"].call(seat_ctx, {"label": "nope"})["tasks"] == []
    assert t[f"listTasks_{SX}"].call(seat_ctx, {"status": "pending", "label": "sec"})["tasks"][0]["id"] == task_id
    assigned = t[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task_id, "assignee": "analyst"})
    assert assigned["task"]["assignee"] == "analyst"
    change = TaskChange.objects.filter(task=row).order_by("-id").first()
    assert (change.kind, change.data, change.actor) == ("assignee_changed", {"from": None, "to": "analyst"}, "eng.analyst")
    unassigned = t[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task_id, "assignee": None})
    assert unassigned["task"]["assignee"] is None
    updated = t[f"updateTask_{SX}"].call(
        seat_ctx, {"taskId": task_id, "title": "Keys", "maxAttempts": 5, "context": "all of them"}
    )
    assert updated["ok"] is True
    assert (updated["task"]["title"], updated["task"]["maxAttempts"], updated["task"]["context"]) == ("Keys", 5, "all of them")
    assert TaskChange.objects.filter(task=row).order_by("-id").first().data == {"fields": ["context", "max_attempts", "title"]}


def test_settling_through_tools(seat_ctx):
    t = tools()
    a = force_status(BoardTask.objects.get(task_id=t[f"addTask_{SX}"].call(seat_ctx, {"goal": "a"})["taskId"]), "in_progress")
    done = t[f"completeTask_{SX}"].call(seat_ctx, {"taskId": a.task_id, "output": {"pr": 12}})
    assert done["task"]["status"] == "completed" and BoardTask.objects.get(pk=a.pk).output == {"pr": 12}
    b = force_status(BoardTask.objects.get(task_id=t[f"addTask_{SX}"].call(seat_ctx, {"goal": "b"})["taskId"]), "in_progress")
    failed = t[f"failTask_{SX}"].call(seat_ctx, {"taskId": b.task_id, "error": "flaky"})
    assert (failed["task"]["status"], failed["task"]["error"]) == ("pending", "flaky")
    blocked = t[f"blockTask_{SX}"].call(seat_ctx, {"taskId": b.task_id, "reason": "legal"})
    assert blocked["task"]["status"] == "blocked"
    unblocked = t[f"blockTask_{SX}"].call(seat_ctx, {"taskId": b.task_id, "unblock": True})
    assert unblocked["task"]["status"] == "pending"
    cancelled = t[f"cancelTask_{SX}"].call(seat_ctx, {"taskId": b.task_id})
    assert cancelled["task"]["status"] == "cancelled"
    kinds = list(TaskChange.objects.filter(task=b).order_by("id").values_list("kind", flat=True))
    assert kinds == ["added", "retried", "blocked", "unblocked", "cancelled"]


@pytest.mark.parametrize("tool", [n for n in TOOL_NAMES if n not in ("addTask", "listTasks")])
def test_task_not_found(seat_ctx, file_row, other_org, tool):
    other_board = file_row(ESCALATIONS)
    other_tenant = file_row(FOLLOWUPS, in_org=other_org)
    args = {"assignTask": {"assignee": "x"}, "failTask": {"error": "e"}, "updateTask": {"title": "t"}}.get(tool, {})
    for task_id in ("task_nope", other_board.task_id, other_tenant.task_id):
        result = tools()[f"{tool}_{SX}"].call(seat_ctx, {"taskId": task_id, **args})
        assert result == {"refused": f"task_not_found: No task {task_id!r} on board {FOLLOWUPS}."}


def test_unknown_assignee_from_hired_drains_or_a_given_workers_map(seat_ctx, file_row):
    task = file_row()
    set_board_drains([BoardDrain("eng.analyst", FOLLOWUPS, ("analyst",)), BoardDrain("eng.lead", FOLLOWUPS, ("lead",))])
    result = tools()[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "assignee": "intern"})
    assert result == {
        "refused": f'unknown_assignee: "intern" is not a worker of board {FOLLOWUPS}; its workers are analyst, lead.'
    }
    assert tools()[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "assignee": "lead"})["ok"] is True
    added = tools()[f"addTask_{SX}"].call(seat_ctx, {"goal": "g", "assignee": "intern"})
    assert refusal_code(added) == "unknown_assignee"
    explicit = tools(workers=["intern"])[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "assignee": "intern"})
    assert explicit["ok"] is True


def test_any_assignee_when_no_drain_declares_the_board(seat_ctx, file_row):
    task = file_row()
    assert tools()[f"assignTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "assignee": "anyone"})["ok"] is True


def test_illegal_transition_and_terminal_results(seat_ctx, file_row):
    task = file_row()
    result = tools()[f"completeTask_{SX}"].call(seat_ctx, {"taskId": task.task_id})
    assert refusal_code(result) == "illegal_status_transition"
    assert result["refused"] == (
        f"illegal_status_transition: completeTask_{SX} can't move {task.task_id}: it is pending, and from pending the calls are "
        f"blockTask_{SX}, cancelTask_{SX}, or a drain claiming it."
    )
    result = tools()[f"blockTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "unblock": True})
    assert refusal_code(result) == "illegal_status_transition" and "it is pending, not blocked" in result["refused"]
    force_status(task, "cancelled")
    for tool, extra in (
        ("assignTask", {"assignee": "a"}),
        ("updateTask", {"title": "t"}),
        ("cancelTask", {}),
        ("completeTask", {}),
        ("failTask", {"error": "e"}),
        ("blockTask", {}),
    ):
        result = tools()[f"{tool}_{SX}"].call(seat_ctx, {"taskId": task.task_id, **extra})
        assert result == {"refused": f"task_terminal: {task.task_id} is cancelled, a terminal status: no call changes it."}


@pytest.mark.parametrize(
    "tool,args,fragment",
    [
        ("addTask", {}, "goal is required"),
        ("addTask", {"goal": "  "}, "goal must be non-empty text"),
        ("addTask", {"goal": "g", "author": "eng.lead"}, "does not take author"),
        ("addTask", {"goal": "g", "priority": "high"}, "priority must be a whole number"),
        ("addTask", {"goal": "g", "maxAttempts": 0}, "maxAttempts must be at least 1"),
        ("addTask", {"goal": "g", "labels": "x"}, "labels must be a list"),
        ("assignTask", {"taskId": "task_x"}, "assignee is required"),
        ("listTasks", {"status": "done"}, "status must be one of"),
        ("listTasks", {"limit": 1000}, "limit must be at most 200"),
        ("blockTask", {"taskId": "task_x", "unblock": "yes"}, "unblock must be true or false"),
        ("updateTask", {"taskId": 7}, "taskId must be non-empty text"),
        ("addTask", ["goal"], "takes a JSON object"),
    ],
)
def test_bad_arguments_answer_invalid_arguments(seat_ctx, tool, args, fragment):
    result = tools()[f"{tool}_{SX}"].call(seat_ctx, args)
    assert refusal_code(result) == "invalid_arguments"
    assert fragment in result["refused"]
    assert BoardTask.objects.count() == 0


def test_update_with_nothing_and_below_used_attempts(seat_ctx, file_row):
    task = force_status(file_row(), "in_progress", attempts=2)
    nothing = tools()[f"updateTask_{SX}"].call(seat_ctx, {"taskId": task.task_id})
    assert refusal_code(nothing) == "invalid_arguments" and "nothing to update" in nothing["refused"]
    below = tools()[f"updateTask_{SX}"].call(seat_ctx, {"taskId": task.task_id, "maxAttempts": 1})
    assert refusal_code(below) == "invalid_arguments" and "2 attempt(s)" in below["refused"]


def test_deps_on_add_and_update(seat_ctx, file_row):
    a, b = file_row(goal="a"), file_row(goal="b")
    added = tools()[f"addTask_{SX}"].call(seat_ctx, {"goal": "c", "deps": [a.task_id, b.task_id]})
    c = BoardTask.objects.get(task_id=added["taskId"])
    assert c.deps == [a.task_id, b.task_id]
    assert set(TaskDep.objects.filter(task=c).values_list("depends_on__task_id", flat=True)) == {a.task_id, b.task_id}
    missing = tools()[f"addTask_{SX}"].call(seat_ctx, {"goal": "d", "deps": ["task_nope"]})
    assert refusal_code(missing) == "task_not_found"
    cycle = tools()[f"updateTask_{SX}"].call(seat_ctx, {"taskId": a.task_id, "deps": [c.task_id]})
    assert refusal_code(cycle) == "invalid_arguments" and "cycle" in cycle["refused"]
    itself = tools()[f"updateTask_{SX}"].call(seat_ctx, {"taskId": a.task_id, "deps": [a.task_id]})
    assert refusal_code(itself) == "invalid_arguments"
    redo = tools()[f"updateTask_{SX}"].call(seat_ctx, {"taskId": c.task_id, "deps": [b.task_id]})
    assert redo["task"]["deps"] == [b.task_id]
    assert list(TaskDep.objects.filter(task=c).values_list("depends_on__task_id", flat=True)) == [b.task_id]


def test_list_limit_and_more(seat_ctx, file_row):
    for i in range(3):
        file_row(goal=f"g{i}")
    listed = tools()[f"listTasks_{SX}"].call(seat_ctx, {"limit": 2})
    assert len(listed["tasks"]) == 2 and listed["more"] is True


def test_a_tool_never_raises(seat_ctx, monkeypatch):
    import boards.services

    def explode(*a, **k):
        raise RuntimeError("database gone")

    monkeypatch.setattr(boards.services, "do_file_task", explode)
    result = call_board_tool("addTask", FOLLOWUPS, seat_ctx, {"goal": "g"})
    assert result == {"refused": "internal_error: RuntimeError: database gone"}
    assert refusal_code(call_board_tool("addTask", FOLLOWUPS, seat_ctx, None)) == "invalid_arguments"


def test_tools_in_another_organization_reach_that_ledger(file_row, other_org):
    theirs = file_row(FOLLOWUPS, in_org=other_org)
    ctx = ToolContext(org=other_org, seat_id="eng.analyst")
    assert [r["id"] for r in tools()[f"listTasks_{SX}"].call(ctx, {})["tasks"]] == [theirs.task_id]
