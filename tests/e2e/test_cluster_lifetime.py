"""The task cluster lives and dies with its ``serve`` (issue 22, item 10), on a real
``serve``: after ``kill -9`` of serve alone its whole cluster is gone within seconds (it
kept running under PID 1 before, and the next serve started another), and a second serve
on the same database refuses, naming the live cluster, rather than run a second one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, free_port, wait_for
from tests.e2e.test_bounded_stop import _qcluster_processes

pytestmark = pytest.mark.e2e

LISTENER = "---\ndescription: Alpha.\nmodel: embedded/echo\n---\n\nYou listen.\n"


# Two workers: each a process of its own, forked from the sentinel (with one, the default,
# the worker is a thread of the sentinel's process and the cluster is a single process),
# so that what happens to a cluster's worker processes is seen.
PROCESSES = {"WORKFORCE_Q_WORKERS": "2"}


def tree(root):
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": LISTENER,
        },
    )


def cluster_of(server) -> int:
    """The pid of serve's cluster main process (its process group), once its workers run."""
    found = wait_for(
        lambda: subprocess.run(
            ["pgrep", "-P", str(server.process.pid), "-f", "qcluster"], capture_output=True, text=True
        ).stdout.split(),
        timeout=60,
        what="serve's cluster",
        log=server.log,
    )
    cluster = int(found[0])
    wait_for(lambda: len(_qcluster_processes(cluster)) > 2, timeout=60, what="the cluster's workers", log=server.log)
    return cluster


def test_kill_9_of_serve_ends_its_whole_cluster_and_the_next_serve_runs_one(start_server, tmp_path):
    root = tree(tmp_path / "tree")
    first = start_server(root, env={"WORKFORCE_STOP_SECONDS": "3", **PROCESSES})
    cluster = cluster_of(first)

    os.kill(first.process.pid, signal.SIGKILL)
    first.process.wait()
    killed = time.monotonic()
    wait_for(lambda: not _qcluster_processes(cluster), timeout=10, what="no process of the killed serve's cluster", log=first.log)
    gone_after = time.monotonic() - killed
    assert f"serve (pid {first.process.pid}) is gone: stopping its task cluster" in first.log.read_text()

    again = start_server(root, env=PROCESSES)
    assert cluster_of(again) != cluster
    assert again.call("GET", "/api/").status == 200
    print(f"cluster gone {gone_after:.1f}s after kill -9 of serve")


def test_kill_9_of_the_cluster_alone_and_serve_starts_another_that_runs_the_work(start_server, tmp_path):
    """serve went on answering 202 with no cluster at all after its cluster's main process
    was killed (nothing ran the work, nothing said so): it starts another, and says so."""
    root = tree(tmp_path / "tree")
    server = start_server(root, env=PROCESSES)
    cluster = cluster_of(server)

    os.kill(cluster, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: not _qcluster_processes(cluster), timeout=10, what="no process of the killed cluster", log=server.log)
    again = cluster_of(server)
    assert again != cluster
    answer = server.call(
        "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_1", "input": {"body": "still there?"}}
    )
    assert answer.status == 202, answer.body
    wait_for(
        lambda: "eng.alpha heard:" in json.dumps(server.call("GET", "/api/sessions/eng.standup:eng.alpha/items?limit=1000").body),
        timeout=60,
        what="the seat's turn run by the new cluster",
        log=server.log,
    )
    log = server.log.read_text()
    assert f"task cluster (pid {cluster}) ended on its own" in log and f"task cluster started again (pid {again})" in log
    assert server.process.poll() is None
    print(f"a new cluster answered {time.monotonic() - killed:.1f}s after kill -9 of the old one")


def test_a_second_serve_beside_a_live_cluster_refuses_naming_it(start_server, tmp_path):
    root = tree(tmp_path / "tree")
    first = start_server(root, env=PROCESSES)
    cluster = cluster_of(first)

    port = free_port()
    second = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)],
        cwd=REPO,
        env={**first.env, "WORKFORCE_STOP_SECONDS": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = second.stdout + second.stderr
    assert second.returncode == 1, out
    assert "a task cluster is already running on this database" in out, out
    assert f"workforce cluster pid {cluster} serve {first.process.pid}" in out, out  # what is running, and whose
    assert "--no-cluster" in out
    assert "task cluster started" not in out  # it refused before starting one
    assert _qcluster_processes(cluster)  # the first runs on

    # A web server only (--no-cluster) may run beside it.
    beside = start_server(root, "--no-cluster")
    assert beside.call("GET", "/api/").status == 200


def test_a_serve_beside_a_worker_nodes_cluster_names_work_as_its_holder(server_database, tmp_path):
    """The refusal names the command whose cluster holds the lock (``work``, not ``serve``),
    and ``work`` says its one worker in the singular."""
    import re

    root = tree(tmp_path / "tree")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update({**server_database, "PYTHONUNBUFFERED": "1", "WORKFORCE_Q_WORKERS": "1", "WORKFORCE_STOP_SECONDS": "1"})
    log = tmp_path / "work.log"
    work = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "work", "--root", str(root)],
        cwd=REPO,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        # "running." once its cluster holds the lock (django-q2's sentinel starts after it).
        started = wait_for(
            lambda: (
                "running." in log.read_text()
                and re.search(r"worker: task cluster started \(pid (\d+), (.*)\)\n", log.read_text())
            ),
            timeout=90,
            what="the worker node's cluster",
            log=log,
        )
        cluster = int(started.group(1))
        assert started.group(2) == "1 worker"
        port = free_port()
        second = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = second.stdout + second.stderr
        assert second.returncode == 1, out
        assert f"workforce cluster pid {cluster} work {work.pid} on " in out, out
    finally:
        work.send_signal(signal.SIGTERM)
        work.wait(timeout=30)


@pytest.mark.postgres
def test_the_cluster_takes_its_lock_again_when_the_database_ended_its_session(start_server, tmp_path):
    """A PostgreSQL restart ends the session holding the advisory lock, and the lock with
    it: the cluster takes it again, so a later serve still finds it."""
    import psycopg

    server = start_server(tree(tmp_path / "tree"), env=PROCESSES)
    if "DATABASE_URL" not in server.env:
        pytest.skip("needs PostgreSQL")
    cluster = cluster_of(server)
    holders = (
        "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
        " AND l.granted AND a.application_name LIKE %s AND a.datname = current_database()"
    )
    name = f"workforce cluster pid {cluster} %"
    with psycopg.connect(server.env["DATABASE_URL"], autocommit=True) as conn:
        (held,) = wait_for(lambda: conn.execute(holders, (name,)).fetchall(), timeout=10, what="the cluster's lock")
        conn.execute("SELECT pg_terminate_backend(%s)", (held[0],))
        again = wait_for(
            lambda: [row for row in conn.execute(holders, (name,)).fetchall() if row[0] != held[0]],
            timeout=20,
            what="the lock taken again",
            log=server.log,
        )
    assert again
