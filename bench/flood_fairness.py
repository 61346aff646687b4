"""Another user's answer under one user's flood (issue 22 item 4): a real ``manage.py
serve`` (web server and task cluster) on the example tree, against a fresh PostgreSQL
database, over loopback HTTP.

1. Quiet: user ``u_quiet`` posts questions to the routed ``support.desk``, one at a time,
   and times each from the post's send to its answer line in the transcript.
2. Flood: user ``u_flood`` posts ``--flood`` posts to ``support.standup`` (four members:
   four seat turns each) at ``--rate`` posts per second, the issue's 300 posts in 38 s by
   default, while ``u_quiet`` goes on asking the desk; the samples stop when the flood's
   deliveries have drained (or after ``--max-samples``).

It prints both latencies (median, p95, max), their ratio (goal: flood median ≤ 2 × quiet
median), and for each flood sample how many of the flood's deliveries were still
unfinished when the answer came (an answer that waited for the flood to drain shows 0).
The API's throttles are off (the flood must land); ``--unbounded`` also turns the fair
scheduling's bounds off (``WORKFORCE_DELIVERY_SESSION_TASKS=0``, ``_ORG_TASKS=0``: every
delivery's task enqueued at its post, first in first out), the behaviour before.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/flood_fairness.py
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import no_throttles, scratch_postgres  # noqa: E402
from bench.post_and_wake import Server, free_port  # noqa: E402

DESK, STANDUP = "support.desk", "support.standup"
QUESTIONS = [
    "My laptop will not charge.",
    "I forgot my password and cannot sign in.",
    "The printer on floor two jams every morning.",
    "I was billed twice this month, can I get a refund?",
    "My phone does not connect to the office wifi.",
    "How do I change the email on my account?",
]


class Client:
    """A keep-alive JSON client for one thread."""

    def __init__(self, port: int):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = None if body is None else json.dumps(body)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                answer = self.conn.getresponse()
                return answer.status, json.loads(answer.read() or b"null")
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                if attempt:
                    raise
        raise AssertionError("unreachable")


def last_seq(client: Client, mailbox: str) -> int:
    seq = 0
    while True:
        status, page = client.call("GET", f"/api/mailboxes/{mailbox}/transcript?after={seq}&limit=1000")
        assert status == 200, page
        if not page["lines"]:
            return seq
        seq = page["lines"][-1]["seq"]


def ask(client: Client, after: int, n: int, timeout: float = 180.0) -> tuple[float, int]:
    """Post question ``n`` to the desk as ``u_quiet`` and wait for its answer line;
    ``(seconds from send to the answer seen, the answer's seq)``."""
    body = f"{QUESTIONS[n % len(QUESTIONS)]} (question {n})"
    start = time.monotonic()
    status, answer = client.call(
        "POST", f"/api/flows/mailbox/{DESK}/actions/post", {"userId": "u_quiet", "input": {"body": body}}
    )
    assert status == 202, answer
    deadline = start + timeout
    while time.monotonic() < deadline:
        status, page = client.call("GET", f"/api/mailboxes/{DESK}/transcript?after={after}&limit=1000")
        assert status == 200, page
        answers = [line for line in page["lines"] if line.get("seatAuthored")]
        if answers:
            return time.monotonic() - start, answers[-1]["seq"]
        time.sleep(0.02)
    raise SystemExit(f"question {n} had no answer within {timeout:.0f} s")


def flood_unfinished(db_url: str) -> int:
    """The flood mailbox's deliveries not yet done or failed."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM seats_delivery d JOIN workforce_session s ON s.id = d.mailbox_id "
            "WHERE s.session_id = %s AND d.status IN ('pending', 'running')",
            [STANDUP],
        ).fetchone()
    return int(row[0])


def delivery_stages(db_url: str, mailbox: str) -> str:
    """Medians over ``mailbox``'s finished deliveries: written → released (held), released →
    first claim (in the queue), first claim → finished (the turn)."""
    import psycopg

    with psycopg.connect(db_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT EXTRACT(EPOCH FROM d.enqueued_at - d.created_at), EXTRACT(EPOCH FROM d.started_at - d.enqueued_at), "
            "EXTRACT(EPOCH FROM d.finished_at - d.started_at) FROM seats_delivery d JOIN workforce_session s "
            "ON s.id = d.mailbox_id WHERE s.session_id = %s AND d.status = 'done' AND d.requeues = 0",
            [mailbox],
        ).fetchall()
    if not rows:
        return "none finished"
    held, queued, ran = (statistics.median(float(r[i]) * 1000 for r in rows) for i in range(3))
    return f"held {held:,.0f} ms, queued {queued:,.0f} ms, claim → finished {ran:,.0f} ms (medians of {len(rows)})"


def flood(port: int, posts: int, rate: float, out: dict) -> None:
    client = Client(port)
    start = time.monotonic()
    accepted = 0
    for n in range(posts):
        due = start + n / rate
        if (wait := due - time.monotonic()) > 0:
            time.sleep(wait)
        status, _ = client.call(
            "POST", f"/api/flows/mailbox/{STANDUP}/actions/post", {"userId": "u_flood", "input": {"body": f"status {n}: on it"}}
        )
        accepted += status == 202
    out["accepted"] = accepted
    out["post_seconds"] = time.monotonic() - start


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def describe(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:,.0f} ms, p95 {p95(values) * 1000:,.0f} ms, max {max(values) * 1000:,.0f} ms (n={len(values)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=300, help="posts the flooding user sends to support.standup")
    parser.add_argument("--rate", type=float, default=300 / 38, help="the flood's posts per second")
    parser.add_argument("--quiet", type=int, default=10, help="desk questions on the quiet server")
    parser.add_argument("--max-samples", type=int, default=40, help="desk questions during the flood, at most")
    parser.add_argument("--gap", type=float, default=0.5, help="seconds between one answer and the next question")
    parser.add_argument("--unbounded", action="store_true", help="no fair-scheduling bounds (the behaviour before)")
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL=postgres://… (a server where the bench may create and drop a database)")
    tmp = Path(tempfile.mkdtemp(prefix="wf_flood_"))
    with scratch_postgres(base) as db_url:
        env = {
            "DATABASE_URL": db_url,
            "WORKFORCE_VAR_DIR": str(tmp / "var"),
            "WORKFORCE_AUTH": "none",
            "WORKFORCE_LOG_LEVEL": "WARNING",
            "DJANGO_SETTINGS_MODULE": "workforce_project.settings",
        }
        no_throttles(env)
        if args.unbounded:
            env.update({"WORKFORCE_DELIVERY_SESSION_TASKS": "0", "WORKFORCE_DELIVERY_ORG_TASKS": "0"})
        os.environ.update(env)
        port = free_port()
        server = Server(["serve", "--addr", f"127.0.0.1:{port}"], tmp / "serve.log")
        try:
            client = Client(port)
            deadline = time.monotonic() + 180
            while True:
                try:
                    if client.call("GET", f"/api/mailboxes/{DESK}/transcript?limit=1")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or not server.alive():
                    raise SystemExit(f"serve did not start; its log:\n{server.tail()}")
                time.sleep(0.3)
            after = last_seq(client, DESK)
            for n in range(2):  # warm-up: the seats' conversations, the evaluator, the connections
                _, after = ask(client, after, n)
            quiet = []
            for n in range(args.quiet):
                took, after = ask(client, after, 100 + n)
                quiet.append(took)
                time.sleep(args.gap)
            out: dict = {}
            flooder = threading.Thread(target=flood, args=(port, args.flood, args.rate, out), daemon=True)
            flood_start = time.monotonic()
            flooder.start()
            time.sleep(3.0)  # a backlog builds first
            loud, backlog = [], []
            n = 200
            while len(loud) < args.max_samples:
                took, after = ask(client, after, n)
                n += 1
                left = flood_unfinished(db_url)
                loud.append(took)
                backlog.append(left)
                if not flooder.is_alive() and left == 0:
                    break
                time.sleep(args.gap)
            flooder.join()
            while (left := flood_unfinished(db_url)) > 0 and time.monotonic() - flood_start < 900:
                time.sleep(0.5)
            drained = time.monotonic() - flood_start
            stages = {mailbox: delivery_stages(db_url, mailbox) for mailbox in (STANDUP, DESK)}
        finally:
            server.stop()
    mode = "unbounded (every delivery queued at its post)" if args.unbounded else "fair (default bounds)"
    print(f"flood fairness, PostgreSQL, {mode}")
    print(
        f"  flood: {out.get('accepted', 0)} of {args.flood} posts accepted in {out.get('post_seconds', 0):.1f} s "
        f"({args.flood * 4} seat turns); its deliveries drained {drained:.1f} s after its first post"
    )
    for mailbox, text in stages.items():
        print(f"  {mailbox} deliveries: {text}")
    print(f"  quiet desk answer: {describe(quiet)}")
    print(f"  desk answer under the flood: {describe(loud)}")
    print(f"  the flood's unfinished deliveries when each answer came: {backlog}")
    ratio = statistics.median(loud) / statistics.median(quiet)
    print(f"  ratio, median under flood / quiet: {ratio:.2f} (p95: {p95(loud) / p95(quiet):.2f})")
    print(f"verdict: {'meets' if ratio <= 2 else 'misses'} the goal (≤ 2)")


if __name__ == "__main__":
    main()
