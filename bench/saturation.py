"""Where the server saturates, and what back-pressure tells posters (issue 26 item 5).

Starts the server on a fresh PostgreSQL database with a tree of ``--mailboxes`` mailboxes,
each with the same three echo seats as members (``embedded/echo``, no tools: a post's
turn answers and ends, waking nobody else), then raises the number of concurrent posters
step by step (``--steps 8,32,128,512``), each poster posting over HTTP (keep-alive, one
post at a time) into the mailboxes in turn, for ``--step-seconds`` per step. Raising stops
when the accepted rate grew less than 10 % over the step before (the rate stopped growing),
or at the last step, or when ``--budget`` seconds are spent (the whole run: start-up,
steps and stop). Per step it prints:

- posts/s accepted (202), the 503s (``backlog-full``; other failures are counted apart);
- wakes/s: deliveries finished (done or failed) per second, from the database;
- p50/p95 latency of accepted posts (ms) and of the 503s;
- the backlog at the step's end (deliveries pending or running);
- CPU per second (from ``/proc``: utime+stime, every thread) of the web process(es), the
  cluster's processes, the PostgreSQL backends of the database, and this bench; the
  database connections open (``pg_stat_activity``) of ``max_connections``; and the
  resource that ran out: ``CPU`` when the machine's cores were busy (web vs cluster
  share named), ``PG connections`` near the limit, or ``none``.

Topologies: ``--nodes 1`` (default) runs ``manage.py serve`` (web and cluster on one
machine, the ORM broker); ``--nodes N`` runs N web nodes (``serve --no-cluster``) and N
worker nodes (``manage.py work``) with ``WORKFORCE_MULTI_NODE=true``, a Redis broker
(``--redis-url``, db 9 by default, flushed before and after) and a shared vault folder, each
node with its own ``WORKFORCE_VAR_DIR``; posters are spread over the web nodes.

The API's throttles are off. ``--backlog-limit`` sets ``WORKFORCE_BACKLOG_LIMIT`` (default:
the server's default; 0: no bound); ``--web-nice`` sets ``WORKFORCE_WEB_NICE``.

    python bench/saturation.py [--nodes 1] [--steps 8,32,128,512] [--step-seconds 20]
        [--mailboxes 16] [--backlog-limit N] [--web-nice N] [--budget 300] [--pg-url URL]
        [--redis-url redis://127.0.0.1:6379/9] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import THROTTLE_SETTINGS, ServerDatabase  # noqa: E402

Database = ServerDatabase

DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
SEATS = ("bench.echo1", "bench.echo2", "bench.echo3")
USER = "u_bench"
GROWTH = 1.10  # a step must accept 10 % more posts/s than the one before to go on
WORKER_MD = """---
description: Echoes every post it hears (a turn, no tools).
model: embedded/echo
---

You answer every post you hear.
"""


def write_tree(root: Path, mailboxes: int) -> list[str]:
    """The tree: the three echo workers and ``mailboxes`` mailboxes ``bench.box<i>`` with
    all three as members. Returns the mailbox ids."""
    for seat in SEATS:
        path = root / f"teams/bench/workers/{seat.split('.')[1]}/WORKER.md"
        path.parent.mkdir(parents=True)
        path.write_text(WORKER_MD)
    ids = []
    for i in range(mailboxes):
        path = root / f"teams/bench/mailboxes/box{i}/MAILBOX.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\ndescription: A bench mailbox.\nmembers: [{', '.join(SEATS)}]\n---\n\nBenchmark.\n")
        ids.append(f"bench.box{i}")
    return ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------- processes


def proc_table() -> tuple[dict[int, list[int]], dict[int, str]]:
    """``(children by ppid, cmdline by pid)`` of every process."""
    children: dict[int, list[int]] = {}
    cmd: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        children.setdefault(int(stat[stat.rindex(")") + 2 :].split()[1]), []).append(int(entry))
    return children, cmd


def descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children.get(p, []))
    return found


def cpu_seconds(pid: int, *, reaped: bool = False) -> float:
    """utime + stime of ``pid`` (all its threads) so far, with ``reaped`` also what its
    children that ended and were waited for spent (cutime + cstime: django-q2 recycles its
    workers, and a recycled worker's CPU moves to its sentinel); 0 when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    rest = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in rest[11 : 15 if reaped else 13]) / os.sysconf("SC_CLK_TCK")


class Node:
    """One ``manage.py`` child (``serve``, ``serve --no-cluster`` or ``work``) in its own
    process group, stopped the project's way: SIGTERM to its main process, then anything
    left of its tree killed by pid."""

    def __init__(self, role: str, args: list[str], env: dict, log: Path, port: int | None = None):
        self.role, self.port, self.log = role, port, log
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), *args],
            cwd=REPO,
            env=env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text()[-3000:]
        return ""

    def split(self, children: dict[int, list[int]], cmd: dict[int, str]) -> tuple[list[int], list[int]]:
        """``(web pids, cluster pids)`` of this node's tree: a ``qcluster`` process (serve's
        ``serve_qcluster`` or ``work``) and what it forked are the cluster."""
        tree = descendants(self.proc.pid, children)
        if self.role == "work":
            return [], tree
        roots = [p for p in tree if p != self.proc.pid and "qcluster" in cmd.get(p, "")]
        cluster = set()
        for root in roots:
            cluster.update(descendants(root, children))
        return [p for p in tree if p not in cluster], sorted(cluster)

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        children, _ = proc_table()
        tree = descendants(self.proc.pid, children)
        self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        _, cmd = proc_table()
        for pid in tree:
            if "manage.py" in cmd.get(pid, ""):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


# ----------------------------------------------------------------------------- HTTP


class Poster:
    """One keep-alive HTTP/1.1 connection posting one post at a time (asyncio streams:
    hundreds of posters cost this process little)."""

    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, mailbox: str, body: str) -> tuple[int, str]:
        """``(status, reason code or "")``; status 0 when the connection failed."""
        payload = json.dumps({"userId": USER, "input": {"body": body}}).encode()
        head = (
            f"POST /api/flows/mailbox/{mailbox}/actions/post HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        for attempt in (0, 1):  # a keep-alive connection the server closed meanwhile: once more
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
                assert self.reader is not None
                self.writer.write(head + payload)
                await self.writer.drain()
                status_line = await self.reader.readline()
                if not status_line:
                    raise ConnectionError("closed")
                status = int(status_line.split()[1])
                length, close = 0, False
                while True:
                    line = await self.reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.lower() == "content-length":
                        length = int(value.strip())
                    elif name.lower() == "connection" and "close" in value.lower():
                        close = True
                data = await self.reader.readexactly(length) if length else b""
                if close:
                    await self.close()
                reason = ""
                if status >= 300:
                    with contextlib.suppress(ValueError, AttributeError):
                        reason = json.loads(data).get("error", {}).get("reason", "")
                return status, reason
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
                await self.close()
                if attempt:
                    return 0, "connection"
        return 0, "connection"

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


async def run_step(ports: list[int], mailboxes: list[str], posters: int, seconds: float, counter: list[int]) -> dict:
    """``posters`` posters for ``seconds``: latencies of accepted posts, of 503s, the
    other failures by status and reason."""
    accepted: list[float] = []
    refused: list[float] = []
    other: dict[str, int] = {}
    end = time.monotonic() + seconds

    async def one(n: int) -> None:
        poster = Poster(ports[n % len(ports)])
        try:
            while time.monotonic() < end:
                counter[0] += 1
                mailbox = mailboxes[counter[0] % len(mailboxes)]
                start = time.monotonic()
                status, reason = await poster.post(mailbox, f"post {counter[0]}")
                took = time.monotonic() - start
                if status == 202:
                    accepted.append(took)
                elif status == 503 and reason == "backlog-full":
                    refused.append(took)
                    # A poster told to come back later does (what Retry-After asks, shortened
                    # so a step still measures): 1 s.
                    await asyncio.sleep(min(1.0, max(0.0, end - time.monotonic())))
                else:
                    key = f"{status} {reason}".strip()
                    other[key] = other.get(key, 0) + 1
                    if status == 0:
                        await asyncio.sleep(0.1)
        finally:
            await poster.close()

    await asyncio.gather(*(one(n) for n in range(posters)))
    return {"accepted": accepted, "refused": refused, "other": other}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


# ----------------------------------------------------------------------------- the run


def deliveries(db: Database) -> tuple[int, int]:
    """``(finished, open)`` deliveries now: done or failed, pending or running."""
    rows = dict(db.rows("SELECT status, COUNT(*) FROM seats_delivery GROUP BY status"))
    return rows.get("done", 0) + rows.get("failed", 0), rows.get("pending", 0) + rows.get("running", 0)


def pg_backends(db: Database) -> tuple[list[int], int, int]:
    """``(backend pids of the database, connections open to it, max_connections)``."""
    rows = db.rows("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
    limit = int(db.rows("SHOW max_connections")[0][0])
    return [r[0] for r in rows], len(rows) + 1, limit


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy so far (``/proc/stat``: all but idle and
    iowait), every process of every user: the machine is shared."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def cpu_snapshot(nodes: list[Node], db: Database) -> dict[str, dict[int, float]]:
    """CPU seconds so far per role (web, cluster, pg, bench, machine) and pid (the
    machine's under pid 0)."""
    children, cmd = proc_table()
    web, cluster = [], []
    for node in nodes:
        w, c = node.split(children, cmd)
        web += w
        cluster += c
    pg, _, _ = pg_backends(db)
    return {
        "web": {p: cpu_seconds(p, reaped=True) for p in web},
        "cluster": {p: cpu_seconds(p, reaped=True) for p in cluster},
        "pg": {p: cpu_seconds(p) for p in pg},
        "bench": {os.getpid(): cpu_seconds(os.getpid())},
        "machine": {0: machine_busy()},
    }


def cpu_rates(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]], seconds: float) -> dict[str, float]:
    """CPU per second of each role between two snapshots. The server's processes: the
    growth of their sum with what they reaped (a process that ended meanwhile moved its
    CPU to its parent's reaped figure; one that started counts from 0). PostgreSQL's
    backends (reaped by the postmaster, not counted): each one's own growth."""
    rates = {}
    for role in after:
        if role in ("web", "cluster"):
            grown = sum(after[role].values()) - sum(before[role].values())
        else:
            grown = sum(max(0.0, v - before[role].get(pid, 0.0)) for pid, v in after[role].items())
        rates[role] = max(0.0, grown) / seconds
    return rates


def ran_out(cpu: dict[str, float], conns: int, limit: int, refused: int) -> str:
    """The resource that ran out in a step, from CPU per second and connections."""
    cores = os.cpu_count() or 1
    busy = cpu["machine"]
    parts = []
    if busy >= 0.85 * cores:
        top = max(("web", "cluster", "pg"), key=lambda k: cpu[k])
        others = busy - sum(cpu[k] for k in ("web", "cluster", "pg", "bench"))
        parts.append(f"CPU ({busy:.2f} of {cores} cores busy, {max(0.0, others):.2f} not ours; most of ours: {top})")
    if conns >= 0.9 * limit:
        parts.append(f"PG connections ({conns}/{limit})")
    if refused:
        parts.append("backlog bound")
    return "; ".join(parts) or "none"


def wait_ready(nodes: list[Node], db: Database, mailboxes: list[str], deadline: float) -> None:
    """Every web node answers, and a warm-up post's three wakes finish (the cluster runs)."""
    for node in nodes:
        if node.port is None:
            continue
        while True:
            if node.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{node.role} did not start; its log:\n{node.tail()}")
            with contextlib.suppress(OSError):
                with socket.create_connection(("127.0.0.1", node.port), timeout=1):
                    break
            time.sleep(0.3)
    ports = [n.port for n in nodes if n.port is not None]
    counter = [0]
    while True:
        result = asyncio.run(run_step(ports, mailboxes[:1], 1, 0.01, counter))
        if result["accepted"]:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"no post was accepted: {result['other']}\n{nodes[0].tail()}")
        time.sleep(0.5)
    while deliveries(db)[0] < 3:
        if time.monotonic() > deadline or any(n.proc.poll() is not None for n in nodes):
            raise SystemExit("the cluster did not run the warm-up post's wakes:\n" + "\n".join(n.tail() for n in nodes))
        time.sleep(0.3)


def start_nodes(args, db: Database, tmp: Path, root: Path) -> list[Node]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "WORKFORCE_VAR_DIR")}
    base.update({name: base.get(name, "") for name in THROTTLE_SETTINGS})  # the throttles off, the bound kept
    base.update(
        {
            "DJANGO_SETTINGS_MODULE": "workforce_project.settings",
            "WORKFORCE_ROOT": str(root),
            "WORKFORCE_LOG_LEVEL": "WARNING",
            "DATABASE_URL": db.url or "",
        }
    )
    if args.backlog_limit is not None:
        base["WORKFORCE_BACKLOG_LIMIT"] = str(args.backlog_limit)
    if args.web_nice is not None:
        base["WORKFORCE_WEB_NICE"] = str(args.web_nice)
    nodes: list[Node] = []
    if args.nodes == 1:
        port = free_port()
        env = {**base, "WORKFORCE_VAR_DIR": str(tmp / "var")}
        nodes.append(Node("serve", ["serve", "--addr", f"127.0.0.1:{port}"], env, tmp / "serve.log", port))
        return nodes
    import redis

    redis.Redis.from_url(args.redis_url).flushdb()
    (tmp / "vaults").mkdir()  # the folder every node mounts
    base.update(
        {
            "WORKFORCE_MULTI_NODE": "true",
            "WORKFORCE_BROKER_URL": args.redis_url,
            "DJANGO_SECRET_KEY": "saturation-bench-one-key-for-every-node",
            "WORKFORCE_VAULT_DIR": str(tmp / "vaults"),
        }
    )
    for n in range(args.nodes):
        port = free_port()
        env = {**base, "WORKFORCE_VAR_DIR": str(tmp / f"var-web{n}")}
        nodes.append(Node("web", ["serve", "--no-cluster", "--addr", f"127.0.0.1:{port}"], env, tmp / f"web{n}.log", port))
    for n in range(args.nodes):
        env = {**base, "WORKFORCE_VAR_DIR": str(tmp / f"var-work{n}")}
        nodes.append(Node("work", ["work"], env, tmp / f"work{n}.log"))
    return nodes


def fmt(value: float | None, scale: float = 1000.0) -> str:
    return "-" if value is None else f"{value * scale:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--steps", default="8,32,128,512")
    parser.add_argument("--step-seconds", type=float, default=20.0)
    parser.add_argument("--mailboxes", type=int, default=16)
    parser.add_argument("--backlog-limit", type=int, default=None)
    parser.add_argument("--web-nice", type=int, default=None)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds for the whole run")
    parser.add_argument("--all-steps", action="store_true", help="run every step even once the rate stopped growing")
    parser.add_argument("--pg-url", default=DEFAULT_PG)
    parser.add_argument("--redis-url", default=DEFAULT_REDIS)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    began = time.monotonic()
    deadline = began + args.budget
    steps = [int(s) for s in args.steps.split(",") if s.strip()]
    tmp = Path(tempfile.mkdtemp(prefix="wf_saturation_"))
    root = tmp / "tree"
    mailboxes = write_tree(root, args.mailboxes)
    db = Database("postgres", tmp, args.pg_url, prefix="wf_saturation")
    nodes: list[Node] = []
    results = []
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        nodes = start_nodes(args, db, tmp, root)
        wait_ready(nodes, db, mailboxes, min(deadline, time.monotonic() + 180))
        ports = [n.port for n in nodes if n.port is not None]
        topology = (
            "serve (web + cluster)"
            if args.nodes == 1
            else f"{args.nodes} web nodes (serve --no-cluster) + {args.nodes} worker nodes (work), Redis broker"
        )
        print(f"saturation: {topology}; {args.mailboxes} mailboxes x 3 echo seats; PostgreSQL; {os.cpu_count()} cores")
        print(
            "posters | posts/s | wakes/s | p50 ms | p95 ms | backlog | 503 (p95 ms) | other | "
            "CPU/s web | cluster | pg | bench | machine | PG conns | ran out"
        )
        counter = [0]
        best = 0.0
        for posters in steps:
            left = deadline - time.monotonic() - 40  # keep time to stop the nodes
            if left < 5:
                print(f"(budget spent: steps from {posters} posters not run)")
                break
            seconds = min(args.step_seconds, left)
            finished0, _ = deliveries(db)
            cpu0, t0 = cpu_snapshot(nodes, db), time.monotonic()
            result = asyncio.run(run_step(ports, mailboxes, posters, seconds, counter))
            elapsed = time.monotonic() - t0
            cpu1 = cpu_snapshot(nodes, db)
            finished1, backlog = deliveries(db)
            _, conns, limit = pg_backends(db)
            cpu = cpu_rates(cpu0, cpu1, elapsed)
            rate = len(result["accepted"]) / elapsed
            row = {
                "posters": posters,
                "seconds": round(elapsed, 1),
                "posts_per_s": round(rate, 1),
                "wakes_per_s": round((finished1 - finished0) / elapsed, 1),
                "p50_ms": pct(result["accepted"], 0.5),
                "p95_ms": pct(result["accepted"], 0.95),
                "backlog": backlog,
                "refused_503": len(result["refused"]),
                "refused_p95_ms": pct(result["refused"], 0.95),
                "other": result["other"],
                "cpu_per_s": {k: round(v, 2) for k, v in cpu.items()},
                "pg_connections": conns,
                "pg_max_connections": limit,
                "ran_out": ran_out(cpu, conns, limit, len(result["refused"])),
            }
            results.append(row)
            print(
                f"{posters:7d} | {rate:7.1f} | {row['wakes_per_s']:7.1f} | {fmt(row['p50_ms']):>6} | {fmt(row['p95_ms']):>6} | "
                f"{backlog:7d} | {len(result['refused']):5d} ({fmt(row['refused_p95_ms'])}) | "
                f"{sum(result['other'].values()) or '-'} | {cpu['web']:9.2f} | {cpu['cluster']:7.2f} | {cpu['pg']:4.2f} | "
                f"{cpu['bench']:5.2f} | {cpu['machine']:7.2f} | {conns}/{limit} | {row['ran_out']}",
                flush=True,
            )
            if result["other"]:
                print(f"        other answers: {result['other']}")
            if not args.all_steps and best and rate < best * GROWTH:
                print(f"(posts/s grew less than {round((GROWTH - 1) * 100)} % over the step before: stopped raising)")
                break
            best = max(best, rate)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "steps": results}, indent=2))
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        for node in nodes:
            node.stop()
        db.drop()
        if args.nodes > 1:
            with contextlib.suppress(Exception):
                import redis

                redis.Redis.from_url(args.redis_url).flushdb()
        if not os.environ.get("WF_BENCH_KEEP"):
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
        print(f"total {time.monotonic() - began:.0f} s (budget {args.budget:.0f} s)")


if __name__ == "__main__":
    main()
