"""A routed mailbox on the real server and task cluster (spec "Routing a mailbox"): a post over HTTP is
routed by the embedded evaluator on the cluster, only the member it fits answers, and
the decision shows as a ``mailbox-route`` item."""

from __future__ import annotations

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import transcript, wait_for

pytestmark = pytest.mark.e2e


def worker(description: str) -> str:
    return f"---\ndescription: {description}\nmodel: embedded/echo\n---\n\nAnswer the customer.\n"


def test_a_routed_post_over_http_is_answered_by_the_one_member_it_fits(start_server, tmp_path):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/support/mailboxes/desk/MAILBOX.md": (
                "---\ndescription: Ask us.\nmembers: [support.devices, support.accounts, support.general]\n"
                "routing:\n  fallback: support.general\n---\n\nAnswer.\n"
            ),
            "teams/support/workers/devices/WORKER.md": worker("Phones, laptops, printers and wifi."),
            "teams/support/workers/accounts/WORKER.md": worker("Sign-in, passwords, billing and refunds."),
            "teams/support/workers/general/WORKER.md": worker("Orders, shipping and anything else."),
        },
    )
    server = start_server(root, env={"WORKFORCE_ROUTE_MODEL": "embedded/lexical"})
    answer = server.call(
        "POST", "/api/flows/mailbox/support.desk/actions/post", {"userId": "u_42", "input": {"body": "My printer keeps jamming."}}
    )
    assert answer.status == 202, answer.body

    lines = wait_for(
        lambda: ls if len(ls := transcript(server, "support.desk")) >= 2 else None,
        timeout=30,
        what="the routed member's answer",
        log=server.log,
    )
    assert [(ln.get("author"), ln.get("seatAuthored")) for ln in lines] == [(None, None), ("support.devices", True)]
    items = server.call("GET", "/api/sessions/support.desk/items?itemTypes=component").body["items"]
    routes = [i["data"] for i in items if i["component"] == "mailbox-route"]
    assert [(r["member"], r["by"]) for r in routes] == [("support.devices", "evaluated")]
    answers = server.call(
        "POST",
        "/api/flows/mailbox/support.desk/actions/answer",
        {"userId": "u_42", "input": {"postId": lines[0]["id"], "body": "me", "author": "support.devices"}},
    )
    assert answers.status == 404  # an internal entry: no client can answer for a member
