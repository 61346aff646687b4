"""A person's own roster on a real ``serve`` (web server and django-q2 cluster), over
HTTP: a worker hired after the cluster started is handed a coordinator's post and its
turn runs on the cluster with no restart (read from the database); the hire outlives a
restart; once fired, the next post skips it with the spec's reason and keeps its entry."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import Server, session_items, wait_for

pytestmark = pytest.mark.e2e

USER = "u_42"
HELP = "support.help"
CONVERSATION = f"{HELP}:{USER}"
SCRIBE = "notes.scribe"


def tree(root: Path) -> Path:
    return write_tree(
        root,
        {
            "teams/support/workers/help/WORKER.md": (
                "---\ndescription: Ask the support team anything.\nflow: coordinator\nmodel: embedded/echo\n"
                "delegates: [support.devices]\nrouting: everyone\n---\n\nYou are the support desk.\n"
            ),
            "teams/support/workers/devices/WORKER.md": (
                "---\ndescription: Phones and laptops.\nmodel: embedded/echo\n---\n\nAnswer the question.\n"
            ),
        },
    )


def act(server: Server, action: str, input: dict) -> dict:
    answer = server.call("POST", f"/api/flows/coordinator/{CONVERSATION}/actions/{action}", {"userId": USER, "input": input})
    assert answer.status == 202 and answer.body["status"] == "completed", answer.body
    return answer.body


def answered_by(server: Server) -> list[str]:
    return [
        i["data"]["agentName"]
        for i in session_items(server, CONVERSATION, USER)
        if i["type"] == "message" and i["data"]["role"] == "assistant"
    ]


def test_a_worker_hired_while_the_cluster_runs_takes_a_post_then_is_fired(start_server, tmp_path):
    root = tree(tmp_path / "tree")
    server = start_server(root)
    assert server.call("POST", f"/api/workers/{HELP}/sessions", {"userId": USER}).status == 201
    hired = server.call(
        "POST",
        "/api/workers",
        {"userId": USER, "id": SCRIBE, "workerMd": "---\ndescription: Takes notes.\nmodel: embedded/echo\n---\nTake notes.\n"},
    )
    assert hired.status == 201 and hired.body["scope"] == "own", hired.body
    assert act(server, "addDelegate", {"worker": SCRIBE})["output"]["delegates"] == [
        {"worker": "support.devices"},
        {"worker": SCRIBE},
    ]
    route = act(server, "run", {"message": "Write this down: the printer is fixed."})["output"]["route"]
    assert route["delegates"] == [
        {"worker": "support.devices", "outcome": "delivered"},
        {"worker": SCRIBE, "outcome": "delivered"},
    ]
    wait_for(
        lambda: sorted(answered_by(server)) == sorted(["support.devices", SCRIBE]),
        timeout=60,
        what="both answers",
        log=server.log,
    )

    # The hire is a row: it outlives a restart of the web server and the cluster.
    server.stop()
    server = start_server(root)
    roster = server.call("GET", f"/api/workers?userId={USER}")
    assert roster.status == 200 and [w["id"] for w in roster.body["results"]][0] == SCRIBE, roster.body
    assert server.call("GET", f"/api/workers/{SCRIBE}?userId=someone_else").status == 404

    assert server.call("DELETE", f"/api/workers/{SCRIBE}?userId={USER}").status == 204
    route = act(server, "run", {"message": "And the wifi?"})["output"]["route"]
    assert route["delegates"] == [
        {"worker": "support.devices", "outcome": "delivered"},
        {"worker": SCRIBE, "outcome": "skipped", "reason": f'No worker "{SCRIBE}" on your roster.'},
    ]
    assert {"worker": SCRIBE} in act(server, "listDelegates", {})["output"]["delegates"]  # its entry is kept
    wait_for(lambda: len(answered_by(server)) == 3, timeout=60, what="devices' second answer", log=server.log)
    assert answered_by(server).count(SCRIBE) == 1
