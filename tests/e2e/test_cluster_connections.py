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


_reads = [0]  # the sessions this module opened to read the figure


def others_sessions(url: str) -> int:
    """``sessions`` less the reads this module made, this one included."""
    _reads[0] += 1
    return sessions(url) - _reads[0]


def settled_sessions(url: str, *, limit: float = 15.0) -> int:
    """``others_sessions`` once two reads 1.5 s apart agree (at most ``limit`` seconds
    of reads): a backend reports its session to the statistics within a second of its
    last transaction, later on a loaded machine, and a process that connected during
    the warm-up must not count as a post's connection."""
    deadline = time.monotonic() + limit
    last = others_sessions(url)
    while True:
        time.sleep(1.5)
        now = others_sessions(url)
        if now == last or time.monotonic() > deadline:
            return now
        last = now


def new_connections_per_post(server: Server) -> float:
    url = server.env["DATABASE_URL"]
    for n in range(3):  # every process boots and connects
        post_and_wake(server, n)
    before = settled_sessions(url)
    for n in range(3, 3 + POSTS):
        post_and_wake(server, n)
    return (settled_sessions(url) - before) / POSTS


def test_a_post_and_wake_opens_no_new_connection(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"))
    assert new_connections_per_post(server) <= 0.25


def test_control_with_connections_closed_each_time_every_post_and_wake_opens_several(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"), env={"WORKFORCE_CLUSTER_CONN_MAX_AGE": "0", "WORKFORCE_DB_POOL": "false"})
    assert new_connections_per_post(server) >= 3


def held(url: str) -> int:
    """Connections open to the database now, this one left out."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]


def test_serve_holds_no_more_connections_than_its_budget_says(start_server, tmp_path):
    """The connection check's figure (``deployment.connection_budget``) bounds what a
    loaded ``serve`` really holds: the web pool filled by a burst of posts and an open
    stream, every cluster process and every sweeper thread connected. The control: the
    figure it used to give (web + workers + 3) is below what serve holds."""
    import threading
    import urllib.request

    from workforce_project.deployment import connection_budget

    web, workers = 3, 2
    server = start_server(tree(tmp_path / "tree"), env={"WORKFORCE_WEB_CONCURRENCY": str(web), "WORKFORCE_Q_WORKERS": "2"})
    stream = urllib.request.urlopen(f"{server.base}/api/sessions/eng.standup/stream?userId=u_42", timeout=30)
    post_and_wake(server, 0)  # the cluster's processes have booted and connected
    posts = [
        threading.Thread(
            target=server.call,
            args=("POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": f"burst {n}"}}),
        )
        for n in range(12)
    ]
    for t in posts:
        t.start()
    for t in posts:
        t.join(timeout=90)
    time.sleep(3)  # every sweeper thread has made its first pass
    holding = held(server.env["DATABASE_URL"])
    stream.close()
    budget = connection_budget(web_concurrency=web, cluster_workers=workers)
    assert holding <= budget.total, (holding, budget)
    assert holding > web + workers + 3, holding  # the old figure: too low
