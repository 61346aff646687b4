"""Several machines, shown working (issue 26 item 1; docs/nodes.md): two web nodes
(``serve --no-cluster``) and two worker nodes (``manage.py work``), each with its own
``WORKFORCE_VAR_DIR``, on one PostgreSQL database and one Redis broker, with
``WORKFORCE_MULTI_NODE=true``.

Posts are spread across both web nodes while a stream on the first watches the mailbox;
under that load a worker node and then the second web node are killed as a machine dies
(``SIGKILL``, every process at once). A post whose answer the client lost is sent again to
the other web node with the same ``Idempotency-Key``. At the end every post is in the
transcript once, every seat answered each post exactly once (one answer line, one
completed turn), and the stream on the first node saw the posts made on the second.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, Server, transcript, wait_for
from tests.e2e.sse import SseStream

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

REDIS_URL = os.environ.get("WORKFORCE_TEST_REDIS_URL", "redis://127.0.0.1:6379/5")
CACHE_URL = os.environ.get("WORKFORCE_TEST_CACHE_URL", "redis://127.0.0.1:6379/7")
SEATS = ("alpha", "beta")
POSTS = 40
# Each turn takes this long (the scripted model's /sleep), so the kills land mid-turn.
TURN_MS = 300
ANSWERER = """---
description: {name}.
model: embedded/scripted
tools: [post-to-mailbox]
---

Answer every post.
/tool post-to-mailbox {{"mailbox": "{{mailbox}}", "body": "{name} answers: {{body}}"}}
"""


def _redis():
    redis = pytest.importorskip("redis")
    clients = [redis.Redis.from_url(url) for url in (REDIS_URL, CACHE_URL)]
    try:
        for client in clients:
            client.ping()
    except redis.RedisError:
        pytest.skip(f"no Redis at {REDIS_URL}")
    return clients


def _tree(tmp_path: Path) -> Path:
    files = {"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Standup.", members=tuple(f"eng.{s}" for s in SEATS))}
    for seat in SEATS:
        files[f"teams/eng/workers/{seat}/WORKER.md"] = ANSWERER.format(name=seat)
    return write_tree(tmp_path / "tree", files)


class WorkerNode:
    """A ``manage.py work`` process: its pid, its cluster's (from its log), its log."""

    def __init__(self, name: str, root: Path, env: dict, tmp_path: Path):
        self.log = tmp_path / f"work-{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "work", "--root", str(root)],
            cwd=REPO,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        started = wait_for(self._cluster_pid, timeout=90, what=f"worker node {name}'s cluster", log=self.log)
        self.cluster_pid = started

    def _cluster_pid(self) -> int | None:
        if self.process.poll() is not None:
            raise AssertionError(f"work exited with {self.process.returncode}:\n{self.log.read_text()}")
        found = re.search(r"task cluster started \(pid (\d+)", self.log.read_text())
        return int(found.group(1)) if found and "running." in self.log.read_text() else None

    def die(self) -> None:
        """Die as its machine would: every process at once (the cluster is a process
        group of its own)."""
        os.killpg(self.cluster_pid, signal.SIGKILL)
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.die()


def _post(nodes: list[Server], i: int) -> tuple[str, str]:
    """Post ``post <i>`` on node ``i % 2``; a post whose answer is lost (its node died) is
    sent again to the next node that answers, with the same Idempotency-Key. Returns
    ``(post id, the node's base that answered)``."""
    body = {"userId": "u_42", "input": {"body": f"post {i}\n/sleep {TURN_MS}"}}
    key = f"multi-node-post-{i}"
    for attempt in range(20):
        node = nodes[(i + attempt) % len(nodes)]
        try:
            answer = node.call("POST", "/api/flows/mailbox/eng.standup/actions/post", body, headers={"Idempotency-Key": key})
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.2)
            continue
        assert answer.status == 202, answer.body
        return answer.body["output"]["id"], node.base
    raise AssertionError(f"post {i} was not accepted by any web node")


def _rows(url: str, sql: str, params=()) -> list[tuple]:
    import psycopg

    with closing(psycopg.connect(url, autocommit=True)) as conn:
        return conn.execute(sql, params).fetchall()


def test_two_web_nodes_and_two_worker_nodes_lose_nothing_and_run_nothing_twice(start_server, server_database, tmp_path):
    if "DATABASE_URL" not in server_database:
        pytest.skip("needs PostgreSQL")
    broker, cache = _redis()
    broker.flushdb()
    cache.flushdb()
    root = _tree(tmp_path)
    vaults = tmp_path / "shared-vaults"
    vaults.mkdir()
    shared = {
        **server_database,
        "WORKFORCE_MULTI_NODE": "true",
        "WORKFORCE_BROKER_URL": REDIS_URL,
        "WORKFORCE_CACHE_URL": CACHE_URL,
        "DJANGO_SECRET_KEY": "one-key-every-node-of-this-test-shares",
        "WORKFORCE_VAULT_DIR": str(vaults),
        "WORKFORCE_Q_WORKERS": "2",
        # Recovery at test speed: lost work is looked for every 2 s, and a task known
        # lost is enqueued again 3 s after its enqueue (defaults 15 s and the retry, 180 s).
        # A task the dead worker node had taken but not started holds no claim: it is
        # known lost once the queue has passed it by a lease, the cluster's timeout + 2 s
        # (default 122 s), here 22 s (turns take 0.6 s).
        "WORKFORCE_SWEEP_SECONDS": "2",
        "WORKFORCE_REQUEUE_SECONDS": "3",
        "WORKFORCE_Q_TIMEOUT": "20",
        "WORKFORCE_Q_RETRY": "30",
        "WORKFORCE_TURN_TIMEOUT": "15",
        "WORKFORCE_MODEL_TIMEOUT": "10",
        "WORKFORCE_STOP_SECONDS": "3",
    }

    def node_env(name: str) -> dict:
        return {**shared, "WORKFORCE_VAR_DIR": str(tmp_path / f"var-{name}")}

    web = [start_server(root, "--no-cluster", env=node_env(f"web{n}")) for n in (1, 2)]
    base_env = {k: v for k, v in web[0].env.items() if k != "WORKFORCE_VAR_DIR"}
    workers = [WorkerNode(f"w{n}", root, {**base_env, **node_env(f"w{n}")}, tmp_path) for n in (1, 2)]
    try:
        for server in web:
            wait_for(lambda s=server: s.call("GET", "/api/").status == 200, timeout=30, what="a web node answering")
            text = server.log.read_text()
            assert "broker: redis 127.0.0.1:6379/5" in text or "broker: redis" in text
            assert "warning: the API's throttles" not in text  # WORKFORCE_CACHE_URL shares them
        # Each node made nothing of its own that another would need: no secret key file.
        for name in ("web1", "web2", "w1", "w2"):
            assert not (tmp_path / f"var-{name}" / "secret_key").exists()

        # A stream on web node 1 sees a post made on web node 2.
        stream = SseStream(web[0].base, "/api/sessions/eng.standup/stream?after=0", timeout=60)
        assert stream.status == 200, stream.body
        probe = web[1].call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": "probe from node 2"}}
        )
        assert probe.status == 202, probe.body
        seen_at = None
        deadline = time.monotonic() + 10
        while seen_at is None and time.monotonic() < deadline:
            event = stream.next_event(timeout=max(0.1, deadline - time.monotonic()))
            if "probe from node 2" in json.dumps(event.data):
                seen_at = time.monotonic()
        assert seen_at is not None, "web node 1's stream never saw the post made on web node 2"

        # Load: posts spread across both web nodes, from 4 posters at once; a worker node
        # dies after a third of them, the second web node after two thirds.
        posted: dict[int, tuple[str, str]] = {}
        lock = threading.Lock()
        next_post = iter(range(POSTS))
        kills = {POSTS // 3: lambda: workers[0].die(), 2 * POSTS // 3: lambda: web[1].process.send_signal(signal.SIGKILL)}

        def poster() -> None:
            while True:
                with lock:
                    i = next(next_post, None)
                if i is None:
                    return
                kill = kills.pop(i, None)
                if kill is not None:
                    kill()
                result = _post(web, i)
                with lock:
                    posted[i] = result
                time.sleep(0.05)

        threads = [threading.Thread(target=poster) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert sorted(posted) == list(range(POSTS)), "a post was never accepted"
        assert web[1].process.wait(timeout=10) == -signal.SIGKILL
        assert {base for _, base in posted.values()} == {web[0].base, web[1].base}, "posts did not land on both web nodes"

        # None lost: every seat answers every post, on the surviving worker node.
        url = server_database["DATABASE_URL"]

        def answer_counts() -> Counter:
            counts: Counter = Counter()
            for line in transcript(web[0], "eng.standup"):
                found = re.match(r"(\w+) answers: .*\bpost (\d+)\b", line["body"]) if line.get("seatAuthored") else None
                if found:
                    counts[(found.group(1), int(found.group(2)))] += 1
            return counts

        deadline = time.monotonic() + 90
        while len(counts := answer_counts()) < POSTS * len(SEATS):
            if time.monotonic() > deadline:
                missing = sorted({(s, i) for s in SEATS for i in range(POSTS)} - set(counts))
                open_work = _rows(
                    url,
                    "SELECT post_id, member, status, attempts, requeues, claim_token, lease_until, enqueued_at, now() "
                    "FROM seats_delivery WHERE status <> 'done'",
                )
                tail = workers[1].log.read_text()[-4000:]
                raise AssertionError(f"unanswered: {missing}\nopen deliveries: {open_work}\n--- work-w2.log ---\n{tail}")
            time.sleep(0.5)
        # None run twice: one answer line and one completed turn per post and seat.
        assert set(counts.values()) == {1}, [key for key, n in counts.items() if n > 1]
        posts = [line for line in transcript(web[0], "eng.standup") if not line.get("seatAuthored")]
        assert Counter(re.match(r"post (\d+)", p["body"]).group(1) for p in posts if p["body"].startswith("post ")) == Counter(
            {str(i): 1 for i in range(POSTS)}
        ), "a post landed twice (its retry was not deduplicated)"
        turns = _rows(
            url,
            "SELECT s.session_id, r.input->>'postId', COUNT(*) FROM workforce_request r "
            "JOIN workforce_session s ON s.id = r.session_id "
            "WHERE r.action = 'onMailboxPost' AND r.status = 'completed' GROUP BY 1, 2 HAVING COUNT(*) > 1",
        )
        assert turns == [], f"turns completed twice: {turns}"
        stream.close()
    finally:
        for worker in workers:
            worker.stop()
        broker.flushdb()
        cache.flushdb()
