"""An interrupted turn stalls its seat for seconds, not minutes (issue 22, item 11), on a
real ``serve`` and its cluster, on PostgreSQL, with the default queue timings (a turn's
lease 122 s, the broker's retry 180 s):

- a cluster worker killed (``kill -9``) in the middle of a seat's turn: the worker
  django-q2 spawns in its place frees the dead turn's slot and claim at once, and the
  seat's turns resume within 10 s (the killed turn runs again, once);
- a database blip (connections refused and every backend terminated for 4 s) during a
  turn: the turn runs again and the seat's next post runs within 10 s of the database
  coming back;
- the Redis broker losing its queue (``FLUSHDB`` of db 11 while tasks wait in it): the
  deliveries it held run within 10 s.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import closing
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

LISTENER = "---\ndescription: {name}.\nmodel: embedded/scripted\n---\n\nListen.\n"
REDIS_URL = "redis://127.0.0.1:6379/11"


def tree(tmp_path, mailboxes: dict[str, str]):
    files = {}
    for mailbox, seat in mailboxes.items():
        files[f"teams/eng/mailboxes/{mailbox}/MAILBOX.md"] = mailbox_md(f"{mailbox}.", members=(f"eng.{seat}",))
        files[f"teams/eng/workers/{seat}/WORKER.md"] = LISTENER.format(name=seat)
    return write_tree(tmp_path / "tree", files)


def db(server):
    import psycopg

    return closing(psycopg.connect(server.env["DATABASE_URL"], autocommit=True))


def rows(server, sql: str, params=()) -> list[tuple]:
    with db(server) as conn:
        return conn.execute(sql, params).fetchall()


def post(server, mailbox: str, body: str) -> str:
    answer = server.call("POST", f"/api/flows/mailbox/eng.{mailbox}/actions/post", {"userId": "u_42", "input": {"body": body}})
    assert answer.status == 202, answer.body
    return answer.body["output"]["id"]


def delivery(server, post_id: str) -> tuple | None:
    """``(status, claim_token, attempts)`` of the post's one delivery."""
    found = rows(server, "SELECT status, claim_token, attempts FROM seats_delivery WHERE post_id = %s", (post_id,))
    return found[0] if found else None


def done(server, *post_ids: str) -> bool:
    found = rows(server, "SELECT status FROM seats_delivery WHERE post_id = ANY(%s)", (list(post_ids),))
    return len(found) == len(post_ids) and all(s == "done" for (s,) in found)


def turns_of(server, post_id: str) -> list[str]:
    """The statuses of the seat's turns on the post (``onMailboxPost`` requests), oldest first."""
    return [
        s
        for (s,) in rows(
            server,
            "SELECT status FROM workforce_request WHERE action = 'onMailboxPost' AND input->>'postId' = %s ORDER BY id",
            (post_id,),
        )
    ]


def ready(server, mailbox: str = "standup") -> None:
    """Wait until the cluster answers a post (its workers are up)."""
    first = post(server, mailbox, "hello")
    wait_for(lambda: done(server, first), timeout=60, what="the cluster's first delivery", log=server.log)


def a_turn_running_and_one_waiting(server) -> tuple[str, str, str]:
    """Post 1 (a 3 s turn) running and post 2 waiting for the seat: ``(post 1's id, its
    claim token, post 2's id)``."""
    first = post(server, "standup", "post 1\n/sleep 3000")
    token = wait_for(
        lambda: (d := delivery(server, first)) and d[0] == "running" and d[1] and d[1],
        timeout=20,
        what="post 1's turn running",
        log=server.log,
    )
    second = post(server, "standup", "post 2")
    wait_for(lambda: rows(server, "SELECT COUNT(*) FROM seats_turnwait")[0][0], timeout=20, what="post 2 waiting for the seat")
    return first, token, second


def test_a_worker_killed_mid_turn_frees_its_seat_at_once(start_server, tmp_path):
    # Every turn in the cluster (none in serve's web process): a worker's death is the case.
    server = start_server(tree(tmp_path, {"standup": "alpha"}), env={"WORKFORCE_Q_WORKERS": "2", "WORKFORCE_INLINE_TURNS": "0"})
    ready(server)
    first, token, second = a_turn_running_and_one_waiting(server)
    worker = int(token[6:12], 16)  # the holder's pid (workforce.holders)
    assert delivery(server, first)[0] == "running", "post 1's turn ended before the kill"
    os.kill(worker, signal.SIGKILL)
    (killed_at,) = rows(server, "SELECT now()")[0]

    def a_turn_after_the_kill():
        return rows(
            server,
            "SELECT COUNT(*) FROM workforce_request WHERE action = 'onMailboxPost' AND input->>'postId' = ANY(%s) "
            "AND created_at > %s",
            ([first, second], killed_at),
        )[0][0]

    wait_for(a_turn_after_the_kill, timeout=10, what="the seat's next turn within 10 s of the kill", log=server.log)
    wait_for(lambda: done(server, first, second), timeout=20, what="both posts answered", log=server.log)
    assert turns_of(server, first) == ["aborted", "completed"]  # the killed turn ran again, once
    assert turns_of(server, second) == ["completed"]
    assert "released the holds of processes that are gone" in server.log.read_text()


def test_serve_killed_mid_turn_in_its_web_process_runs_the_turn_again_once_after_a_restart(start_server, tmp_path):
    """The web process runs committed turns itself (workforce.inline): killed with one
    running and another waiting for the seat, the next serve on the same database runs
    both, the killed turn again exactly once, within seconds of its start."""
    root = tree(tmp_path, {"standup": "alpha"})
    server = start_server(root, env={"WORKFORCE_Q_WORKERS": "2"})
    ready(server)
    first, token, second = a_turn_running_and_one_waiting(server)
    assert int(token[6:12], 16) == server.process.pid, "post 1's turn is not in the web process"
    assert delivery(server, first)[0] == "running", "post 1's turn ended before the kill"
    server.process.send_signal(signal.SIGKILL)
    server.process.wait(10)
    again = start_server(root, env={"WORKFORCE_Q_WORKERS": "2"})
    started = time.monotonic()
    wait_for(lambda: done(again, first, second), timeout=30, what="both posts answered after the restart", log=again.log)
    assert time.monotonic() - started <= 20
    assert turns_of(again, first) == ["aborted", "completed"]  # the killed turn ran again, once
    assert turns_of(again, second) == ["completed"]


def _admin(server):
    import psycopg

    parts = urlsplit(server.env["DATABASE_URL"])
    return closing(psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True))


def test_a_database_blip_mid_turn_resumes_within_seconds(start_server, tmp_path):
    server = start_server(tree(tmp_path, {"standup": "alpha"}), env={"WORKFORCE_Q_WORKERS": "2"})
    ready(server)
    name = urlsplit(server.env["DATABASE_URL"]).path.lstrip("/")
    first = post(server, "standup", "post 1\n/sleep 2000")
    wait_for(lambda: (d := delivery(server, first)) and d[0] == "running", timeout=20, what="post 1's turn running")
    with _admin(server) as admin:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        try:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
            time.sleep(4)  # the turn's model call ends meanwhile: its settle meets the outage
        finally:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    back = time.monotonic()
    wait_for(lambda: done(server, first), timeout=10, what="post 1 answered within 10 s of the database", log=server.log)
    assert time.monotonic() - back <= 10

    def post_2():
        # The web process's pooled connections may still answer 500 once (item 12 is
        # another fix's): this test is about the cluster, so the client tries again.
        answer = server.call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": "post 2"}}
        )
        return answer.body["output"]["id"] if answer.status == 202 else None

    second = wait_for(post_2, timeout=5, what="post 2 taken")
    wait_for(lambda: done(server, second), timeout=10, what="post 2 answered", log=server.log)
    assert time.monotonic() - back <= 10
    assert turns_of(server, first)[-1] == "completed" and turns_of(server, first).count("completed") == 1


def test_deliveries_the_redis_broker_lost_run_within_seconds(start_server, tmp_path):
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except Exception:
        pytest.skip("no Redis on 127.0.0.1:6379")
    client.flushdb()  # db 11 is this test's
    try:
        server = start_server(
            tree(tmp_path, {"standup": "alpha", "desk": "beta"}),
            # The fair scheduling's bounds off: with them the desk's deliveries would wait as
            # held rows, not as tasks in Redis, and this test is about tasks the broker loses;
            # and no turn in serve's web process (workforce.inline): each task goes to Redis.
            env={
                "WORKFORCE_INLINE_TURNS": "0",
                "WORKFORCE_Q_WORKERS": "1",
                "WORKFORCE_BROKER_URL": REDIS_URL,
                "WORKFORCE_DELIVERY_SESSION_TASKS": "0",
                "WORKFORCE_DELIVERY_ORG_TASKS": "0",
            },
        )
        ready(server, "desk")
        busy = post(server, "standup", "hold the worker\n/sleep 4000")
        wait_for(lambda: (d := delivery(server, busy)) and d[0] == "running", timeout=20, what="the one worker busy")
        waiting = [post(server, "desk", f"desk {n}") for n in range(6)]
        queue = "django_q:workforce:q"
        wait_for(lambda: client.llen(queue) >= 3, timeout=10, what="tasks waiting in Redis")
        lost = client.llen(queue)
        client.flushdb()  # the broker lost its queue
        flushed = time.monotonic()
        wait_for(
            lambda: done(server, busy, *waiting),
            timeout=4 + 10,  # the busy turn's rest, then 10 s
            what=f"the {lost} deliveries the broker lost",
            log=server.log,
        )
        assert time.monotonic() - flushed <= 14
        for post_id in waiting:
            assert turns_of(server, post_id) == ["completed"]
    finally:
        client.flushdb()
        client.close()
