"""Time from an item's commit to its event on open live streams
(``GET /api/sessions/{id}/stream``), on SQLite and on PostgreSQL.

Setup per database: a throwaway database (a temp SQLite file; a fresh PostgreSQL database
on the server ``--postgres`` names, dropped afterwards), a one-mailbox tree, and a real
``manage.py serve --no-cluster`` on a loopback port. ``--streams`` event streams are opened
on the mailbox's session (more than ``WORKFORCE_WEB_CONCURRENCY`` by default, so the run
also shows streams beside the ordinary slots). A *writer* process (this script with
``--writer``, booted on the same tree and database, as a cluster worker is) posts to the
mailbox through the service, one post every ``--gap`` seconds: the item is stored by
another process than the one that streams it. The commit time is taken by the first
on-commit callback of the post's transaction, before the stream's NOTIFY is sent; an
event's time is when its blank line reached the client. Both clocks are this machine's.

Usage: ``python bench/stream_latency.py [--posts 60] [--streams 20] [--gap 0.1]
[--db sqlite,postgres] [--postgres postgres://postgres@127.0.0.1:5432/postgres]``.

Prints per database n, p50, p95 and max in milliseconds over every (post, stream) pair,
the ratio of the p95 to the goal and to the baseline (SQLite: its poll interval,
``WORKFORCE_STREAM_POLL_SECONDS``; PostgreSQL: the safety re-read it would wait without
NOTIFY, 5 s), and a one-line verdict against the goal: p95 <= 1,000 ms on both databases.
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._breakit import percentile  # noqa: E402
from bench._db import no_throttles, scratch_postgres  # noqa: E402

no_throttles()
from tests.e2e.sse import SseStream  # noqa: E402

GOAL_MS = 1000.0
MAILBOX = "bench.live"
POLL_SECONDS = 0.25  # the default WORKFORCE_STREAM_POLL_SECONDS
SAFETY_SECONDS = 5.0  # workforce.streams.SAFETY_READ_SECONDS


def write_tree(root: Path) -> Path:
    path = root / "teams/bench/mailboxes/live/MAILBOX.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        textwrap.dedent("""\
        ---
        description: Watched live.
        members: [bench.reader]
        ---

        Benchmark.
        """)
    )
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def writer(posts: int, gap: float) -> None:
    """The writer process: post ``posts`` times, printing ``{"seq", "committed"}`` per post."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
    import django

    django.setup()
    from django.db import transaction

    from workforce.models import DEFAULT_ORG_ID, Session
    from workforce.runtime import ensure_booted
    from workforce.sessions import do_run_action, ensure_organization

    ensure_booted()
    org = ensure_organization(DEFAULT_ORG_ID)
    session = Session.objects.get(organization=org, session_id=MAILBOX)
    for n in range(posts):
        stamp: dict[str, float] = {}
        with transaction.atomic():
            transaction.on_commit(lambda stamp=stamp: stamp.setdefault("committed", time.time()))  # first hook: before the NOTIFY
            do_run_action(org=org, kind="mailbox", session_id=MAILBOX, action="post", input={"body": f"p{n}"}, user_id="u_b")
        session.refresh_from_db(fields=["item_seq"])
        print(json.dumps({"seq": session.item_seq, "committed": stamp["committed"]}), flush=True)
        time.sleep(gap)


def measure(db: str, env_db: dict, *, posts: int, streams: int, gap: float) -> list[float]:
    """One database's run: the latencies in milliseconds of every (post, stream) pair."""
    work = Path(tempfile.mkdtemp(prefix="wf_stream_bench_"))
    root = write_tree(work / "tree")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(env_db)
    env.update({"WORKFORCE_VAR_DIR": str(work / "var"), "WORKFORCE_ROOT": str(root), "WORKFORCE_LOG_LEVEL": "WARNING"})
    env["WORKFORCE_STREAM_LIMIT"] = str(max(100, streams))
    env["WORKFORCE_ADDRESS_LIMIT"] = str(max(100, streams) + 10)  # every stream comes from 127.0.0.1
    log = (work / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "serve", "--no-cluster", "--addr", f"127.0.0.1:{port}"],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if serve.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start on {db}:\n{(work / 'serve.log').read_text()}") from None
                time.sleep(0.2)
        base = f"http://127.0.0.1:{port}"
        opened = [SseStream(base, f"/api/sessions/{MAILBOX}/stream?itemTypes=component") for _ in range(streams)]
        assert all(s.status == 200 for s in opened), [s.body for s in opened if s.status != 200]
        time.sleep(0.5)  # every stream has read its (empty) backlog and waits
        done = subprocess.run(
            [sys.executable, __file__, "--writer", "--posts", str(posts), "--gap", str(gap)],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"the writer failed on {db}:\n{done.stderr[-3000:]}")
        committed = {row["seq"]: row["committed"] for row in map(json.loads, done.stdout.split("\n")[:-1])}
        latencies = []
        for stream in opened:
            for event in stream.events(posts, timeout=30):
                latencies.append((event.received_at - committed[int(event.id)]) * 1000)
            stream.close()
        return latencies
    finally:
        serve.send_signal(2)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
        log.close()


def report(db: str, latencies: list[float], baseline_ms: float) -> tuple[str, bool]:
    p50, p95 = percentile(latencies, 0.5), percentile(latencies, 0.95)
    ok = p95 <= GOAL_MS
    line = (
        f"{db:10} n={len(latencies):5}  p50={p50:7.1f} ms  p95={p95:7.1f} ms  max={max(latencies):7.1f} ms  "
        f"p95/goal={p95 / GOAL_MS:.2f}  p95/baseline={p95 / baseline_ms:.2f} (baseline {baseline_ms:g} ms)"
    )
    return line, ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--posts", type=int, default=60)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--gap", type=float, default=0.1, help="Seconds between posts.")
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--postgres", default=os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--writer", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(args.posts, args.gap)
        return

    print(f"{args.posts} posts, {args.streams} streams open, a post every {args.gap:g} s, from another process")
    verdicts = []
    for db in args.db.split(","):
        if db == "sqlite":
            lines = [report(db, measure(db, {}, posts=args.posts, streams=args.streams, gap=args.gap), POLL_SECONDS * 1000)]
        elif db == "postgres":
            with scratch_postgres(args.postgres) as url:
                latencies = measure(db, {"DATABASE_URL": url}, posts=args.posts, streams=args.streams, gap=args.gap)
            lines = [report(db, latencies, SAFETY_SECONDS * 1000)]
        else:
            raise SystemExit(f"--db takes sqlite and postgres, not {db!r}")
        for line, ok in lines:
            print(line)
            verdicts.append((db, ok))
    missed = [db for db, ok in verdicts if not ok]
    goal = f"p95 <= {GOAL_MS:g} ms from commit to event"
    print(f"verdict: {'meets' if not missed else 'misses'} the goal ({goal})" + (f" on {', '.join(missed)}" if missed else ""))


if __name__ == "__main__":
    main()
