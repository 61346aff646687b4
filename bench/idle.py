"""What an idle ``python manage.py serve`` costs: CPU, database statements and memory of the
server's whole process tree (issue 26 items 2 and 3; goal idle ≤ 2 ms of CPU a second, at
most one database statement a second, memory no more than LangGraph's server: 312 MiB).

    python bench/idle.py [--db sqlite,postgres] [--tree PATH] [--settle 15] [--seconds 30]
                         [--root default|echo] [--posts 0] [--pg-url postgres://…/postgres]

Per database and per checkout (``--tree PATH``, another checkout of the project such as a
``git archive`` of main, runs first as the baseline; this checkout after it) it starts
``manage.py serve`` on a free loopback port with a fresh ``WORKFORCE_VAR_DIR`` (and a fresh
PostgreSQL database on the server ``--pg-url`` names, dropped afterwards), waits until the
task cluster has started and ``--settle`` seconds more, optionally sends ``--posts`` posts
(``--root echo``: a tree with one echo seat, each post answered by a turn) and waits for
their answers, then measures ``--seconds`` of idleness:

- CPU: the server's whole process tree, ``/proc/<pid>/task/*/schedstat`` (nanoseconds on
  CPU, every thread) at the window's two ends; processes are named by their place in the
  tree (web, cluster main, sentinel, then the sentinel's children in the order forked);
  its PostgreSQL backends (``pg_stat_activity`` of its database) the same way.
- Statements: every statement the server's Django connections send (a hook loaded through
  ``PYTHONPATH`` that appends one byte per statement to a file per process: SQLite's trace
  callback, Django's ``execute_wrappers`` on PostgreSQL), and on PostgreSQL also the
  database's transactions (``pg_stat_database`` ``xact_commit + xact_rollback``, read from
  the ``postgres`` database) and new connections (``sessions``).
- Memory at the window's end: the sum over the tree of RSS (``VmRSS``), peak RSS
  (``VmHWM``) and PSS (``smaps_rollup``), and per process.

Prints one table per database with a column per checkout and the ratio after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"
GOAL_CPU_MS = 2.0
GOAL_STATEMENTS = 1.0
GOAL_MIB = 312.0  # LangGraph's server, one process (issue 26's table)

# Loaded in every process of the server through PYTHONPATH (a sitecustomize): counts the
# statements its Django connections send, one byte each in WF_IDLE_COUNT/<pid>.
HOOK = r"""
import os

_dir = os.environ.get("WF_IDLE_COUNT")
if _dir:
    _fd = {"pid": None, "fd": None}

    def _tick(*_args):
        pid = os.getpid()
        if _fd["pid"] != pid:
            _fd["pid"], _fd["fd"] = pid, os.open(os.path.join(_dir, str(pid)), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_fd["fd"], b".")

    def _wrapper(execute, sql, params, many, context):
        _tick()
        return execute(sql, params, many, context)

    def _on_connection(sender, connection, **kwargs):
        raw = connection.connection
        if connection.vendor == "sqlite":
            raw.set_trace_callback(_tick)
        elif _wrapper not in connection.execute_wrappers:
            connection.execute_wrappers.append(_wrapper)

    # Django is imported by every process of the server anyway.
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_connection, weak=False)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- /proc


def children_map() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def tree(root: int) -> list[tuple[int, str]]:
    """``[(pid, role)]`` for ``root`` and its descendants. The first process is ``web``.
    A cluster as ``manage.py qcluster`` runs it (a main process whose one child, the
    sentinel, has children) shows as ``cluster main``, ``sentinel`` and the sentinel's
    children in pid order, ``child 1`` … (django-q2 forks the workers first, then the
    monitor, then the pusher); a cluster whose sentinel is its first process (with the
    pusher and the monitor as its threads) as ``cluster (sentinel)`` and ``worker 1`` …"""
    kids = children_map()
    out: list[tuple[int, str]] = [(root, "web")]
    for pid in sorted(kids.get(root, [])):
        below = sorted(kids.get(pid, []))
        if len(below) == 1 and kids.get(below[0]):
            out.append((pid, "cluster main"))
            sentinel = below[0]
            out.append((sentinel, "sentinel"))
            out += [(child, f"child {n}") for n, child in enumerate(sorted(kids.get(sentinel, [])), 1)]
        else:
            out.append((pid, "cluster (sentinel)"))
            out += [(child, f"worker {n}") for n, child in enumerate(below, 1)]
    return out


def cpu_ns(pid: int) -> int:
    """Nanoseconds on CPU of every live thread of ``pid`` (0 when gone)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                total += int(Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()[0])
            except OSError:
                pass
    except OSError:
        return 0
    return total


def memory(pid: int) -> dict[str, float]:
    """``{"rss", "hwm", "pss"}`` in MiB (0 when gone)."""
    out = {"rss": 0.0, "hwm": 0.0, "pss": 0.0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss"] = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                out["hwm"] = int(line.split()[1]) / 1024
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["pss"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


# ----------------------------------------------------------------------------- one run


class Database:
    def __init__(self, kind: str, tmp: Path, pg_base: str):
        self.kind = kind
        self.env = {"WORKFORCE_VAR_DIR": str(tmp / "var")}
        self.name = None
        if kind == "postgres":
            import uuid
            from urllib.parse import urlsplit, urlunsplit

            import psycopg

            parts = urlsplit(pg_base)
            self.name = f"wf_idle_{uuid.uuid4().hex[:10]}"
            self.admin = urlunsplit(parts._replace(path="/postgres"))
            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.name}"')
            self.env["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{self.name}"))

    def stats(self) -> dict:
        """Transactions, sessions and backend pids of the server's database (PostgreSQL)."""
        if self.name is None:
            return {}
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            xact, sessions = conn.execute(
                "SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = %s", (self.name,)
            ).fetchone()
            pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.name,))]
        return {"xact": xact, "sessions": sessions, "pids": pids}

    def drop(self) -> None:
        if self.name is None:
            return
        import psycopg

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')


ECHO_WORKER = """---
description: Echoes every post back into the mailbox.
model: embedded/echo
tools: [post-to-mailbox]
---

You answer every post you hear in its mailbox, with post-to-mailbox.
/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}
"""


def echo_tree(root: Path) -> Path:
    (root / "teams/bench/workers/echo").mkdir(parents=True)
    (root / "teams/bench/workers/echo/WORKER.md").write_text(ECHO_WORKER)
    box = root / "teams/bench/mailboxes/thread/MAILBOX.md"
    box.parent.mkdir(parents=True)
    box.write_text("---\ndescription: One thread.\nmembers: [bench.echo]\n---\n\nBenchmark.\n")
    return root


def http(port: int, path: str, body: dict | None = None, timeout: float = 30) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, {}


def post_and_wait(port: int, posts: int, timeout: float = 120) -> None:
    """``posts`` posts to ``bench.thread``, one at a time, each until its echo answer is in
    the mailbox's transcript."""
    for n in range(posts):
        status, _ = http(port, "/api/flows/mailbox/bench.thread/actions/post", {"userId": "u_bench", "input": {"body": f"p{n}"}})
        if status != 202:
            raise SystemExit(f"post {n}: HTTP {status}")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, items = http(port, "/api/sessions/bench.thread/items?limit=1000")
            if json.dumps(items).count(f'p{n}"') >= 2:  # the post and the seat's echo of it
                break
            time.sleep(0.1)
        else:
            raise SystemExit(f"post {n}: no answer within {timeout:g}s")


def one_run(checkout: Path, kind: str, args) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="wf_idle_"))
    counts = tmp / "counts"
    counts.mkdir()
    (tmp / "hook").mkdir()
    (tmp / "hook/sitecustomize.py").write_text(HOOK)
    db = Database(kind, tmp, args.pg_url)
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "WORKFORCE_ROOT", "PYTHONPATH"}
    }
    env.update(db.env)
    env.update({"PYTHONUNBUFFERED": "1", "WF_IDLE_COUNT": str(counts), "PYTHONPATH": str(tmp / "hook"), "WORKFORCE_AUTH": "none"})
    env.setdefault("WORKFORCE_LOG_LEVEL", "WARNING")
    for name in (
        "WORKFORCE_THROTTLE_USER",
        "WORKFORCE_THROTTLE_ORG",
        "WORKFORCE_THROTTLE_READ_USER",
        "WORKFORCE_THROTTLE_READ_ORG",
    ):
        env.setdefault(name, "")
    port = free_port()
    command = [sys.executable, str(checkout / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}"]
    if args.root == "echo":
        command += ["--root", str(echo_tree(tmp / "tree"))]
    log = open(tmp / "serve.log", "w")
    serve = subprocess.Popen(command, cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while "task cluster started" not in (tmp / "serve.log").read_text():
            if serve.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not start ({checkout}):\n{(tmp / 'serve.log').read_text()[-3000:]}")
            time.sleep(0.2)
        # Until the whole cluster is up (the sentinel's children).
        while len(tree(serve.pid)) < 3 + int(env.get("WORKFORCE_Q_WORKERS", "2")) - 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        if args.posts:
            post_and_wait(port, args.posts)
        time.sleep(args.settle)
        procs = tree(serve.pid)
        pg0 = db.stats()
        c0 = {pid: cpu_ns(pid) for pid, _ in procs}
        b0 = {pid: cpu_ns(pid) for pid in pg0.get("pids", [])}
        n0 = {f.name: f.stat().st_size for f in counts.iterdir()}
        s0 = sum(n0.values())
        t0 = time.monotonic()
        time.sleep(args.seconds)
        c1 = {pid: cpu_ns(pid) for pid, _ in procs}
        n1 = {f.name: f.stat().st_size for f in counts.iterdir()}
        s1 = sum(n1.values())
        elapsed = time.monotonic() - t0
        pg1 = db.stats()
        b1 = {pid: cpu_ns(pid) for pid in pg0.get("pids", [])}
        after = tree(serve.pid)
        per = []
        for pid, role in procs:
            mem = memory(pid)
            per.append(
                {
                    "pid": pid,
                    "role": role,
                    "cpu_ms_s": (c1[pid] - c0[pid]) / 1e6 / elapsed,
                    "threads": threads(pid),
                    "statements": n1.get(str(pid), 0) - n0.get(str(pid), 0),
                    **mem,
                }
            )
        result = {
            "processes": len(procs),
            "changed": sorted(p for p, _ in after) != sorted(p for p, _ in procs),
            "cpu_ms_s": sum(p["cpu_ms_s"] for p in per),
            "statements_s": (s1 - s0) / elapsed,
            "rss": sum(p["rss"] for p in per),
            "hwm": sum(p["hwm"] for p in per),
            "pss": sum(p["pss"] for p in per),
            "per": per,
        }
        if pg0:
            result["db_cpu_ms_s"] = sum(b1[p] - b0[p] for p in b0) / 1e6 / elapsed
            result["xact_s"] = (pg1["xact"] - pg0["xact"]) / elapsed
            result["sessions"] = pg1["sessions"] - pg0["sessions"]
            result["backends"] = len(pg1["pids"])
        return result
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        log.close()
        db.drop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------------------------- report


ROWS = [
    ("idle CPU, ms per second (server tree)", "cpu_ms_s", "{:.2f}"),
    ("idle CPU of its PostgreSQL backends, ms/s", "db_cpu_ms_s", "{:.2f}"),
    ("statements per second (Django connections)", "statements_s", "{:.2f}"),
    ("transactions per second (pg_stat_database)", "xact_s", "{:.2f}"),
    ("new database connections in the window", "sessions", "{:.0f}"),
    ("database connections open", "backends", "{:.0f}"),
    ("processes", "processes", "{:.0f}"),
    ("sum of RSS, MiB", "rss", "{:.0f}"),
    ("sum of peak RSS (VmHWM), MiB", "hwm", "{:.0f}"),
    ("sum of PSS, MiB", "pss", "{:.0f}"),
]


def report(kind: str, results: dict[str, dict], args) -> None:
    names = list(results)
    print(f"\n## {kind}: {args.seconds:g} s idle after {args.settle:g} s settling, --root {args.root}, {args.posts} posts first")
    head = "| figure | " + " | ".join(names) + (" | after / before |" if len(names) == 2 else " |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for label, key, fmt in ROWS:
        if not all(key in r for r in results.values()):
            continue
        values = [results[n][key] for n in names]
        ratio = f" | {values[1] / values[0]:.2f}" if len(values) == 2 and values[0] else (" | -" if len(values) == 2 else "")
        print(f"| {label} | " + " | ".join(fmt.format(v) for v in values) + ratio + " |")
    for name in names:
        r = results[name]
        print(f"\n{name}, per process{' (the tree changed during the window)' if r['changed'] else ''}:")
        print("| role | pid | threads | CPU ms/s | statements in the window | RSS MiB | peak RSS | PSS MiB |")
        print("|---|---|---|---|---|---|---|---|")
        for p in r["per"]:
            print(
                f"| {p['role']} | {p['pid']} | {p['threads']} | {p['cpu_ms_s']:.2f} | {p['statements']} | "
                f"{p['rss']:.0f} | {p['hwm']:.0f} | {p['pss']:.0f} |"
            )
    last = results[names[-1]]
    verdict = []
    verdict.append(f"CPU {last['cpu_ms_s']:.2f} ms/s {'<=' if last['cpu_ms_s'] <= GOAL_CPU_MS else '>'} {GOAL_CPU_MS:g}")
    verdict.append(
        f"statements {last['statements_s']:.2f}/s {'<=' if last['statements_s'] <= GOAL_STATEMENTS else '>'} {GOAL_STATEMENTS:g}"
    )
    for key in ("rss", "pss"):
        verdict.append(f"{key.upper()} {last[key]:.0f} MiB {'<=' if last[key] <= GOAL_MIB else '>'} {GOAL_MIB:g}")
    print(f"\nverdict ({names[-1]}, {kind}): " + "; ".join(verdict))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="sqlite,postgres", help="sqlite, postgres or both (comma-separated)")
    parser.add_argument("--tree", default=None, help="another checkout to measure first, as the baseline")
    parser.add_argument(
        "--settle", type=float, default=110.0, help="seconds after the cluster started before measuring (the sweeps' backoff)"
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="seconds measured (a whole idle sweep cycle)")
    parser.add_argument("--root", choices=("default", "echo"), default="default", help="the default tree, or one echo seat")
    parser.add_argument("--posts", type=int, default=0, help="posts answered before settling (--root echo)")
    parser.add_argument("--pg-url", default=os.environ.get("DATABASE_URL") or DEFAULT_PG, help="a PostgreSQL server on loopback")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders (logs)")
    parser.add_argument("--parallel", action="store_true", help="run every server at once (one wait for all)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    if args.posts and args.root != "echo":
        parser.error("--posts needs --root echo")
    checkouts = []
    if args.tree:
        checkouts.append(("before", Path(args.tree).resolve()))
    checkouts.append(("after" if args.tree else "this", REPO))
    everything: dict[str, dict] = {}
    runs = [(kind, name, path) for kind in args.db.split(",") for name, path in checkouts]
    if args.parallel:
        # Every server at once, so a whole idle cycle of each fits one wait; idle servers
        # barely touch each other's CPU figures (the load average is printed).
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(runs)) as pool:
            done = list(pool.map(lambda run: one_run(run[2], run[0], args), runs))
    else:
        done = [one_run(path, kind, args) for kind, _, path in runs]
    for (kind, name, _), result in zip(runs, done, strict=True):
        everything.setdefault(kind, {})[name] = result
    for kind, results in everything.items():
        report(kind, results, args)
    print(f"\nload average: {os.getloadavg()[0]:.2f} (2 cores shared: read CPU figures with it)")
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
