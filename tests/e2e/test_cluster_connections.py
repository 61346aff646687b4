"""The task cluster reuses its database connections (``workforce.broker.keep_connections``)
and the web server its pool: a post-and-wake over HTTP on a real ``serve`` opens no new
PostgreSQL connection, where django-q2's defaults (``CONN_MAX_AGE = 0``, connections
closed before every task, result and poll) opened several per post."""

from __future__ import annotations

import time

import psycopg
import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, session_requests, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

POSTS = 8


def tree(root):
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Status.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": "---\ndescription: Alpha.\nmodel: embedded/echo\n---\n\nListen.\n",
        },
    )


def sessions(url: str) -> int:
    """Connections PostgreSQL has established to the database so far (this one included)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()[0]


def post_and_wake(server: Server, n: int) -> None:
    answer = server.call(
        "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": f"post {n}"}}
    )
    assert answer.status == 202, answer.body
    wait_for(
        lambda: (
            len([t for t in session_requests(server, "eng.standup:eng.alpha", "onMailboxPost") if t["status"] == "completed"]) > n
        ),
        timeout=60,
        what=f"the seat's turn on post {n}",
        log=server.log,
    )


def new_connections_per_post(server: Server) -> float:
    for n in range(3):  # every process boots and connects
        post_and_wake(server, n)
    time.sleep(1.5)  # a backend reports its session to the statistics within a second
    before = sessions(server.env["DATABASE_URL"])
    for n in range(3, 3 + POSTS):
        post_and_wake(server, n)
    time.sleep(1.5)
    return (sessions(server.env["DATABASE_URL"]) - before - 1) / POSTS


def test_a_post_and_wake_opens_no_new_connection(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"))
    assert new_connections_per_post(server) <= 0.25


def test_control_with_connections_closed_each_time_every_post_and_wake_opens_several(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"), env={"WORKFORCE_CLUSTER_CONN_MAX_AGE": "0", "WORKFORCE_DB_POOL": "false"})
    assert new_connections_per_post(server) >= 3
