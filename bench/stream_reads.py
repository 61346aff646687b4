"""What a live stream's reads cost the web process (``GET /api/sessions/{id}/stream``):
its CPU per streamed item and per post-and-answer cycle, for this checkout against a
baseline checkout (``--tree``, e.g. a ``git archive`` of main) in the same run, the two
alternating round by round (A B, B A, ...).

Per round, per checkout and database: a throwaway database (a temp SQLite file; a fresh
PostgreSQL database on the server ``--postgres`` names, dropped afterwards), a routed
one-member mailbox whose seat runs ``embedded/scripted`` writing a word every ``--pace`` ms
(its answer streams ``partial-text`` previews), and a real ``manage.py serve`` with its
cluster, started from that checkout. Two phases, each measured as the web process's CPU
(``/proc/<pid>/stat``: utime + stime of the serve process, which is the web server; the
cluster is its child and not counted):

- *items*: ``--streams`` streams open on the mailbox's session (``itemTypes=component``);
  a writer process (``manage.py shell`` of the same checkout) stores ``--items`` items, one
  commit each, ``--gap`` s apart; the window ends when every stream has every item. Figure:
  web CPU / (items x streams), microseconds per streamed item.
- *cycle*: one stream open; ``--cycles`` times, one client posts (HTTP) and reads the
  answer on the stream until its preview ends (``done``). Figure: web CPU per cycle, in
  milliseconds (the post's own HTTP handling included, the same in both checkouts).

Usage: ``python bench/stream_reads.py --tree /tmp/base [--rounds 3] [--items 200]
[--streams 10] [--gap 0.01] [--cycles 15] [--pace 20] [--db postgres,sqlite]
[--postgres postgres://postgres@127.0.0.1:5432/postgres]``; ``--in-process READS``: only
the read itself, the ORM's (what a stream read before) against the compiled one, in this
process, CPU per read (``DATABASE_URL`` picks the database, as in ``bench/posts.py``).

Prints each run, then per database the medians over the rounds of both checkouts and
their ratio (this / baseline; below 1 is cheaper). No timed assertion: figures only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import no_throttles, scratch_postgres  # noqa: E402
from bench.first_token import MAILBOX, _answer, free_port, post, write_tree  # noqa: E402

no_throttles()
from tests.e2e.sse import SseStream  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")

WRITER = """
import sys, time
from django.db import transaction
from workforce.models import Session
from workforce.sessions import emit_item
session = Session.objects.get(session_id={mailbox!r})
for n in range({items}):
    with transaction.atomic():
        emit_item(session, "bench-note", {{"n": n, "text": "an item for the bench, with some text in it"}})
    time.sleep({gap})
"""


def cpu_ms(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far, in milliseconds, its ended
    threads included."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICK


def _drain(stream: SseStream, want: int, got: list[int]) -> None:
    while got[0] < want:
        event = stream.next_event(timeout=60)
        if event.id is not None:
            got[0] += 1


def one_run(checkout: Path, env_db: dict, args) -> tuple[float, float]:
    """One serve from ``checkout``: (web µs per streamed item, web ms per cycle)."""
    work = Path(tempfile.mkdtemp(prefix="wf_stream_reads_"))
    root = write_tree(work / "tree")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH"}}
    env.update(env_db)
    env.update({"WORKFORCE_VAR_DIR": str(work / "var"), "WORKFORCE_LOG_LEVEL": "WARNING", "WORKFORCE_ROOT": str(root)})
    log = (work / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, str(checkout / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)],
        env=env,
        cwd=checkout,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    streams: list[SseStream] = []
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                first = SseStream(base, f"/api/sessions/{MAILBOX}/stream?itemTypes=component", timeout=60)
                break
            except OSError:
                if serve.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"serve did not start from {checkout}:\n{(work / 'serve.log').read_text()}") from None
                time.sleep(0.2)
        streams.append(first)
        post(base, "warm up")  # the seat's conversation, the cluster's first turn, the compiled reads
        _answer(first)
        first.quiet_for(0.5)

        # Items: written by another process, read by every stream.
        streams += [
            SseStream(base, f"/api/sessions/{MAILBOX}/stream?itemTypes=component", timeout=60) for _ in range(args.streams - 1)
        ]
        for stream in streams:
            stream.quiet_for(0.5)  # the backlog (the warm-up's items)
        counts = [[0] for _ in streams]
        readers = [
            threading.Thread(target=_drain, args=(s, args.items, c), daemon=True) for s, c in zip(streams, counts, strict=True)
        ]
        cpu0 = cpu_ms(serve.pid)
        for reader in readers:
            reader.start()
        script = WRITER.format(mailbox=MAILBOX, items=args.items, gap=args.gap)
        subprocess.run(
            [sys.executable, str(checkout / "manage.py"), "shell", "-c", script],
            env=env,
            cwd=checkout,
            check=True,
            timeout=300,
            stdout=subprocess.DEVNULL,
        )
        for reader in readers:
            reader.join(timeout=60)
        cpu1 = cpu_ms(serve.pid)
        streamed = sum(c[0] for c in counts)
        if streamed != args.items * len(streams):
            raise SystemExit(f"{checkout}: streamed {streamed} of {args.items * len(streams)} items")
        per_item_us = (cpu1 - cpu0) * 1000 / streamed
        for stream in streams[1:]:
            stream.close()
        time.sleep(0.5)

        # Cycles: one client posts and reads the answer on its stream.
        first.quiet_for(0.2)
        cpu0 = cpu_ms(serve.pid)
        for n in range(args.cycles):
            post(base, f"question {n}: is the build green today?\n/pace {args.pace}")
            _answer(first)
        cpu1 = cpu_ms(serve.pid)
        return per_item_us, (cpu1 - cpu0) / args.cycles
    finally:
        for stream in streams:
            stream.close()
        serve.send_signal(2)
        try:
            serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            serve.kill()
        log.close()


def in_process(reads: int) -> None:
    """One read of one item and of ten, the ORM's way (``list_items`` + ``ItemSerializer``,
    what a stream read before) against the compiled read (``list_item_rows`` +
    ``item_wire``), in this process (CPU per read, alternating, best of 3); then the
    compiled read with the connection handed back after each read, as a stream does, and
    on PostgreSQL through the web process's pool."""
    from bench._db import throwaway_database

    with throwaway_database() as connection:
        from workforce.api.serializers import ItemSerializer, item_wire
        from workforce.models import Session
        from workforce.principals import ensure_organization
        from workforce.queries import list_item_rows, list_items
        from workforce.sessions import emit_item
        from workforce.streams import event_text, release_connection

        org = ensure_organization("default")
        session = Session.objects.create(organization=org, session_id="bench.reads", flow_kind="mailbox")
        for n in range(20):
            emit_item(session, "mailbox-post", {"id": f"p{n}", "body": "is the build green today? " * 3, "author": "u_b"})

        def orm(after: int) -> list[str]:
            rows = list_items(session, item_types=["component"], after=after, limit=500)
            return [event_text(row.seq, ItemSerializer(row).data) for row in rows]

        def compiled(after: int) -> list[str]:
            rows = list_item_rows(session.pk, item_types=("component",), after=after, limit=500)
            return [event_text(row[0], item_wire(row)) for row in rows]

        def handed_back(after: int) -> list[str]:
            try:
                return compiled(after)
            finally:
                release_connection()

        assert orm(0) == compiled(0)

        def cost(fn, after: int) -> float:
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                for _ in range(reads):
                    fn(after)
                best = min(best, (time.process_time() - start) / reads * 1e6)
            return best

        print(f"{connection.vendor}: CPU per read, best of 3 x {reads} reads")
        for after, label in ((19, "1 item"), (10, "10 items")):
            before, after_us = cost(orm, after), cost(compiled, after)
            print(
                f"  read of {label:8}  ORM + ItemSerializer {before:7.1f} µs  compiled {after_us:7.1f} µs  (x{after_us / before:.2f})"
            )
        if connection.vendor == "postgresql":
            from workforce_project.deployment import enable_web_pool

            enable_web_pool()
        plain, back = cost(compiled, 19), cost(handed_back, 19)
        print(f"  read of 1 item, connection kept {plain:7.1f} µs, handed back after each read {back:7.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, help="The baseline checkout (a git archive of main).")
    parser.add_argument(
        "--in-process",
        type=int,
        metavar="READS",
        help="Only the reads themselves, in this process (DATABASE_URL picks the database).",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--streams", type=int, default=10)
    parser.add_argument("--gap", type=float, default=0.01, help="Seconds between the writer's commits.")
    parser.add_argument("--cycles", type=int, default=15)
    parser.add_argument("--pace", type=int, default=20, help="Milliseconds the seat's model takes per word.")
    parser.add_argument("--db", default="postgres,sqlite")
    parser.add_argument("--postgres", default=os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    if args.in_process:
        in_process(args.in_process)
        return
    if args.tree is None:
        parser.error("--tree is required (or --in-process)")
    trees = {"baseline": args.tree.resolve(), "this": REPO}
    print(
        f"{args.rounds} rounds; items: {args.items} x {args.streams} streams, {args.gap} s apart; "
        f"cycles: {args.cycles} posts, a word every {args.pace} ms; load {os.getloadavg()[0]:.2f}"
    )
    for db in args.db.split(","):
        results: dict[str, list[tuple[float, float]]] = {"baseline": [], "this": []}
        for n in range(args.rounds):
            order = ["baseline", "this"] if n % 2 == 0 else ["this", "baseline"]
            for name in order:
                if db == "sqlite":
                    got = one_run(trees[name], {}, args)
                elif db == "postgres":
                    with scratch_postgres(args.postgres) as url:
                        got = one_run(trees[name], {"DATABASE_URL": url}, args)
                else:
                    raise SystemExit(f"--db takes sqlite and postgres, not {db!r}")
                results[name].append(got)
                print(
                    f"{db:9} round {n + 1} {name:8}  web CPU {got[0]:8.1f} µs/streamed item  {got[1]:7.1f} ms/cycle", flush=True
                )
        base_item = statistics.median(r[0] for r in results["baseline"])
        this_item = statistics.median(r[0] for r in results["this"])
        base_cycle = statistics.median(r[1] for r in results["baseline"])
        this_cycle = statistics.median(r[1] for r in results["this"])
        print(
            f"{db:9} medians  per streamed item {base_item:.1f} -> {this_item:.1f} µs (x{this_item / base_item:.2f})  "
            f"per cycle {base_cycle:.1f} -> {this_cycle:.1f} ms (x{this_cycle / base_cycle:.2f})  load {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
