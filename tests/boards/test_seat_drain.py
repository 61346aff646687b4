"""Boards drained by seats (spec "Working the rows"):
the WORKER.md ``drains:``/``boardTools:`` keys, the hire-time board warnings, the board
task tools as a seat's capability, and rows drained by seats on the (sync) cluster."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.utils import timezone

from boards.drains import BoardDrain, current_board_drains, set_board_drains
from boards.models import BoardTask, TaskChange
from boards.services import do_claim_task, do_file_task
from boards.tools import TOOL_NAMES
from seats.agent import agent_tools
from seats.boards import board_id_problem, seat_boards
from seats.drains import (
    SEAT_DRAIN_TASK,
    TurnFailed,
    board_run_id,
    board_warnings,
    configure_board_drains,
    do_seat_drain,
    do_sweep_board_drains,
    row_turn_text,
    run_board_row,
)
from seats.hiring import HireRefused, hire_workforce
from seats.models import Seat, TurnSlot, TurnWait
from seats.turns import Wake, free_turn_slot, take_turn_slot
from seats.workers import WORKER_KEYS, WORKER_LOAD_FAILED, read_workforce
from workforce.flows import FlowKind, registry
from workforce.llm import set_model_resolver
from workforce.models import Item, Request, Session
from workforce.sessions import do_run_action
from workforce.testing import create_mock_model_resolver
from workforce.tools import ToolContext

from ..conftest import MEMBER, OWNER, hire_tree, mailbox_md, open_mailboxes, run_in_threads, wired_by_hand
from ..turn_log import TURN_LOG, ScriptedTurn, turn_log

FOLLOWUPS = "eng.incidents.followups"
ESCALATIONS = "eng.incidents.escalations"
LEAD_RUN = "eng.incidents.followups:eng.lead"


def worker_md(description: str = "A worker.", *, body: str = "You help.", **keys) -> str:
    lines = ["---", f"description: {description}", "model: embedded/echo"]
    lines += [f"{key}: {value}" for key, value in keys.items()]
    lines += ["---", "", body, ""]
    return "\n".join(lines)


def tree(**workers: str) -> dict[str, str]:
    """eng.incidents holds followups and escalations; eng.standup holds none; plus the
    workers given as ``name=WORKER.md text`` (team eng)."""
    files = {
        "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.lead", "eng.analyst")),
        "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
            "Where the engineering team works incidents.",
            members=("eng.lead", "eng.analyst"),
            boards="[followups, escalations]",
        ),
    }
    files.update({f"teams/eng/workers/{name}/WORKER.md": text for name, text in workers.items()})
    return files


@pytest.fixture(autouse=True)
def drain_runtime():
    """Put back what hiring wires into this process: the mailbox kind's facets, the
    board drains, the model resolver, and whether the process counts as booted."""
    with wired_by_hand("mailbox"):
        yield
    set_board_drains(())


@pytest.fixture
def hired(make_tree, org):
    """``hired(files) -> (seats, warnings)``: write the tree, open its mailboxes as OWNER,
    hire its workers and wire their boards (``configure_board_drains``)."""

    def _hire(files: dict[str, str]):
        root = make_tree(files)
        roster = open_mailboxes(root, org)
        seats = hire_tree(root)
        held = [m.board_id(b) for m in roster.mailboxes for b in m.boards]
        return seats, configure_board_drains("mailbox", seats, held)

    return _hire


@pytest.fixture
def file_task(org, django_capture_on_commit_callbacks):
    """``file_task(goal, board="followups", **fields) -> Request``: ``fileTask`` on
    eng.incidents, committed, with every drain it wakes run (sync cluster)."""

    def _file(goal: str, *, board: str = "followups", mailbox: str = "eng.incidents", **fields):
        with django_capture_on_commit_callbacks(execute=True):
            request = do_run_action(
                org=org,
                kind="mailbox",
                session_id=mailbox,
                action="fileTask",
                input={"board": board, "goal": goal, **fields},
                user_id=MEMBER,
            )
        assert request.status == "completed", request.error
        return request

    return _file


def row(request) -> BoardTask:
    return BoardTask.objects.get(task_id=request.output["taskId"])


def kinds(task: BoardTask) -> list[str]:
    return list(TaskChange.objects.filter(task=task).order_by("id").values_list("kind", flat=True))


# ----------------------------------------------------------------------------- 1. the WORKER.md keys


def test_drains_and_board_tools_are_read_as_ledger_ids(make_tree):
    workers, errors = read_workforce(
        make_tree(
            tree(
                lead=worker_md(drains="[eng.incidents.followups, {board: eng.incidents.escalations, worker: analyst}]"),
                clerk=worker_md(boardTools="[support.help.escalations]"),
            )
        )
    )
    assert errors == []
    lead, clerk = {w.id: w for w in workers}["eng.lead"], {w.id: w for w in workers}["eng.clerk"]
    boards = seat_boards(lead.config)
    assert boards.drains == ((FOLLOWUPS, None), (ESCALATIONS, "analyst"))
    assert boards.board_ids == (FOLLOWUPS, ESCALATIONS)
    assert seat_boards(clerk.config).tool_boards == ("support.help.escalations",)
    assert seat_boards(clerk.config).drains == ()


@pytest.mark.parametrize(
    "value, problem",
    [
        (
            "followups",
            '"followups" is not a board ledger id: name a board as <mailbox id>.<board>, such as support.desk.escalations',
        ),
        (
            "incidents.followups",
            '"incidents.followups" is not a board ledger id: "incidents" is not a mailbox id (<team>.<mailbox>',
        ),
        ("eng.Incidents.followups", '"eng.Incidents" is not a mailbox id'),
        ("a.b.c.followups", '"a.b.c" is not a mailbox id'),
        ("eng.incidents.LOCK", '"eng.incidents.LOCK" is not a board ledger id: board "LOCK" is reserved'),
        ("eng.incidents.", "is not a board ledger id: name a board as <mailbox id>.<board>"),
        (42, "42 is not a board ledger id"),
    ],
)
def test_a_board_id_that_is_not_mailbox_dot_board_is_named(value, problem):
    assert problem in board_id_problem(value)
    assert board_id_problem(FOLLOWUPS) is None


def test_each_drains_problem_is_a_load_error_naming_the_file(make_tree):
    root = make_tree(
        tree(
            scalar=worker_md(drains=FOLLOWUPS),
            short=worker_md(drains="[followups]"),
            twice=worker_md(drains=f"[{FOLLOWUPS}, {{board: {FOLLOWUPS}, worker: x}}]"),
            entry=worker_md(drains="[{board: eng.incidents.followups, worker: Bad Key, extra: 1}, {worker: lead}]"),
            both=worker_md(drains=f"[{FOLLOWUPS}]", boardTools=f"[{FOLLOWUPS}, eng.incidents.nope, eng.incidents.nope]"),
            clash=worker_md(drains="[eng.a-b.work, eng-a.b.work]"),
            singular=worker_md(drain=f"[{FOLLOWUPS}]"),
            fine=worker_md(drains=f"[{FOLLOWUPS}]"),
        )
    )
    workers, errors = read_workforce(root)
    assert [w.id for w in workers] == ["eng.fine"]
    found: dict[str, list[str]] = {}
    for error in errors:
        found.setdefault(error.path.rpartition("/")[2], []).append(error.message)
        assert error.path.startswith("teams/eng/workers/")
    f = "teams/eng/workers/{}/WORKER.md: "
    assert found["scalar"] == [
        f.format("scalar")
        + (
            "drains: must be a list of boards, each a ledger id (<mailbox id>.<board>, such as support.desk.escalations) "
            "or {board: <ledger id>, worker: <key>}"
        )
    ]
    assert found["short"] == [
        f.format("short")
        + ('drains: "followups" is not a board ledger id: name a board as <mailbox id>.<board>, such as support.desk.escalations')
    ]
    assert found["twice"] == [f.format("twice") + f"drains: names board {FOLLOWUPS} twice"]
    assert found["entry"] == [
        f.format("entry") + "drains: an entry takes board and worker only, not 'extra'",
        f.format("entry") + 'drains: worker of eng.incidents.followups: "Bad Key" breaks the name rule: '
        "lowercase letters, digits and single hyphens, at most 64 characters.",
        f.format("entry") + "drains: an entry written as a mapping needs board: <ledger id>",
    ]
    assert found["both"] == [
        f.format("both") + f"boardTools: names board {FOLLOWUPS}, which drains: names; draining it already gives its task tools",
        f.format("both") + "boardTools: names board eng.incidents.nope twice",
    ]
    assert found["clash"] == [
        f.format("clash")
        + (
            'board eng.a-b.work and board eng-a.b.work both give tool names ending "eng_a_b_work"; '
            "a seat can hold the tools of only one of them"
        )
    ]
    assert WORKER_KEYS[-2:] == ("drains", "boardTools")  # on the closed key list
    assert found["singular"] == [
        f.format("singular")
        + (f'declares "drain", which a worker cannot declare (did you mean `drains`?); the keys are {", ".join(WORKER_KEYS)}')
    ]
    assert all(e.kind != WORKER_LOAD_FAILED for e in errors if e.path.endswith("singular"))
    assert all(e.kind == WORKER_LOAD_FAILED for e in errors if not e.path.endswith("singular"))


def test_drains_on_a_kind_that_cannot_run_a_row_is_refused_at_hire(db, make_tree):
    registry.register(FlowKind(kind="plain-worker", facets={"worker": True, "tools": {}}))
    try:
        workers, errors = read_workforce(
            make_tree(
                tree(
                    lead=worker_md(flow="plain-worker", drains=f"[{FOLLOWUPS}]"),
                    clerk=worker_md(flow="plain-worker", boardTools=f"[{FOLLOWUPS}]"),
                )
            )
        )
        assert errors == []
        with pytest.raises(HireRefused) as refused:
            hire_workforce(workers)
    finally:
        registry.unregister("plain-worker")
    assert refused.value.problems == [
        ("eng.clerk", "boardTools: the plain-worker kind does not offer a board's task tools"),
        ("eng.lead", "drains: the plain-worker kind can't run a board's rows as a seat's turn"),
        ("eng.lead", "drains: the plain-worker kind does not offer a board's task tools"),
    ]
    assert Seat.objects.count() == 0


# ----------------------------------------------------------------------------- 2. warnings at hire


def test_hiring_warns_about_boards_nobody_drains_and_drains_of_boards_nobody_holds(hired, caplog):
    caplog.set_level(logging.WARNING, logger="seats.drains")
    seats, warnings = hired(
        tree(
            lead=worker_md(drains=f"[{FOLLOWUPS}]"),
            analyst=worker_md(drains="[eng.incident.followups]"),  # a typo in the mailbox
            clerk=worker_md(boardTools="[eng.incidents.followup]"),  # a typo in the board
        )
    )
    expected = [
        (
            "unknown-board-drain",
            "eng.analyst",
            "eng.incident",
            "followups",
            "seat eng.analyst drains board eng.incident.followups, which no mailbox holds: no mailbox eng.incident holds "
            'a board "followups". It drains a second, empty ledger; fix the mailbox id or board name it names.',
        ),
        (
            "unknown-board-tools",
            "eng.clerk",
            "eng.incidents",
            "followup",
            "seat eng.clerk holds the task tools of board eng.incidents.followup, which no mailbox holds: mailbox "
            'eng.incidents holds escalations, followups, not "followup". Its tools write to a second, empty ledger; '
            "fix the mailbox id or board name it names.",
        ),
        (
            "unattended-board",
            None,
            "eng.incidents",
            "escalations",
            'mailbox eng.incidents holds board "escalations" (eng.incidents.escalations), and no hired seat drains it: '
            "its rows wait until someone works them. If a seat should drain it, check the mailbox id and board name "
            "it names.",
        ),
    ]
    assert [(w.code, w.seat_id, w.mailbox_id, w.board, w.message) for w in warnings] == expected
    assert [r.getMessage() for r in caplog.records if r.name == "seats.drains"] == [e[-1] for e in expected]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "seats.drains")
    assert board_warnings() == warnings
    # nothing is refused: every seat is hired and the drains are recorded
    assert {s.seat_id for s in seats} == {"eng.lead", "eng.analyst", "eng.clerk"}
    assert current_board_drains() == (
        BoardDrain("eng.analyst", "eng.incident.followups", ("analyst",)),
        BoardDrain("eng.lead", FOLLOWUPS, ("lead",)),
    )
    assert registry.require("mailbox").facets["on_task_filed"] is not None


def test_every_held_board_drained_gives_no_warning(hired):
    _, warnings = hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}, {{board: {ESCALATIONS}, worker: triage}}]")))
    assert warnings == []
    assert current_board_drains() == (
        BoardDrain("eng.lead", FOLLOWUPS, ("lead",)),
        BoardDrain("eng.lead", ESCALATIONS, ("triage",)),
    )


def test_boot_wires_the_drains_and_keeps_the_warnings(db, make_tree, settings, caplog):
    from workforce_project.boot import boot

    caplog.set_level(logging.WARNING, logger="seats.drains")
    root = make_tree(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    boot(root)  # drain_runtime puts the mailbox kind's facets back
    assert current_board_drains() == (BoardDrain("eng.lead", FOLLOWUPS, ("lead",)),)
    assert [w.board_id for w in board_warnings()] == [ESCALATIONS]
    assert [r.getMessage() for r in caplog.records if r.name == "seats.drains"] == [board_warnings()[0].message]


# ----------------------------------------------------------------------------- 3. the capability


def tool_names(seat: Seat) -> list[str]:
    return [t.name for t in agent_tools(seat)]


def test_a_seat_holding_two_boards_gets_sixteen_tools_named_per_board(hired):
    seats, _ = hired(tree(lead=worker_md(tools="[post-to-mailbox]", drains=f"[{FOLLOWUPS}]", boardTools=f"[{ESCALATIONS}]")))
    [lead] = seats
    names = tool_names(lead)
    assert names == (
        ["post-to-mailbox"]
        + [f"{t}_eng_incidents_followups" for t in TOOL_NAMES]
        + [f"{t}_eng_incidents_escalations" for t in TOOL_NAMES]
    )
    assert len(names) - 1 == 16 and len(set(names)) == len(names)


def test_a_tools_line_that_omits_them_does_not_withhold_them(hired):
    seats, _ = hired(tree(lead=worker_md(tools="[]", drains=f"[{FOLLOWUPS}]"), analyst=worker_md()))
    analyst, lead = seats  # by id
    assert tool_names(lead) == [f"{t}_eng_incidents_followups" for t in TOOL_NAMES]
    assert tool_names(analyst) == []  # holds no board: nothing


def test_a_tools_line_cannot_grant_them(db, make_tree):
    workers, errors = read_workforce(
        make_tree(
            tree(
                lead=worker_md(tools="[addTask_eng_incidents_followups]", drains=f"[{FOLLOWUPS}]"),
                analyst=worker_md(tools="[listTasks_eng_incidents_followups]"),
            )
        )
    )
    assert errors == []
    with pytest.raises(HireRefused) as refused:
        hire_workforce(workers)
    assert refused.value.problems == [
        (
            "eng.analyst",
            'tools: names "listTasks_eng_incidents_followups", which the agent kind does not offer (it offers create-project, post-to-mailbox)',
        ),
        (
            "eng.lead",
            'tools: names "addTask_eng_incidents_followups", which the agent kind does not offer (it offers create-project, post-to-mailbox)',
        ),
    ]
    # a seat row whose tools list names one anyway (not hired from a file) is offered nothing for it
    seat = Seat.objects.create(
        seat_id="eng.rogue", kind="agent", scope="shared", tools=["addTask_eng_incidents_followups", "post-to-mailbox"]
    )
    assert tool_names(seat) == ["post-to-mailbox"]


def test_the_tools_write_to_their_own_board_as_the_seat(hired, org):
    seats, _ = hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]", boardTools=f"[{ESCALATIONS}]")))
    tools = {t.name: t for t in agent_tools(seats[0])}
    ctx = ToolContext(org=org, seat_id="eng.lead")
    added = tools["addTask_eng_incidents_escalations"].call(ctx, {"goal": "Page the owner.", "assignee": "lead"})
    assert added["ok"] is True and added["status"] == "pending"
    task = BoardTask.objects.get(task_id=added["taskId"])
    assert (task.board_id, task.author, task.assignee) == (ESCALATIONS, "eng.lead", "lead")
    # the workers map is the hired drains': an assignee no drain runs is refused on a drained board
    refused = tools["addTask_eng_incidents_followups"].call(ctx, {"goal": "x", "assignee": "nobody"})
    assert refused == {
        "refused": 'unknown_assignee: "nobody" is not a worker of board eng.incidents.followups; its workers are lead.'
    }
    listed = tools["listTasks_eng_incidents_followups"].call(ctx, {})
    assert listed["ok"] is True and listed["tasks"] == []


# ----------------------------------------------------------------------------- 4. draining by seats


def test_a_filed_row_is_drained_by_its_seat_and_completed_with_the_reply(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    filed = file_task(
        "Write the postmortem.", title="Postmortem", context="The outage on Monday.", input={"incident": 7}, maxAttempts=2
    )
    assert filed.output["status"] == "pending"  # the answer is the filing; the drain runs after commit
    task = row(filed)
    text = (
        f"Task {task.task_id} on board eng.incidents.followups (attempt 1 of 2).\n"
        "Title: Postmortem\nGoal: Write the postmortem.\nContext: The outage on Monday.\n"
        'Input: {"incident": 7}\n'
        "Your reply is the task's output."
    )
    assert row_turn_text(task) == text
    assert (task.status, task.output, task.error) == ("completed", f"eng.lead heard: {text}", None)
    assert (task.attempts, task.run) == (1, LEAD_RUN)
    assert TaskChange.objects.get(task=task, kind="claimed").actor == "lead"  # the seat's worker key
    assert task.completed_at is not None and task.lease_until is None
    assert kinds(task) == ["added", "claimed", "completed"]
    # the run is the seat's board session, a child of the mailbox's, where the turn is recorded
    session = Session.objects.get(session_id=LEAD_RUN)
    assert (session.flow_kind, session.user_id, session.parent.session_id) == ("agent", OWNER, "eng.incidents")
    assert session.state == {"seat": "eng.lead", "boardId": FOLLOWUPS}
    [turn] = Request.objects.filter(session=session)
    assert (turn.action, turn.status, turn.input) == (
        "runTask",
        "completed",
        {"taskId": task.task_id, "boardId": FOLLOWUPS, "attempt": 1},
    )
    assert turn.output == {"taskId": task.task_id, "reply": f"eng.lead heard: {text}", "toolCalls": []}
    messages = [(i.data["role"], i.data["text"]) for i in Item.objects.filter(session=session, type="message").order_by("seq")]
    assert messages == [("user", text), ("assistant", f"eng.lead heard: {text}")]


def test_a_failed_turn_sends_the_row_back_to_pending_until_it_runs_out_of_attempts(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    resolver = create_mock_model_resolver({"eng.lead": [RuntimeError, RuntimeError]})
    set_model_resolver(resolver)
    task = row(file_task("Flaky.", maxAttempts=2))
    assert (task.status, task.attempts, task.output) == ("errored", 2, None)
    assert task.error == "TurnFailed: model-error: mock: RuntimeError: mock: scripted failure"
    assert kinds(task) == ["added", "claimed", "retried", "claimed", "errored"]
    retried = TaskChange.objects.get(task=task, kind="retried")
    assert (retried.from_status, retried.to_status) == ("in_progress", "pending")
    turns = Request.objects.filter(session__session_id=LEAD_RUN).order_by("id")
    assert [(t.status, t.error["reason"]) for t in turns] == [("failed", "model-error")] * 2
    assert len(resolver.calls_for("eng.lead")) == 2


def test_a_rows_turn_is_recorded_in_the_turn_log(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    script = ScriptedTurn("runTask")
    set_model_resolver(create_mock_model_resolver({"eng.lead": script}))
    task = row(file_task("Write it."))
    request = Request.objects.get(session__session_id=LEAD_RUN, action="runTask")
    assert script.statuses == ["running", "running"]
    assert turn_log(request) == TURN_LOG
    assert request.status == "completed"
    assert request.output == {"taskId": task.task_id, "reply": "the reply", "toolCalls": ["no-such-tool"]}
    assert (task.status, task.output) == ("completed", "the reply")  # the drain settled its row


def test_a_rows_failed_turn_ends_failed_with_its_error(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    script = ScriptedTurn("runTask", fail=True)
    set_model_resolver(create_mock_model_resolver({"eng.lead": script}))
    task = row(file_task("Write it.", maxAttempts=1))
    request = Request.objects.get(session__session_id=LEAD_RUN, action="runTask")
    assert script.statuses == ["running"]
    assert turn_log(request) == TURN_LOG[:1]
    assert request.status == "failed" and request.error["reason"] == "model-error"
    assert task.status == "errored"


def test_a_row_whose_turn_failed_once_completes_on_its_next_attempt(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    set_model_resolver(create_mock_model_resolver({"eng.lead": [RuntimeError, "Done: written."]}))
    task = row(file_task("Flaky once."))
    assert (task.status, task.attempts, task.output, task.error) == ("completed", 2, "Done: written.", None)
    assert kinds(task) == ["added", "claimed", "retried", "claimed", "completed"]


def test_an_assigned_row_wakes_only_the_seat_whose_worker_key_it_names(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]"), analyst=worker_md(drains=f"[{{board: {FOLLOWUPS}, worker: triage}}]")))
    resolver = create_mock_model_resolver({"*": lambda call: f"{call.block} did it"})
    set_model_resolver(resolver)
    assigned = row(file_task("For triage.", assignee="triage"))
    assert (assigned.status, assigned.output, assigned.run) == ("completed", "eng.analyst did it", f"{FOLLOWUPS}:eng.analyst")
    assert [c.block for c in resolver.calls] == ["eng.analyst"]
    free = row(file_task("For anyone."))
    # both drains were woken; exactly one claimed the row and ran it once
    assert free.status == "completed" and free.attempts == 1
    assert len(resolver.calls) == 2 and free.output == f"{resolver.calls[1].block} did it"


def _counting_steps(monkeypatch) -> list[dict]:
    import seats.drains

    reports = []
    real = seats.drains.do_seat_drain

    def counting(*args):
        reports.append(real(*args))
        return reports[-1]

    monkeypatch.setattr(seats.drains, "do_seat_drain", counting)
    return reports


def test_a_drain_step_claims_the_next_row_itself_while_rows_remain_and_enqueues_nothing_once_drained(
    hired, org, monkeypatch, django_capture_on_commit_callbacks
):
    import seats.drains

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    rows = [do_file_task(org, FOLLOWUPS, goal=f"Row {i}.") for i in range(3)]  # no fileTask: nothing woken
    reports = _counting_steps(monkeypatch)
    enqueued = []
    monkeypatch.setattr(seats.drains, "enqueue", lambda *args: enqueued.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        first = seats.drains.do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
    assert first["claimed"] == 3 and first["completed"] == 3 and first["drained"] is True
    assert first["taskIds"] == [t.task_id for t in rows]  # claim order, one task
    assert reports == [first] and enqueued == []  # no fresh task per row, none once drained
    assert first["run"] == LEAD_RUN and first["seat"] == "eng.lead"
    assert set(BoardTask.objects.values_list("status", flat=True)) == {"completed"}
    # one runTask request per row, one after another in the seat's board session
    spans = list(Request.objects.filter(action="runTask").order_by("pk").values_list("started_at", "finished_at"))
    assert len(spans) == 3 and all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


def test_a_drain_step_stops_at_its_row_bound_and_enqueues_the_next_step(
    hired, org, monkeypatch, django_capture_on_commit_callbacks
):
    import seats.drains

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    monkeypatch.setattr(seats.drains, "DRAIN_ROWS_PER_TASK", 2)
    rows = [do_file_task(org, FOLLOWUPS, goal=f"Row {i}.") for i in range(5)]
    reports = _counting_steps(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        first = seats.drains.do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
    assert (first["claimed"], first["drained"]) == (2, False)
    # the step it enqueued ran the next two, and the last one the fifth; then nothing is enqueued
    assert [(r["claimed"], r["drained"]) for r in reports] == [(2, False), (2, False), (1, True)]
    assert [r["taskIds"] for r in reports] == [[t.task_id for t in rows[i : i + 2]] for i in (0, 2, 4)]
    assert set(BoardTask.objects.values_list("status", flat=True)) == {"completed"}


def test_a_drain_step_claims_no_row_past_its_time_bound(hired, org, monkeypatch, django_capture_on_commit_callbacks):
    import seats.drains

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    monkeypatch.setattr(seats.drains, "drain_seconds_per_task", lambda: 0.0)  # the bound is past after the first row
    for i in range(2):
        do_file_task(org, FOLLOWUPS, goal=f"Row {i}.")
    reports = _counting_steps(monkeypatch)
    with django_capture_on_commit_callbacks(execute=True):
        first = seats.drains.do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
    assert (first["claimed"], first["drained"]) == (1, False)
    assert [(r["claimed"], r["drained"]) for r in reports] == [(1, False), (1, False), (0, True)]


def test_the_time_bound_leaves_a_whole_turn_inside_the_cluster_timeout(settings):
    from seats.drains import DRAIN_SECONDS_CAP, drain_seconds_per_task

    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 120}
    settings.WORKFORCE_TURN_TIMEOUT = 100
    assert drain_seconds_per_task() == min(DRAIN_SECONDS_CAP, 18.0)
    assert drain_seconds_per_task() + 100 < 120
    settings.WORKFORCE_TURN_TIMEOUT = 119
    assert drain_seconds_per_task() == 0.0  # no room: one row per task
    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "timeout": 600}
    settings.WORKFORCE_TURN_TIMEOUT = 100
    assert drain_seconds_per_task() == DRAIN_SECONDS_CAP


def test_a_drain_step_whose_seat_has_a_turn_running_in_its_board_session_claims_nothing_and_waits(
    hired, file_task, django_capture_on_commit_callbacks
):
    """One turn of a seat at a time in a session (``seats.turns``), board rows included:
    the step waits, and runs when the turn that holds the slot ends."""
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    file_task("first")  # drained at once; its run made the board session
    session = Session.objects.get(session_id=LEAD_RUN)
    holder = take_turn_slot(session, "eng.lead", wake=Wake("tests.holder"))  # a row's turn still running
    filed = file_task("second")
    assert (row(filed).status, row(filed).attempts) == ("pending", 0)
    [wait] = TurnWait.objects.all()
    assert (wait.task, wait.args) == (SEAT_DRAIN_TASK, [str(row(filed).organization_id), FOLLOWUPS, "eng.lead", "lead"])
    with django_capture_on_commit_callbacks(execute=True):
        free_turn_slot(session, "eng.lead", holder)
    assert row(filed).status == "completed"
    assert [r.status for r in Request.objects.filter(session=session).order_by("pk")] == ["completed", "completed"]


def test_a_row_run_alone_takes_its_seats_slot_and_fails_the_attempt_while_a_turn_holds_it(hired, org, file_task):
    """``run_board_row`` (a row claimed outside a seat's drain step) takes the seat's
    slot through the one turn path after its claim: while another turn holds it, the
    attempt fails ``seat-busy`` with nothing written; once it is free the row runs."""
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    set_model_resolver(create_mock_model_resolver({"eng.lead": lambda call: "alone"}))
    file_task("first")  # drained at once; its run made the board session
    session = Session.objects.get(session_id=LEAD_RUN)
    task = do_file_task(org, FOLLOWUPS, goal="run alone")
    claimed = do_claim_task(org, FOLLOWUPS, worker_key="lead", run=LEAD_RUN)
    assert claimed.pk == task.pk
    holder = take_turn_slot(session, "eng.lead", wake=Wake("tests.holder"))
    with pytest.raises(TurnFailed, match=r"^seat-busy: eng.lead is running a turn in "):
        with transaction.atomic():  # the task's own transaction (the drain runs it in none)
            run_board_row(claimed)
    assert Request.objects.filter(session=session).count() == 1  # the first row's only
    assert not TurnWait.objects.exists()  # the wait rolled back with the refusal
    free_turn_slot(session, "eng.lead", holder)
    settled = run_board_row(claimed).task
    assert (settled.status, settled.output) == ("completed", "alone")
    assert [r.status for r in Request.objects.filter(session=session).order_by("pk")] == ["completed", "completed"]
    slot = TurnSlot.objects.get(session=session, seat_id="eng.lead")
    assert (slot.claim_token, slot.lease_until) == ("", None)  # taken for the turn, freed with its settle


def test_a_redelivered_drain_runs_no_row_twice(hired, org, file_task, django_capture_on_commit_callbacks):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    resolver = create_mock_model_resolver({"eng.lead": lambda call: "once"})
    set_model_resolver(resolver)
    task = row(file_task("Once."))
    with django_capture_on_commit_callbacks(execute=True):
        again = do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
    assert again["claimed"] == 0
    assert len(resolver.calls) == 1 and Request.objects.filter(session__session_id=LEAD_RUN).count() == 1
    assert kinds(task) == ["added", "claimed", "completed"]


def test_a_turn_a_crash_cut_short_is_aborted_and_the_row_claimed_again(hired, org, django_capture_on_commit_callbacks):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    task = do_file_task(org, FOLLOWUPS, goal="Survive a crash.")
    # a worker claimed the row, started its turn and died
    past = timezone.now() - timedelta(seconds=1000)
    claimed = do_claim_task(org, FOLLOWUPS, worker_key="lead", run=LEAD_RUN, lease_seconds=10, now=past)
    session = Session.objects.create(
        organization=org, session_id=LEAD_RUN, flow_kind="agent", user_id=OWNER, state={"seat": "eng.lead", "boardId": FOLLOWUPS}
    )
    dead = Request.objects.create(
        organization=org,
        session=session,
        action="runTask",
        internal=True,
        user_id=OWNER,
        input={"taskId": task.task_id, "boardId": FOLLOWUPS, "attempt": 1},
        status="running",
    )
    assert claimed.pk == task.pk
    with django_capture_on_commit_callbacks(execute=True):
        report = do_seat_drain(org.pk, FOLLOWUPS, "eng.lead", "lead")
    assert report["claimed"] == 1 and report["completed"] == 1
    task.refresh_from_db()
    assert (task.status, task.attempts, task.abandonments) == ("completed", 2, 1)
    assert kinds(task) == ["added", "claimed", "abandoned", "claimed", "completed"]
    dead.refresh_from_db()
    assert dead.status == "aborted" and dead.error["reason"] == "aborted"
    assert list(Request.objects.filter(session=session).order_by("id").values_list("status", flat=True)) == [
        "aborted",
        "completed",
    ]


def test_the_seat_turn_runs_outside_any_transaction(transactional_db, make_tree, org):
    root = make_tree(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    open_mailboxes(root, org)
    seats = hire_workforce(read_workforce(root).workers)
    configure_board_drains("mailbox", seats, [FOLLOWUPS, ESCALATIONS])
    seen = []
    set_model_resolver(
        create_mock_model_resolver({"eng.lead": lambda call: seen.append(connection.in_atomic_block) or "outside"})
    )
    request = do_run_action(
        org=org,
        kind="mailbox",
        session_id="eng.incidents",
        action="fileTask",
        input={"board": "followups", "goal": "Check the lock."},
        user_id=MEMBER,
    )
    assert seen == [False]  # the drain ran after fileTask committed, its turn in no transaction
    assert row(request).status == "completed" and row(request).output == "outside"


def test_the_model_can_settle_its_own_row_with_the_board_tools(hired, file_task):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))

    def script(call):
        if any(m["role"] == "tool" for m in call.messages):
            return "settled it myself"
        task_id = call.messages[-1]["content"].split()[1]
        return {
            "tool_calls": [
                {
                    "name": "completeTask_eng_incidents_followups",
                    "arguments": {"taskId": task_id, "output": {"postmortem": "done"}},
                }
            ]
        }

    set_model_resolver(create_mock_model_resolver({"eng.lead": script}))
    task = row(file_task("Settle yourself."))
    # the tool's completion stands; the drain's own settle found the claim settled and changed nothing
    assert (task.status, task.output) == ("completed", {"postmortem": "done"})
    assert kinds(task) == ["added", "claimed", "completed"]
    turn = Request.objects.get(session__session_id=LEAD_RUN)
    assert turn.output["toolCalls"] == ["completeTask_eng_incidents_followups"]
    [call] = Item.objects.filter(session__session_id=LEAD_RUN, component="tool-call")
    assert call.data["result"]["ok"] is True and call.data["result"]["task"]["status"] == "completed"


def test_a_row_cancelled_while_its_turn_runs_stays_cancelled(hired, org, file_task):
    from boards.services import do_cancel_task

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))

    def script(call):
        task_id = call.messages[-1]["content"].split()[1]
        do_cancel_task(org, FOLLOWUPS, task_id, reason="not needed", actor="u_42")
        return "too late"

    set_model_resolver(create_mock_model_resolver({"eng.lead": script}))
    task = row(file_task("Cancel me."))
    assert (task.status, task.output) == ("cancelled", None)
    assert kinds(task) == ["added", "claimed", "cancelled"]


def test_a_row_a_seat_adds_with_its_tools_wakes_the_board_drain(hired, org, django_capture_on_commit_callbacks):
    seats, _ = hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]"), clerk=worker_md(boardTools=f"[{FOLLOWUPS}]")))
    clerk = next(s for s in seats if s.seat_id == "eng.clerk")
    add = next(t for t in agent_tools(clerk) if t.name == "addTask_eng_incidents_followups")
    with django_capture_on_commit_callbacks(execute=True):
        added = add.call(ToolContext(org=org, seat_id="eng.clerk"), {"goal": "Filed by the clerk."})
    task = BoardTask.objects.get(task_id=added["taskId"])
    assert (task.status, task.author, task.run) == ("completed", "eng.clerk", LEAD_RUN)
    assert task.output.startswith("eng.lead heard: Task ")


def test_the_sweep_wakes_drains_for_rows_nothing_picked_up(hired, org, django_capture_on_commit_callbacks):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    waiting = do_file_task(org, FOLLOWUPS, goal="Dropped on the floor.")  # no fileTask: nothing woken
    theirs = do_file_task(org, FOLLOWUPS, goal="Someone else's.", assignee="analyst")
    held = do_file_task(org, ESCALATIONS, goal="Nobody drains this board.")
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_board_drains() == []  # just filed: a drain is on its way
    later = timezone.now() + timedelta(seconds=60)
    with django_capture_on_commit_callbacks(execute=True):
        woken = do_sweep_board_drains(now=later)
    assert woken == [(org.pk, FOLLOWUPS, "eng.lead", "lead")]
    statuses = {t.goal: t.status for t in BoardTask.objects.all()}
    assert statuses == {waiting.goal: "completed", theirs.goal: "pending", held.goal: "pending"}
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_board_drains(now=later) == []  # only the analyst's row is left, and nobody drains as analyst


def test_the_sweep_picks_up_a_lapsed_row_but_leaves_a_live_chain_alone(hired, org, django_capture_on_commit_callbacks):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    first = do_file_task(org, FOLLOWUPS, goal="Being worked.")
    do_file_task(org, FOLLOWUPS, goal="Next in line.")
    now = timezone.now()
    do_claim_task(org, FOLLOWUPS, worker_key="lead", run=LEAD_RUN, lease_seconds=300, now=now)
    later = now + timedelta(seconds=60)
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_board_drains(now=later) == []  # the seat's chain holds a live claim
    # the worker holding it dies: its lease lapses
    BoardTask.objects.filter(pk=first.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_board_drains(now=later) == [(org.pk, FOLLOWUPS, "eng.lead", "lead")]
    first.refresh_from_db()
    assert first.abandonments == 1 and first.attempts == 2 and first.status == "completed"
    assert set(BoardTask.objects.values_list("status", flat=True)) == {"completed"}


def test_a_drain_of_a_seat_that_is_not_hired_leaves_the_rows_pending(hired, org, django_capture_on_commit_callbacks):
    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    task = do_file_task(org, FOLLOWUPS, goal="Waits.")
    with django_capture_on_commit_callbacks(execute=True):
        report = do_seat_drain(org.pk, FOLLOWUPS, "eng.ghost", "ghost")
    assert report == {
        "boardId": FOLLOWUPS,
        "seat": "eng.ghost",
        "skipped": 'seat-not-found: No worker "eng.ghost" on your roster.',
    }
    task.refresh_from_db()
    assert (task.status, task.attempts) == ("pending", 0)


def test_a_long_run_id_is_shortened_to_fit_the_row(db):
    board = "eng.incidents." + "b" * 190
    run = board_run_id(board, "eng.lead")
    assert run.startswith("run_") and len(run) == 36 and run == board_run_id(board, "eng.lead")
    assert board_run_id(FOLLOWUPS, "eng.lead") == LEAD_RUN


# ----------------------------------------------------------------------------- 5. the example tree


def test_the_example_desk_holds_escalations_and_the_lead_drains_them(db, settings, org, django_capture_on_commit_callbacks):
    from workforce_project.boot import boot, open_roster

    root = Path(settings.BASE_DIR) / "examples" / "support-desk"
    open_roster(boot(root))  # drain_runtime puts the mailbox kind's facets back
    assert board_warnings() == []
    assert current_board_drains() == (BoardDrain("support.lead", "support.desk.escalations", ("lead",)),)
    with django_capture_on_commit_callbacks(execute=True):
        request = do_run_action(
            org=org,
            kind="mailbox",
            session_id="support.desk",
            action="fileTask",
            input={"board": "escalations", "goal": "Approve a refund over the limit."},
            user_id=MEMBER,
        )
    assert request.output["boardId"] == "support.desk.escalations"
    task = row(request)
    assert task.status == "completed" and task.run == "support.desk.escalations:support.lead"
    assert task.output == f"support.lead heard: {row_turn_text(task)}"


# ----------------------------------------------------------------------------- under real concurrency


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_seats_draining_one_board_from_many_tasks_at_once_run_each_row_once(make_tree, org, monkeypatch):
    import seats.drains
    import seats.turns

    monkeypatch.setattr(seats.drains, "enqueue", lambda *args, **kwargs: None)  # each thread drives its own steps
    monkeypatch.setattr(seats.turns, "enqueue", lambda *args, **kwargs: None)  # a step that waited is retried below
    root = make_tree(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]"), analyst=worker_md(drains=f"[{FOLLOWUPS}]")))
    open_mailboxes(root, org)
    configure_board_drains("mailbox", hire_workforce(read_workforce(root).workers), [FOLLOWUPS])
    resolver = create_mock_model_resolver({"*": lambda call: f"{call.block} did it"})
    set_model_resolver(resolver)
    rows = [do_file_task(org, FOLLOWUPS, goal=f"Row {i}.") for i in range(24)]

    def drain(i: int) -> int:
        seat, key = ("eng.lead", "lead") if i % 2 else ("eng.analyst", "analyst")
        claimed = 0
        while True:
            report = do_seat_drain(org.pk, FOLLOWUPS, seat, key)
            if report.get("waiting"):  # another step of this seat runs a row's turn: it is woken later
                time.sleep(0.01)
                continue
            claimed += report["claimed"]  # a step claims the next row itself while rows remain
            if report["drained"]:
                return claimed

    assert sum(run_in_threads(drain, 6)) == len(rows)
    # One seat's rows ran one at a time (seats.turns): its turns never overlapped.
    for seat in ("eng.lead", "eng.analyst"):
        spans = sorted(
            Request.objects.filter(action="runTask", session__session_id=board_run_id(FOLLOWUPS, seat)).values_list(
                "started_at", "finished_at"
            )
        )
        assert all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:], strict=False)), seat
    done = list(BoardTask.objects.filter(board_id=FOLLOWUPS))
    assert {(t.status, t.attempts) for t in done} == {("completed", 1)}
    assert all(t.output == f"{t.run.rpartition(':')[2]} did it" for t in done)
    assert len(resolver.calls) == len(rows)
    assert Request.objects.filter(action="runTask", status="completed").count() == len(rows)
    assert TaskChange.objects.filter(kind="claimed").count() == len(rows)


def test_the_sweep_leaves_a_drain_waiting_in_a_backlog_alone_and_wakes_a_lost_one_once(
    hired,
    org,
    django_capture_on_commit_callbacks,
    monkeypatch,
):
    import seats.drains
    import workforce.leases
    from seats.models import DrainWake

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    do_file_task(org, FOLLOWUPS, goal="Waits behind a backlog.")
    sent = []
    monkeypatch.setattr(seats.drains, "enqueue", lambda *args: sent.append(args))  # the queue holds it, unrun
    with django_capture_on_commit_callbacks(execute=True):
        seats.drains.wake_board_drains(org, FOLLOWUPS)
    assert len(sent) == 1
    monkeypatch.setattr(workforce.leases, "broker_idle", lambda: False)  # a backlog: the broker still holds tasks
    start = timezone.now()
    for hours in (1, 2, 10, 100):
        with django_capture_on_commit_callbacks(execute=True):
            assert do_sweep_board_drains(now=start + timedelta(hours=hours)) == []
    assert len(sent) == 1
    monkeypatch.setattr(workforce.leases, "broker_idle", lambda: True)  # the broker holds nothing: it was lost
    later = start + timedelta(hours=1)
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_board_drains(now=later) == [(org.pk, FOLLOWUPS, "eng.lead", "lead")]
        assert do_sweep_board_drains(now=later) == []  # once
    assert len(sent) == 2
    assert DrainWake.objects.get().requeues == 1


def test_a_rows_turn_runs_through_the_one_function(hired, file_task, monkeypatch):
    from ..turn_log import spy_drive_turn

    hired(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]")))
    kinds = spy_drive_turn(monkeypatch)
    set_model_resolver(create_mock_model_resolver({"eng.lead": lambda call: "the reply"}))
    task = row(file_task("Write it."))
    assert kinds == ["board-row"]
    assert (task.status, task.output) == ("completed", "the reply")
