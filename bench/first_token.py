"""First token on the stream: how soon a seat's answer starts to show on an open live stream
(its first ``partial-text`` event) against how soon its durable line lands (the line's
event, what a page waited for before), for the same posts in one run, on SQLite and on
PostgreSQL (issue 25 item 10, "the stream's first-token latency").

Setup per database: a throwaway database (a temp SQLite file; a fresh PostgreSQL database
on the server ``--postgres`` names, dropped afterwards), a routed one-member mailbox whose
seat runs ``embedded/scripted`` writing one word every ``--pace`` ms (a model that streams:
its reply is the post's answer, handed to the mailbox when the turn ends), and a real
``manage.py serve`` with its cluster on a loopback port. One stream is opened on the
mailbox's session; each post (through the HTTP API, one at a time) is timed from just
before its POST to its first ``partial-text`` event and to its answer line's event (both
when their blank line reached the client; one clock).

Usage: ``python bench/first_token.py [--posts 20] [--pace 50] [--db sqlite,postgres]
[--postgres postgres://postgres@127.0.0.1:5432/postgres]``.

Prints per database n, the median and p95 of both times in milliseconds, the median of
their ratio (first token / line: the baseline is the line, in the same run), and the
number of ``partial-text`` events per answer.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._breakit import percentile  # noqa: E402
from bench._db import no_throttles, scratch_postgres  # noqa: E402

no_throttles()
from tests.e2e.sse import SseStream  # noqa: E402

MAILBOX = "bench.desk"
SEAT = "bench.lead"


def write_tree(root: Path) -> Path:
    files = {
        "teams/bench/mailboxes/desk/MAILBOX.md": f"""\
            ---
            description: Ask anything.
            members: [{SEAT}]
            routing:
              fallback: {SEAT}
            ---

            Benchmark.
            """,
        "teams/bench/workers/lead/WORKER.md": """\
            ---
            description: Answers.
            model: embedded/scripted
            ---

            Answer.
            """,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base: str, body: str) -> None:
    data = json.dumps({"userId": "u_b", "input": {"body": body}}).encode()
    request = urllib.request.Request(
        f"{base}/api/flows/mailbox/{MAILBOX}/actions/post", data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202, answer.status


def measure(db: str, env_db: dict, *, posts: int, pace: int) -> list[tuple[float, float, int]]:
    """One database's run: per post ``(first token ms, line ms, partial-text events)``."""
    work = Path(tempfile.mkdtemp(prefix="wf_first_token_"))
    root = write_tree(work / "tree")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(env_db)
    env.update({"WORKFORCE_VAR_DIR": str(work / "var"), "WORKFORCE_LOG_LEVEL": "WARNING"})
    log = (work / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if serve.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start on {db}:\n{(work / 'serve.log').read_text()}") from None
                time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        stream = SseStream(base, f"/api/sessions/{MAILBOX}/stream?itemTypes=component", timeout=60)
        assert stream.status == 200, stream.body
        post(base, "warm up")  # the seat's conversation and the cluster's first turn
        _answer(stream)
        rows = []
        for n in range(posts):
            sent = time.time()
            post(base, f"question {n}: is the build green today?\n/pace {pace}")
            first, line, events = _answer(stream)
            rows.append(((first - sent) * 1000, (line - sent) * 1000, events))
        stream.close()
        return rows
    finally:
        serve.send_signal(2)
        try:
            serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            serve.kill()
        log.close()


def _answer(stream: SseStream) -> tuple[float, float, int]:
    """Read until the answer's preview ends, or its line when none was sent: (first
    partial-text time, answer line time, partial-text events)."""
    first = line = 0.0
    events = 0
    while True:
        event = stream.next_event(timeout=60)
        if event.event == "partial-text":
            if event.data["done"]:
                return first or line, line, events
            events += 1
            first = first or event.received_at
        elif event.data and event.data.get("data", {}).get("seatAuthored"):
            line = event.received_at
            if not events:  # written whole (no preview sent): the line is all there is
                return line, line, 0


def report(db: str, rows: list[tuple[float, float, int]]) -> str:
    firsts = [r[0] for r in rows]
    lines = [r[1] for r in rows]
    ratio = percentile([r[0] / r[1] for r in rows], 0.5)
    return (
        f"{db:9} n={len(rows):3}  first token p50={percentile(firsts, 0.5):7.1f} p95={percentile(firsts, 0.95):7.1f} ms  "
        f"line p50={percentile(lines, 0.5):7.1f} p95={percentile(lines, 0.95):7.1f} ms  "
        f"first/line p50={ratio:.2f}  events/answer p50={percentile([float(r[2]) for r in rows], 0.5):.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--pace", type=int, default=50, help="Milliseconds the seat's model takes per word.")
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--postgres", default=os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    print(f"{args.posts} posts, one at a time; the seat writes a word every {args.pace} ms (about 12 words)")
    for db in args.db.split(","):
        if db == "sqlite":
            rows = measure(db, {}, posts=args.posts, pace=args.pace)
        elif db == "postgres":
            with scratch_postgres(args.postgres) as url:
                rows = measure(db, {"DATABASE_URL": url}, posts=args.posts, pace=args.pace)
        else:
            raise SystemExit(f"--db takes sqlite and postgres, not {db!r}")
        print(report(db, rows))


if __name__ == "__main__":
    main()
