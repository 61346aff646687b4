"""Boards drained by seats on a real django-q2 cluster (spec "Working the
rows"): a row filed over HTTP with ``fileTask`` is drained by the seat that declares
``drains:`` on the cluster ``serve`` starts, and ends completed with the seat's reply as
its output, within a bounded wait; ``serve`` prints the hire-time board warnings."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, session_requests, wait_for

pytestmark = pytest.mark.e2e

BOARD = "eng.incidents.followups"
RUN = f"{BOARD}:eng.lead"


def worker(description: str, drains: str) -> str:
    return f"---\ndescription: {description}\nmodel: embedded/echo\ndrains: [{drains}]\n---\n\nWork the row; your reply is its output.\n"


def tree(root: Path) -> Path:
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
                "Where the engineering team works incidents.",
                members=("eng.lead", "eng.analyst"),
                boards="[followups, escalations]",
            ),
            "teams/eng/workers/lead/WORKER.md": worker("Works the followups.", BOARD),
            "teams/eng/workers/analyst/WORKER.md": worker("Names a board nobody holds.", "eng.incident.followups"),
        },
    )


def file_task(server: Server, **input) -> dict:
    answer = server.call(
        "POST", "/api/flows/mailbox/eng.incidents/actions/fileTask", {"userId": "u_42", "input": {"board": "followups", **input}}
    )
    assert answer.status == 202 and answer.body["status"] == "completed", answer.body
    return answer.body["output"]


def rows(server: Server) -> dict[str, dict]:
    answer = server.call("GET", f"/api/boards/{BOARD}/tasks?limit=100")
    assert answer.status == 200, answer.body
    return {t["id"]: t for t in answer.body["tasks"]}


def stored_outputs(server: Server) -> dict[str, object]:
    """Each row's ``output`` as stored (it never crosses to a browser), read from the
    server's own database."""
    query = "SELECT task_id, output FROM boards_boardtask WHERE board_id = %s"
    url = server.env.get("DATABASE_URL")
    if url:
        import psycopg

        with psycopg.connect(url) as conn:  # jsonb comes back decoded
            return dict(conn.execute(query, [BOARD]).fetchall())
    path = Path(server.env["WORKFORCE_VAR_DIR"]) / "workforce.sqlite3"
    with sqlite3.connect(path) as conn:  # JSON text
        found = conn.execute(query.replace("%s", "?"), [BOARD]).fetchall()
    return {task_id: json.loads(output) if output is not None else None for task_id, output in found}


def turns(server: Server) -> list[dict]:
    return session_requests(server, RUN, "runTask")


def test_a_row_filed_over_http_is_drained_by_its_seat_on_the_cluster(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"), env={"WORKFORCE_SWEEP_SECONDS": "1"})
    filed = file_task(server, goal="Write the postmortem.", title="Postmortem")
    assert filed["boardId"] == BOARD and filed["status"] == "pending"
    task_id = filed["taskId"]

    done = wait_for(
        lambda: t if (t := rows(server).get(task_id)) and t["status"] == "completed" else None,
        timeout=30,
        what="the seat to drain the row",
        log=server.log,
    )
    assert (done["run"], done["attempts"], done["error"]) == (RUN, 1, None)
    text = (
        f"Task {task_id} on board {BOARD} (attempt 1 of 3).\nTitle: Postmortem\nGoal: Write the postmortem.\n"
        "Your reply is the task's output."
    )
    assert stored_outputs(server)[task_id] == f"eng.lead heard: {text}"
    [turn] = turns(server)
    assert turn["status"] == "completed" and turn["output"]["reply"] == f"eng.lead heard: {text}"

    # a burst of rows: every one is run once, by the seat's drains on two cluster workers
    burst = [file_task(server, goal=f"Followup {i}.")["taskId"] for i in range(4)]
    wait_for(
        lambda: all(rows(server)[t]["status"] == "completed" for t in burst),
        timeout=60,
        what="every row of the burst to complete",
        log=server.log,
    )
    assert all(rows(server)[t]["attempts"] == 1 for t in burst)
    assert sorted(t["output"]["taskId"] for t in turns(server)) == sorted([task_id, *burst])  # each row run once
    outputs = stored_outputs(server)
    assert all(outputs[t].startswith(f"eng.lead heard: Task {t} on board {BOARD}") for t in burst)

    log = server.log.read_text()
    assert (
        "warning: seat eng.analyst drains board eng.incident.followups, which no mailbox holds: no mailbox "
        'eng.incident holds a board "followups".'
    ) in log
    assert (
        'warning: mailbox eng.incidents holds board "escalations" (eng.incidents.escalations), and no hired seat drains it' in log
    )
