"""Stopping under a backlog: ``serve`` (web server and cluster) exits within
``WORKFORCE_STOP_SECONDS`` of a SIGTERM even while slow turns are queued, and the work it
cut short is not lost: started again, every post is answered once per seat."""

from __future__ import annotations

import signal
import time

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import session_requests, wait_for

pytestmark = pytest.mark.e2e

STOP_SECONDS = 3
MARGIN = 5  # the last kill and the exit, on a busy machine
TURN_MS = 4000  # each turn's model call (embedded/scripted obeys /sleep; echo never does)
POSTS = 4
SEATS = ("eng.alpha", "eng.beta")

LISTENER = "---\ndescription: {name}.\nmodel: embedded/scripted\n---\n\nYou listen.\n"


def tree(root):
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts.", members=SEATS),
            "teams/eng/workers/alpha/WORKER.md": LISTENER.format(name="Alpha"),
            "teams/eng/workers/beta/WORKER.md": LISTENER.format(name="Beta"),
        },
    )


def completed_turns(server, seat: str) -> list[dict]:
    return [r for r in session_requests(server, f"eng.standup:{seat}", "onMailboxPost") if r["status"] == "completed"]


@pytest.fixture(params=["orm", "redis"])
def broker_env(request):
    """The broker under test: django-q2's ORM broker, or Redis (db 2, emptied first)."""
    if request.param == "orm":
        return {}
    redis = pytest.importorskip("redis")
    url = "redis://127.0.0.1:6379/2"
    try:
        client = redis.from_url(url, socket_connect_timeout=1)
        client.delete("django_q:workforce:q")
    except redis.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    return {"WORKFORCE_BROKER_URL": url}


def test_serve_stops_within_the_bound_under_a_backlog_and_loses_nothing(start_server, tmp_path, broker_env):
    root = tree(tmp_path / "tree")
    env = {
        **broker_env,
        "WORKFORCE_STOP_SECONDS": str(STOP_SECONDS),
        # Short leases and retries so that the work cut short comes back within the test.
        "WORKFORCE_Q_TIMEOUT": "10",
        "WORKFORCE_Q_RETRY": "15",
        "WORKFORCE_TURN_TIMEOUT": "8",
        "WORKFORCE_MODEL_TIMEOUT": "6",
        "WORKFORCE_SWEEP_SECONDS": "2",
    }
    server = start_server(root, env=env)

    # The server answers before it has written every line of its start (the web server's
    # own lines come as uvicorn starts): read them once the last one is there.
    def start_lines() -> str | None:
        text = server.log.read_text()
        return text if "\nserving " in text else None

    started_log = wait_for(start_lines, timeout=15, what="serve's start lines", log=server.log)
    assert "\ndatabase: " in started_log and "\nbroker: " in started_log
    if broker_env:
        assert "\nbroker: redis 127.0.0.1:6379/2\n" in started_log
    if "DATABASE_URL" in server.env:  # PostgreSQL: the web server's connections are pooled
        assert "\nweb connections: pooled, at most 16\n" in started_log
    for n in range(POSTS):
        answer = server.call(
            "POST",
            "/api/flows/mailbox/eng.standup/actions/post",
            {"userId": "u_42", "input": {"body": f"status {n}\n/sleep {TURN_MS}"}},
        )
        assert answer.status == 202, answer.body
    # The cluster is working the backlog: a first turn is done, the rest wait behind it.
    wait_for(lambda: any(completed_turns(server, seat) for seat in SEATS), timeout=90, what="a first turn", log=server.log)
    assert sum(len(completed_turns(server, seat)) for seat in SEATS) <= POSTS * len(SEATS) - 4

    started = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=60)
    took = time.monotonic() - started
    print(f"serve stopped {took:.1f}s after SIGTERM ({broker_env or 'orm'})")
    assert took <= STOP_SECONDS + MARGIN, f"serve took {took:.1f}s to stop:\n{server.log.read_text()[-4000:]}"

    again = start_server(root, env=env)

    def all_answered():
        turns = {seat: completed_turns(again, seat) for seat in SEATS}
        return turns if all(len(t) >= POSTS for t in turns.values()) else None

    turns = wait_for(all_answered, timeout=120, what="every post answered by every seat", log=again.log)
    for seat, done in turns.items():
        # Each post's turn ran to completion exactly once per seat.
        assert len(done) == POSTS, (seat, [r["requestId"] for r in done])


def _qcluster_processes(pgid: int) -> list[int]:
    """Pids of processes in process group ``pgid`` (the cluster's), from /proc."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == pgid:
                with open(f"/proc/{entry}/stat") as stat:
                    if stat.read().split(") ", 1)[1].split()[0] != "Z":  # zombies hold nothing
                        found.append(int(entry))
        except (ProcessLookupError, FileNotFoundError, PermissionError, IndexError):
            continue
    return found


def test_a_cluster_whose_main_process_was_killed_leaves_no_worker_behind(start_server, tmp_path):
    import os
    import subprocess

    # Two workers: processes of their own (with one, the default, it is a thread of the sentinel's).
    server = start_server(tree(tmp_path / "tree"), env={"WORKFORCE_STOP_SECONDS": str(STOP_SECONDS), "WORKFORCE_Q_WORKERS": "2"})
    # serve starts its cluster once the web server answers: wait for it to be there.
    children = wait_for(
        lambda: subprocess.run(
            ["pgrep", "-P", str(server.process.pid), "-f", "qcluster"], capture_output=True, text=True
        ).stdout.split(),
        timeout=60,
        what="serve's cluster process",
        log=server.log,
    )
    cluster = int(children[0])
    wait_for(lambda: len(_qcluster_processes(cluster)) > 1, timeout=60, what="the cluster's workers", log=server.log)
    os.kill(cluster, signal.SIGKILL)  # its main process only
    # Each process of the cluster dies with its parent (issue 22, item 10): the sentinel
    # with the main process, the workers with the sentinel, long before serve stops.
    wait_for(lambda: not _qcluster_processes(cluster) or None, timeout=5, what="the cluster's processes gone", log=server.log)
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=STOP_SECONDS + MARGIN)
    wait_for(lambda: not _qcluster_processes(cluster) or None, timeout=5, what="no cluster process left", log=server.log)
