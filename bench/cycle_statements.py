"""What one post-and-answer cycle sends to PostgreSQL (issue 26 item 4): statements per
cycle by process and transaction, their client-side time, and the PostgreSQL backends'
CPU per cycle, for this checkout and (``--tree``) a baseline checkout, alternating round
by round in the same run.

The cycle is the peer harness's (``../shared/bench/server_peer/server_bench.py``): a
mailbox whose one member is an ``embedded/echo`` seat answering every post with
``post-to-mailbox``; a client posts over HTTP and reads the seat's answer line on the
mailbox's open stream (``GET /api/sessions/{id}/stream``). ``--conversations N`` runs N
such clients at once, each on its own mailbox.

Per round and checkout: a fresh PostgreSQL database, a real ``manage.py serve`` (web
server and cluster, the defaults) from that checkout with a ``sitecustomize`` hook in
``PYTHONPATH`` that logs every statement its Django connections send (process, the
transaction it ran in: the n-th outermost ``atomic`` block of that connection or
autocommit, its time in the client, the SQL), warm-up cycles, then ``--cycles`` measured
cycles per conversation. Backend CPU is ``/proc/<pid>/stat`` of the database's backends
(``pg_stat_activity``) sampled before and after the window (a backend that ended inside
it is not counted: the count of new sessions is printed), and transactions are
``pg_stat_database.xact_commit + xact_rollback``.

Usage: ``DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python
bench/cycle_statements.py [--tree PATH] [--rounds 3] [--cycles 200] [--conversations 1]
[--show]`` (``--show``: the statements of one cycle, by process and transaction, with
their median client-side time, from the last round of this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import no_throttles, scratch_postgres  # noqa: E402
from bench.first_token import free_port  # noqa: E402

no_throttles()
from tests.e2e.sse import SseStream  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
USER = "u_bench"
WORKER_MD = """---
description: Echoes every post back into the mailbox.
model: embedded/echo
tools: [post-to-mailbox]
---

You answer every post you hear in its mailbox, with post-to-mailbox.
/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}
"""

# Loaded by every process of the server (PYTHONPATH): one line per statement in
# WF_CYCLE_LOG/<pid>: connection id, transaction number (0: autocommit), µs, SQL.
HOOK = r"""
import os, time

_dir = os.environ.get("WF_CYCLE_LOG")
if _dir:
    _state = {"pid": None, "fd": None}

    def _write(line):
        pid = os.getpid()
        if _state["pid"] != pid:
            _state["pid"], _state["fd"] = pid, os.open(os.path.join(_dir, str(pid)), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_state["fd"], line.encode())

    def _on_connection(sender, connection, **kwargs):
        # Once per DatabaseWrapper: a pooled wrapper gets a new raw connection (and this
        # signal) again and again.
        if getattr(connection, "_wf_cycle_hooked", False):
            return
        connection._wf_cycle_hooked = True
        commits = [1]
        real_commit = connection.commit

        def commit():
            commits[0] += 1
            return real_commit()

        connection.commit = commit

        def wrapper(execute, sql, params, many, context):
            txn = commits[0] if connection.in_atomic_block else 0
            t0 = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                us = (time.perf_counter() - t0) * 1e6
                flat = " ".join(sql.split())
                _write(f"{id(connection)}\t{txn}\t{us:.0f}\t{flat}\n")

        connection.execute_wrappers.append(wrapper)

    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection, weak=False)
"""


def write_tree(root: Path, names: list[str]) -> Path:
    (root / "teams/bench/workers/echo").mkdir(parents=True)
    (root / "teams/bench/workers/echo/WORKER.md").write_text(WORKER_MD)
    for name in names:
        path = root / f"teams/bench/mailboxes/{name}/MAILBOX.md"
        path.parent.mkdir(parents=True)
        path.write_text("---\ndescription: One conversation.\nmembers: [bench.echo]\n---\n\nBenchmark.\n")
    return root


def post(base: str, mailbox: str, body: str) -> None:
    data = json.dumps({"userId": USER, "input": {"body": body}}).encode()
    request = urllib.request.Request(
        f"{base}/api/flows/mailbox/{mailbox}/actions/post", data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202, answer.status


def converse(base: str, mailbox: str, stream: SseStream, cycles: int, tag: str) -> None:
    for n in range(cycles):
        body = f"{tag} {n}"
        post(base, mailbox, body)
        while True:
            event = stream.next_event(timeout=60)
            d = (event.data or {}).get("data") or {}
            if d.get("seatAuthored") and d.get("body", "").endswith(f": {body}"):
                break


def shape(sql: str) -> str:
    """A statement with its literals and numbers folded, for grouping."""
    sql = re.sub(r"'[^']*'", "?", sql)
    sql = re.sub(r"\b\d+\b", "N", sql)
    return sql


def backends(admin, db: str) -> dict[int, float]:
    rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (db,)).fetchall()
    out = {}
    for (pid,) in rows:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[pid] = (int(fields[11]) + int(fields[12])) * 1000 / TICK
    return out


def xacts(admin, db: str) -> tuple[int, int]:
    row = admin.execute("SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = %s", (db,)).fetchone()
    return int(row[0]), int(row[1])


def read_logs(log_dir: Path, offsets: dict[str, int] | None = None) -> tuple[dict[str, int], dict[str, list[str]]]:
    sizes, lines = {}, {}
    for path in log_dir.iterdir():
        data = path.read_bytes()
        sizes[path.name] = len(data)
        start = (offsets or {}).get(path.name, 0)
        lines[path.name] = data[start:].decode().splitlines()
    return sizes, lines


def role_of(pid: str, serve_pid: int) -> str:
    if int(pid) == serve_pid:
        return "web"
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        name = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return f"gone:{pid}"
    return name or cmd[:30]


def one_run(checkout: Path, pg_url: str, args) -> dict:
    import psycopg

    work = Path(tempfile.mkdtemp(prefix="wf_cycle_"))
    names = ["warm"] + [f"c{j}" for j in range(args.conversations)]
    root = write_tree(work / "tree", names)
    (work / "hook").mkdir()
    (work / "hook/sitecustomize.py").write_text(HOOK)
    log_dir = work / "log"
    log_dir.mkdir()
    port = free_port()
    with scratch_postgres(pg_url) as url:
        db = url.rsplit("/", 1)[1]
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH"}}
        env.update(
            {
                "DATABASE_URL": url,
                "WORKFORCE_VAR_DIR": str(work / "var"),
                "WORKFORCE_LOG_LEVEL": "WARNING",
                "PYTHONPATH": str(work / "hook"),
                "WF_CYCLE_LOG": str(log_dir),
            }
        )
        log = (work / "serve.log").open("w")
        serve = subprocess.Popen(
            [sys.executable, str(checkout / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)],
            env=env,
            cwd=checkout,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        streams: list[SseStream] = []
        admin = psycopg.connect(pg_url.rsplit("/", 1)[0] + "/postgres", autocommit=True)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            path = "/api/sessions/bench.{}/stream?itemTypes=component&userId=" + USER
            while True:
                try:
                    warm = SseStream(base, path.format("warm"), timeout=60)
                    break
                except OSError:
                    if serve.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"serve did not start from {checkout}:\n{(work / 'serve.log').read_text()}") from None
                    time.sleep(0.2)
            streams.append(warm)
            converse(base, "bench.warm", warm, 5, "warm")
            convs = [SseStream(base, path.format(f"c{j}"), timeout=60) for j in range(args.conversations)]
            streams += convs
            for j, stream in enumerate(convs):
                converse(base, f"bench.c{j}", stream, 3, "warm")  # each conversation's seat conversation made
            time.sleep(1.0)
            offsets, _ = read_logs(log_dir)
            cpu0, x0 = backends(admin, db), xacts(admin, db)
            t0 = time.monotonic()
            threads = [
                threading.Thread(target=converse, args=(base, f"bench.c{j}", s, args.cycles, "post")) for j, s in enumerate(convs)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.monotonic() - t0
            cpu1, x1 = backends(admin, db), xacts(admin, db)
            _, lines = read_logs(log_dir, offsets)
        finally:
            for stream in streams:
                stream.close()
            serve.send_signal(2)
            try:
                serve.wait(timeout=40)
            except subprocess.TimeoutExpired:
                serve.kill()
            log.close()
            admin.close()
    cycles = args.cycles * args.conversations
    pg_cpu = sum(cpu1[p] - cpu0.get(p, 0.0) for p in cpu1)
    by_role: Counter[str] = Counter()
    txns: set[tuple[str, str, str]] = set()
    autocommit = 0
    shapes: dict[tuple[str, str], list[float]] = defaultdict(list)
    for pid, rows in lines.items():
        role = role_of(pid, serve.pid)
        for row in rows:
            conn, txn, us, sql = row.split("\t", 3)
            by_role[role] += 1
            if txn == "0":
                autocommit += 1
            else:
                txns.add((pid, conn, txn))
            shapes[(role, shape(sql))].append(float(us))
    statements = sum(by_role.values())
    return {
        "statements": statements / cycles,
        "by_role": {k: v / cycles for k, v in by_role.items()},
        "atomic": len(txns) / cycles,
        "autocommit": autocommit / cycles,
        "pg_xacts": (x1[0] - x0[0]) / cycles,
        "new_sessions": x1[1] - x0[1],
        "pg_cpu_ms": pg_cpu / cycles,
        "client_ms": sum(sum(v) for v in shapes.values()) / 1000 / cycles,
        "cycles_s": cycles / wall,
        "shapes": {f"{r}\t{s}": (len(v) / cycles, statistics.median(v)) for (r, s), v in shapes.items()},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", type=Path, help="a baseline checkout (a git archive of main), run alternating")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--conversations", type=int, default=1)
    p.add_argument("--show", action="store_true")
    args = p.parse_args()
    pg_url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    checkouts = {"this": REPO} | ({"base": args.tree.resolve()} if args.tree else {})
    results: dict[str, list[dict]] = defaultdict(list)
    for r in range(args.rounds):
        order = list(checkouts.items())
        if r % 2:
            order.reverse()
        for name, checkout in order:
            res = one_run(checkout, pg_url, args)
            results[name].append(res)
            print(
                f"round {r} {name:4}: {res['statements']:.2f} statements/cycle "
                f"({', '.join(f'{k} {v:.2f}' for k, v in sorted(res['by_role'].items()))}), "
                f"atomic {res['atomic']:.2f} + autocommit {res['autocommit']:.2f}, pg xacts {res['pg_xacts']:.2f}, "
                f"PG backend CPU {res['pg_cpu_ms']:.2f} ms/cycle (new sessions {res['new_sessions']}), "
                f"client-side statement time {res['client_ms']:.2f} ms/cycle, {res['cycles_s']:.1f} cycles/s",
                flush=True,
            )
    print()
    keys = ["statements", "atomic", "autocommit", "pg_xacts", "pg_cpu_ms", "client_ms", "cycles_s"]
    for name, runs in results.items():
        print(f"median {name:4}: " + ", ".join(f"{k} {statistics.median(r[k] for r in runs):.2f}" for k in keys))
    if "base" in results:
        for k in keys:
            a = statistics.median(r[k] for r in results["this"])
            b = statistics.median(r[k] for r in results["base"])
            print(f"  {k:12} this/base {a / b:.3f}" if b else f"  {k:12} base 0")
    if args.show:
        last = results["this"][-1]["shapes"]
        for key, (n, med) in sorted(last.items(), key=lambda kv: (kv[0].split("\t")[0], -kv[1][0])):
            role, sql = key.split("\t", 1)
            if n >= 0.05:
                print(f"{role:10} {n:5.2f}/cycle {med:8.0f} µs  {sql[:400]}")


if __name__ == "__main__":
    main()
