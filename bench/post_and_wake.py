"""Durable post-and-wake on one thread, against LangGraph doing the same work (the speed goal,
"Benchmarks that keep score").

Ours: a fresh database (a temp SQLite file, or a PostgreSQL database created and dropped
here), a tree with one mailbox (``bench.thread``) whose one member is an echo seat
(``embedded/echo`` with ``post-to-mailbox`` and the standing order to answer every post
there), and a real task cluster: ``manage.py serve`` (web server and cluster, posts over
HTTP; the default) or ``manage.py qcluster`` beside this process (``--via service``: posts
through ``do_run_action``). One poster posts; the post wakes the seat; the seat's turn
posts ``bench.echo heard: u_bench in bench.thread: post <n>`` into the mailbox; the next
post goes only once that answer line is visible (committed: on PostgreSQL a trigger this
bench adds to its own throwaway database NOTIFYs each new line and the poster LISTENs; on
SQLite the poster polls every 2 ms). A few warm-up posts go to another mailbox first.

Peer (``--peer langgraph``; ``auto``, the default, runs it when ``langgraph`` and
``langgraph-checkpoint-postgres`` are importable: ``pip install -e ".[bench]"``): a
LangGraph graph with two nodes, ``post`` (appends the post to the thread's state) and
``echo`` (appends ``bench.echo heard: <text>``), compiled with ``PostgresSaver`` on the same
PostgreSQL database (with ``--db sqlite``, on a scratch PostgreSQL database), one thread,
the same number of sequential ``invoke`` calls (LangGraph's default durability, ``async``:
invoke returns once its checkpoints are written).

Prints, for each side, the rate (posts/s), the flatness (cost of the last 100 posts / the
first 100; halves of the run when it has fewer than 200), and for ours the stage split
derived from the rows the product records (Request ``started_at``/``finished_at``,
Delivery ``started_at`` (first claim)/``finished_at``, the seat's ``seatPost`` request,
django-q2's task rows when it kept them), the CPU the server processes spent per
post-and-wake (from /proc), then the ratio ours/LangGraph at N and a one-line verdict
against the goal: ≥ 3 × LangGraph at 1,000 posts (runs of fewer posts are judged against
that goal too), ≥ 10 × at 10,000 (and above), flat = last100/first100 ≤ 1.2.

Bounded: the measured phases stop at ``--budget`` seconds (default 270 s for up to 1,000
posts, else 0.5 s per post), ours taking at most 70 % of it when a peer runs; a side
that stops early says so, and the ratio is then taken over the posts both sides made.
Processes, the database and Redis db 8 are cleaned up on exit, Ctrl-C and SIGTERM
(``WF_BENCH_KEEP=1`` keeps the tree and the server's log in the temp directory).

Usage::

    python bench/post_and_wake.py [--posts 1000] [--db postgres|sqlite] [--broker orm|redis]
        [--via http|service] [--peer auto|langgraph|none] [--workers N] [--budget S] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import importlib.util
import json
import operator
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Annotated, TypedDict

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")  # a real cluster, not sync
os.environ.setdefault("WORKFORCE_LOG_LEVEL", "WARNING")

from bench._db import cluster_cpu, no_throttles, pg_sessions, scratch_postgres, throwaway_database  # noqa: E402

no_throttles()
from bench.seat_wake import percentile  # noqa: E402

SEAT, USER, THREAD, WARM = "bench.echo", "u_bench", "bench.thread", "bench.warm"
PRINCIPAL = "workforce"  # the mailbox owner (WORKFORCE_OPEN_USER): the writer a woken turn names
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_REDIS = "redis://127.0.0.1:6379/8"
FLAT = 1.2  # last100/first100 at most this is "flat"
WORKER_MD = """---
description: Echoes every post back into the mailbox.
model: embedded/echo
tools: [post-to-mailbox]
---

You answer every post you hear in its mailbox, with post-to-mailbox.
/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}
"""


def goal_ratio(n: int) -> float:
    """The goal ours/LangGraph at ``n`` posts: 3 up to 10,000 posts, 10 from there."""
    return 10.0 if n >= 10_000 else 3.0


def across_machines_goal_ratio(n: int) -> float:
    """The later "Across machines, and lean on one" issue's goal ours/LangGraph at ``n``
    posts: 1 up to 10,000 posts, 3 from there (printed beside ``goal_ratio``'s verdict)."""
    return 3.0 if n >= 10_000 else 1.0


def write_tree(root: Path) -> Path:
    (root / "teams/bench/workers/echo").mkdir(parents=True)
    (root / "teams/bench/workers/echo/WORKER.md").write_text(WORKER_MD)
    for name in ("thread", "warm"):
        path = root / f"teams/bench/mailboxes/{name}/MAILBOX.md"
        path.parent.mkdir(parents=True)
        path.write_text(f"---\ndescription: One thread.\nmembers: [{SEAT}]\n---\n\nBenchmark.\n")
    return root


def flatness(costs: list[float]) -> tuple[float, int]:
    """(cost of the last w posts / the first w, w) with w = min(100, half the run)."""
    w = min(100, len(costs) // 2)
    if w == 0:
        return float("nan"), 0
    return sum(costs[-w:]) / sum(costs[:w]), w


# ----------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_table() -> tuple[dict[int, list[int]], dict[int, float], dict[int, str]]:
    """``(children by ppid, CPU seconds incl. reaped children by pid, cmdline by pid)``."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = defaultdict(list)
    cpu: dict[int, float] = {}
    cmd: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        children[int(rest[1])].append(int(entry))
        cpu[int(entry)] = sum(int(x) for x in rest[11:15]) / tick  # utime stime cutime cstime
    return children, cpu, cmd


def descendants(pid: int, children: dict[int, list[int]]) -> list[int]:
    found, stack = [], [pid]
    while stack:
        p = stack.pop()
        found.append(p)
        stack.extend(children.get(p, []))
    return found


def server_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of the process tree under ``pid``, split into the task cluster
    (a ``qcluster`` process and its workers) and the rest (the web server)."""
    children, cpu, cmd = proc_table()
    tree = descendants(pid, children)
    cluster_root = next((p for p in tree if "qcluster" in cmd.get(p, "")), None)
    cluster = set(descendants(cluster_root, children)) if cluster_root else set()
    roles = {}
    if cluster_root:
        from django.conf import settings

        roles = cluster_cpu(cluster_root, int(settings.Q_CLUSTER["workers"]))  # without reaped children
    return {
        "cluster": sum(cpu.get(p, 0.0) for p in cluster),
        "web": sum(cpu.get(p, 0.0) for p in tree if p not in cluster),
        **{f"cluster_{role}": seconds for role, seconds in roles.items()},
    }


class Server:
    """``manage.py serve`` or ``manage.py qcluster`` as a child process, stopped the way
    the project stops it (SIGTERM to the main process only), then anything it left
    behind killed by pid."""

    def __init__(self, args: list[str], log: Path):
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), *args],
            cwd=REPO,
            env=dict(os.environ),
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        try:
            return self.log.read_text()[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        children, _, _ = proc_table()
        tree = descendants(self.proc.pid, children)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pass
        _, _, cmd = proc_table()
        for pid in tree:  # what a clean stop left behind: ours, by pid, still running manage.py
            if "manage.py" in cmd.get(pid, ""):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


# ----------------------------------------------------------------------------- ours


class AnswerWatch:
    """Tells when a seat's line in a mailbox is visible. PostgreSQL: LISTEN on a
    notification a trigger sends for each new line (so it arrives at commit); SQLite:
    polling for the next seat-authored line every ``poll`` seconds."""

    CHANNEL = "wf_bench_line"

    def __init__(self, connection, url: str | None, poll: float = 0.002):
        from mailboxes.models import Line

        self.connection = connection
        self.poll = poll
        self.table = Line._meta.db_table
        self.listener = None
        self.seen: dict[int, list[int]] = defaultdict(list)  # session pk -> seat line seqs, in order
        if url:
            import psycopg

            with connection.cursor() as cur:
                cur.execute(f"""
                    CREATE OR REPLACE FUNCTION wf_bench_line_notify() RETURNS trigger AS $$
                    BEGIN
                      PERFORM pg_notify('{self.CHANNEL}', NEW.session_id::text || ' ' || NEW.seq::text
                                        || ' ' || CASE WHEN NEW.seat_authored THEN '1' ELSE '0' END);
                      RETURN NULL;
                    END $$ LANGUAGE plpgsql""")
                cur.execute(
                    f"CREATE TRIGGER wf_bench_line_notify AFTER INSERT ON {self.table} "
                    "FOR EACH ROW EXECUTE FUNCTION wf_bench_line_notify()"
                )
            self.listener = psycopg.connect(url, autocommit=True)
            self.listener.execute(f"LISTEN {self.CHANNEL}")

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()

    def wait(self, session_pk: int, count: int, timeout: float) -> float:
        """Wait until ``session_pk`` has ``count`` seat lines seen; the time.time() it
        became visible. Raises TimeoutError."""
        deadline = time.monotonic() + timeout
        seen = self.seen[session_pk]
        while len(seen) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if self.listener is not None:
                heard = False
                for note in self.listener.notifies(timeout=min(remaining, 0.5), stop_after=1):
                    heard = True
                    pk, seq, seat = (int(x) for x in note.payload.split())
                    if seat:
                        self._add(pk, [seq])
                if heard:
                    continue
            # SQLite; or on PostgreSQL half a second without a notification (a safety net)
            last = seen[-1] if seen else 0
            with self.connection.cursor() as cur:
                cur.execute(
                    f"SELECT seq FROM {self.table} WHERE session_id = %s AND seq > %s AND seat_authored = %s ORDER BY seq",
                    [session_pk, last, True],
                )
                self._add(session_pk, [row[0] for row in cur.fetchall()])
            if len(seen) < count and self.listener is None:
                time.sleep(self.poll)
        return time.time()

    def _add(self, session_pk: int, seqs: list[int]) -> None:
        seen = self.seen[session_pk]
        for seq in seqs:
            if not seen or seq > seen[-1]:  # the poll and a late notification may both report a line
                seen.append(seq)


def run_ours(args, connection, root: Path, logdir: Path, pg_url: str | None, deadline: float) -> dict:
    from django.conf import settings

    from mailboxes.models import Delivery
    from workforce.models import Session

    q = settings.Q_CLUSTER
    broker = f"Redis broker ({q['redis']})" if q.get("redis") else f"ORM broker (poll {q.get('poll')} s)"
    engine = connection.vendor
    port = None
    if args.via == "http":
        port = free_port()
        server = Server(["serve", "--addr", f"127.0.0.1:{port}", "--root", str(root)], logdir / "serve.log")
    else:
        from workforce_project.boot import boot, open_roster

        open_roster(boot(root))
        server = Server(["qcluster"], logdir / "cluster.log")
    watch = None
    try:
        if port:
            wait_http(port, server)
        watch = AnswerWatch(connection, pg_url)
        post = http_poster(port) if port else service_poster()
        sessions = {s.session_id: s.pk for s in Session.objects.filter(session_id__in=[THREAD, WARM])}

        def one(session_id: str, n: int, count: int, timeout: float) -> dict:
            sent = time.time()
            line_id = post(session_id, f"post {n}")
            answered = time.time()
            try:
                seen = watch.wait(sessions[session_id], count, timeout)
            except TimeoutError:
                raise SystemExit(
                    f"no answer to post {n} on {session_id} within {timeout:.0f}s; server log:\n{server.tail()}"
                ) from None
            if not server.alive():
                raise SystemExit(f"the server stopped; its log:\n{server.tail()}")
            return {"line_id": line_id, "sent": sent, "answered": answered, "seen": seen}

        for n in range(args.warmup):  # every worker process boots, imports, connects
            one(WARM, n, n + 1, 180)
        print(
            f"ours: {engine}, {broker}, via {'HTTP (manage.py serve)' if port else 'do_run_action + manage.py qcluster'}, "
            f"{q['workers']} cluster workers, {SEAT} on embedded/echo with post-to-mailbox; "
            f"{args.posts:,} posts after {args.warmup} warm-up posts",
            flush=True,
        )
        sessions0 = pg_sessions(pg_url) if pg_url else None
        cpu0, own0 = server_cpu(server.proc.pid), time.process_time()
        posts: list[dict] = []
        t0 = time.time()
        for n in range(args.posts):
            posts.append(one(THREAD, n, n + 1, 60))
            if (n + 1) % max(1, args.posts // 10) == 0:
                print(f"  {n + 1:>6,} posts  {(n + 1) / (time.time() - t0):6.2f} posts/s", flush=True)
            if time.monotonic() > deadline:
                print(f"  stopped by the time budget after {n + 1:,} of {args.posts:,} posts", flush=True)
                break
        elapsed = time.time() - t0
        cpu1, own1 = server_cpu(server.proc.pid), time.process_time()
        time.sleep(1.5)  # backends report their sessions to the statistics within a second
        sessions1 = pg_sessions(pg_url) if pg_url else None
        settled = time.monotonic() + 30  # the last delivery settles after its answer line
        while Delivery.objects.filter(mailbox_id=sessions[THREAD], status__in=["pending", "running"]).exists():
            if time.monotonic() > settled:
                print("  (deliveries still running 30 s after the last answer)")
                break
            time.sleep(0.05)
    finally:
        if watch is not None:
            watch.close()
        server.stop()
    done = len(posts)
    cpu = {k: (cpu1[k] - cpu0[k]) * 1000 / done for k in cpu0}
    cpu["poster"] = (own1 - own0) * 1000 / done
    return {
        "engine": engine,
        "broker": broker,
        "via": args.via,
        "workers": q["workers"],
        "posts": posts,
        "elapsed": elapsed,
        "cpu_ms": cpu,
        # New PostgreSQL connections per post-and-wake, by every process (the web server,
        # its cluster, this poster and its watcher), minus the statistics read's own.
        "connections": (sessions1 - sessions0 - 1) / done if sessions0 is not None and sessions1 is not None else None,
        "stages": stage_split(posts),
    }


def wait_http(port: int, server: Server) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if not server.alive():
            raise SystemExit(f"manage.py serve stopped; its log:\n{server.tail()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", f"/api/mailboxes/{THREAD}/transcript?limit=1")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"manage.py serve did not answer within 180 s; its log:\n{server.tail()}")


def http_poster(port: int):
    held = {"conn": None, "used": 0.0}

    def post(session_id: str, body: str) -> str:
        payload = json.dumps({"userId": USER, "input": {"body": body}})
        if held["conn"] is None or time.monotonic() - held["used"] > 2:
            # uvicorn closes a keep-alive connection idle for 5 s; a post is never retried
            if held["conn"] is not None:
                held["conn"].close()
            held["conn"] = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn = held["conn"]
        conn.request(
            "POST", f"/api/flows/mailbox/{session_id}/actions/post", body=payload, headers={"content-type": "application/json"}
        )
        response = conn.getresponse()
        data = json.loads(response.read())
        if response.status >= 300 or data.get("status") != "completed":
            raise SystemExit(f"post refused: {response.status} {data}")
        held["used"] = time.monotonic()
        return data["output"]["id"]

    return post


def service_poster():
    from workforce.models import DEFAULT_ORG_ID
    from workforce.sessions import do_run_action, ensure_organization

    org = ensure_organization(DEFAULT_ORG_ID)

    def post(session_id: str, body: str) -> str:
        request = do_run_action(org=org, kind="mailbox", session_id=session_id, action="post", input={"body": body}, user_id=USER)
        if request.status != "completed":
            raise SystemExit(f"post refused: {request.error}")
        return request.output["id"]

    return post


def rows_by_pk(model, pks, *fields) -> dict:
    pks = [pk for pk in pks if pk is not None]
    found = {}
    for start in range(0, len(pks), 500):
        for row in model.objects.filter(pk__in=pks[start : start + 500]).values("pk", *fields):
            found[row["pk"]] = row
    return found


def stage_split(posts: list[dict]) -> dict:
    """Per-stage durations in ms (lists, one per post where the rows allow it), from the
    client's clock and the timestamps the rows record. Stages that cannot be derived get
    a note instead of numbers."""
    from django_q.models import Task

    from mailboxes.models import Delivery, Line
    from workforce.models import Request, Session

    thread = Session.objects.get(session_id=THREAD)
    lines = {
        row["line_id"]: row
        for row in Line.objects.filter(session=thread).values("line_id", "seq", "request_id", "seat_authored", "body")
    }
    answers = sorted((r for r in lines.values() if r["seat_authored"]), key=lambda r: r["seq"])
    deliveries = {}
    for row in Delivery.objects.filter(mailbox=thread).values(
        "pk", "post_id", "status", "attempts", "started_at", "finished_at", "turn_request_id"
    ):
        deliveries[row["post_id"]] = row
    requests = rows_by_pk(
        Request,
        [lines[p["line_id"]]["request_id"] for p in posts if p["line_id"] in lines]
        + [a["request_id"] for a in answers]
        + [d["turn_request_id"] for d in deliveries.values()],
        "started_at",
        "finished_at",
        "parent_request_id",
        "action",
    )
    answer_by_turn = {requests[a["request_id"]]["parent_request_id"]: a for a in answers if a["request_id"] in requests}
    tasks = {}
    try:
        from mailboxes.notify import DELIVER_TASK

        for task in Task.objects.filter(func=DELIVER_TASK).only("args", "stopped"):
            if task.args:
                tasks[task.args[0]] = task.stopped
    except Exception:  # noqa: BLE001 - django-q's tables are the cluster's business
        tasks = {}

    def ms(a, b):
        return (b.timestamp() - a.timestamp()) * 1000 if a and b else None

    stages: dict[str, list] = defaultdict(list)
    problems: list[str] = []
    expected_answers = 0
    sample = ""
    for n, p in enumerate(posts):
        stages["cycle"].append((p["seen"] - p["sent"]) * 1000)
        stages["post"].append((p["answered"] - p["sent"]) * 1000)
        line, d = lines.get(p["line_id"]), deliveries.get(p["line_id"])
        if line is None or d is None:
            problems.append(f"post {n}: no {'line' if line is None else 'delivery'} row")
            continue
        if d["status"] != "done" or d["attempts"] != 1:
            problems.append(f"post {n}: delivery {d['status']} after {d['attempts']} claim(s)")
        req = requests.get(line["request_id"]) or {}
        turn = requests.get(d["turn_request_id"]) or {}
        answer = answer_by_turn.get(d["turn_request_id"])
        if answer is None:
            problems.append(f"post {n}: no answer line from its turn")
        elif answer["body"].startswith(f"{SEAT} heard: ") and answer["body"].endswith(f"in {THREAD}: post {n}"):
            expected_answers += 1
            sample = sample or answer["body"]
        else:
            problems.append(f"post {n}: answered {answer['body']!r}")
        commit = req.get("finished_at")
        stages["service"].append(ms(req.get("started_at"), commit))
        stages["commit_claim"].append(ms(commit, d["started_at"]))
        stages["claim_turn"].append(ms(d["started_at"], turn.get("started_at")))
        stages["turn"].append(ms(turn.get("started_at"), turn.get("finished_at")))
        stages["settle"].append(ms(turn.get("finished_at"), d["finished_at"]))
        stages["settle_task"].append(ms(turn.get("finished_at"), tasks.get(d["pk"])))
        answer_req = requests.get(answer["request_id"]) if answer else None
        answer_at = answer_req["finished_at"] if answer_req else None
        stages["turn_answer"].append(ms(turn.get("started_at"), answer_at))
        if answer_at:
            stages["answer_seen"].append(p["seen"] * 1000 - answer_at.timestamp() * 1000)
    return {
        "stages": {k: [v for v in vals if v is not None] for k, vals in stages.items()},
        "problems": problems,
        "answers_ok": expected_answers,
        "sample": sample,
    }


STAGES = [
    ("cycle", "cycle: post sent -> its answer line seen", "the poster's clock"),
    ("post", "post (the call, as the poster sees it)", "poster's clock: sent -> answered"),
    ("service", "  of which the service", "post Request started_at -> finished_at"),
    ("commit_claim", "commit -> claim", "post Request finished_at (set just before COMMIT) -> Delivery started_at"),
    ("claim_turn", "claim -> turn start", "Delivery started_at -> onMailboxPost Request started_at"),
    ("turn", "turn", "onMailboxPost Request started_at -> finished_at"),
    ("turn_answer", "  turn start -> answer line written", "-> the seat's seatPost Request finished_at"),
    ("settle", "settle", "turn finished_at -> Delivery finished_at (before the settle's COMMIT)"),
    ("settle_task", "  through the task's return", "-> django-q2 Task.stopped (COMMIT included)"),
    ("answer_seen", "answer line written -> seen by the poster", "seatPost finished_at -> poster's clock"),
]


def print_stages(split: dict, n: int) -> None:
    print(f"  stage split (ms over {n:,} posts; median / p95; where from):")
    for key, label, source in STAGES:
        vals = split["stages"].get(key) or []
        if not vals:
            why = (
                "not derivable: django-q2 kept no task rows for these deliveries"
                if key.endswith("task")
                else "not derivable from the rows"
            )
            print(f"    {label:<44} {'-':>7} {'-':>7}  {why}")
            continue
        partial = "" if len(vals) >= n else f" [{len(vals):,} posts]"
        print(f"    {label:<44} {statistics.median(vals):7.1f} {percentile(vals, 0.95):7.1f}  {source}{partial}")
    print(
        "    not recorded anywhere: when the broker handed the task to a worker (django-q2's Task.started is the\n"
        "    enqueue time, inside the post's transaction), so commit -> claim is one stage; the answer line lands\n"
        "    mid-turn, so the rest of the turn and the settle overlap the next post"
    )
    if split["problems"]:
        print(f"  problems: {len(split['problems'])}: " + "; ".join(split["problems"][:5]))
    print(f"  answers: {split['answers_ok']:,} of {n:,} posts got their own answer line, e.g. {split['sample']!r}")


# ----------------------------------------------------------------------------- the peer


class Thread(TypedDict, total=False):
    """LangGraph's thread state: the lines so far (appended), and the post being made."""

    lines: Annotated[list, operator.add]
    post: str


def langgraph_available() -> bool:
    try:
        return all(importlib.util.find_spec(name) for name in ("langgraph.graph", "langgraph.checkpoint.postgres"))
    except ImportError:
        return False


def run_langgraph(url: str, n: int, warmup: int, deadline: float) -> dict:
    """``n`` sequential invokes of a post + echo graph on one thread, with PostgresSaver
    on ``url``. Returns ``{"costs": [s per invoke], "elapsed": s}``."""
    import langgraph
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.graph import END, START, StateGraph

    def post(state: Thread) -> dict:
        return {"lines": [{"from": USER, "text": state["post"]}]}

    def echo(state: Thread) -> dict:
        return {"lines": [{"from": SEAT, "text": f"{SEAT} heard: {PRINCIPAL} in {THREAD}: {state['lines'][-1]['text']}"}]}

    builder = StateGraph(Thread)
    builder.add_node("post", post)
    builder.add_node("echo", echo)
    builder.add_edge(START, "post")
    builder.add_edge("post", "echo")
    builder.add_edge("echo", END)
    version = getattr(langgraph, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("langgraph")
    print(
        f"LangGraph {version}: PostgresSaver on {url.rsplit('/', 1)[-1]}, one thread, {n:,} invokes "
        f"after {warmup} warm-up invokes on another thread",
        flush=True,
    )
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        for i in range(warmup):
            graph.invoke({"post": f"post {i}"}, {"configurable": {"thread_id": WARM}})
        costs: list[float] = []
        t0 = time.time()
        for i in range(n):
            t = time.perf_counter()
            state = graph.invoke({"post": f"post {i}"}, {"configurable": {"thread_id": THREAD}})
            costs.append(time.perf_counter() - t)
            if state["lines"][-1]["text"] != f"{SEAT} heard: {PRINCIPAL} in {THREAD}: post {i}" or len(state["lines"]) != 2 * (
                i + 1
            ):
                raise SystemExit(f"LangGraph's thread went wrong at post {i}: {state['lines'][-2:]}")
            if (i + 1) % max(1, n // 10) == 0:
                print(f"  {i + 1:>6,} posts  {(i + 1) / (time.time() - t0):6.2f} posts/s", flush=True)
            if time.monotonic() > deadline:
                print(f"  stopped by the time budget after {i + 1:,} of {n:,} posts", flush=True)
                break
        return {"costs": costs, "elapsed": time.time() - t0}


# ----------------------------------------------------------------------------- main


def rate_over(ours_posts: list[dict], m: int) -> float:
    """Ours' rate over its first ``m`` posts (posts/s)."""
    return m / (ours_posts[m - 1]["seen"] - ours_posts[0]["sent"])


def _interrupt(signum, frame):
    raise KeyboardInterrupt  # SIGTERM cleans up the way Ctrl-C does


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=1000, help="posts in the thread (default 1,000; try 10000)")
    parser.add_argument(
        "--db",
        choices=["postgres", "sqlite"],
        default="postgres",
        help=f"a fresh database (postgres: on DATABASE_URL's server, default {DEFAULT_PG})",
    )
    parser.add_argument("--broker", choices=["orm", "redis"], default="orm")
    parser.add_argument("--redis-url", default=DEFAULT_REDIS, help="flushed at start and end: a db nothing else uses")
    parser.add_argument(
        "--via",
        choices=["http", "service"],
        default="http",
        help="http: manage.py serve, posts over HTTP; service: do_run_action + manage.py qcluster",
    )
    parser.add_argument("--peer", choices=["auto", "langgraph", "none"], default="auto")
    parser.add_argument("--workers", type=int, default=None, help="cluster workers (default: settings)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds for the measured phases (default 270 up to 1,000 posts, else 0.5 per post)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    budget = args.budget or (270.0 if args.posts <= 1000 else 0.5 * args.posts)
    peer = args.peer != "none" and (args.peer == "langgraph" or langgraph_available())
    if args.peer == "langgraph" and not langgraph_available():
        raise SystemExit('--peer langgraph needs the bench extra: pip install -e ".[bench]"')

    signal.signal(signal.SIGTERM, _interrupt)
    pg_server = os.environ.get("DATABASE_URL", "")
    if not pg_server.startswith(("postgres://", "postgresql://")):
        pg_server = DEFAULT_PG
    if args.db == "postgres":
        os.environ["DATABASE_URL"] = pg_server
    else:
        os.environ.pop("DATABASE_URL", None)
    if args.broker == "redis":
        import redis

        redis.Redis.from_url(args.redis_url).flushdb()
        os.environ["WORKFORCE_BROKER_URL"] = args.redis_url
    else:
        os.environ.pop("WORKFORCE_BROKER_URL", None)
    if args.workers:
        os.environ["WORKFORCE_Q_WORKERS"] = str(args.workers)
    scratch = Path(tempfile.mkdtemp(prefix="wf_bench_pw_"))
    root = write_tree(scratch / "tree")
    os.environ["WORKFORCE_ROOT"] = str(root)
    start = time.monotonic()
    result: dict = {"posts_asked": args.posts, "db": args.db, "broker": args.broker, "via": args.via}
    try:
        with throwaway_database() as connection:
            from django.conf import settings

            assert not settings.Q_CLUSTER.get("sync"), "the bench needs a real cluster"
            url = os.environ["DATABASE_URL"] if args.db == "postgres" else None
            ours = run_ours(args, connection, root, scratch, url, start + budget * (0.7 if peer else 1.0))
            connection.close()
            n = len(ours["posts"])
            costs = [(p["seen"] - p["sent"]) for p in ours["posts"]]
            flat, w = flatness(costs)
            rate = n / ours["elapsed"]
            print(
                f"  ours: {rate:.2f} posts/s over {n:,} posts ({ours['elapsed']:.1f} s); flatness last{w}/first{w} "
                f"{flat:.2f} ({sum(costs[:w]) / w * 1000:.1f} -> {sum(costs[-w:]) / w * 1000:.1f} ms per post)"
            )
            print_stages(ours["stages"], n)
            cpu = ours["cpu_ms"]
            print(
                f"  CPU per post-and-wake: cluster {cpu['cluster']:.1f} ms"
                + (f", web server {cpu['web']:.1f} ms" if args.via == "http" else "")
                + f", this process (poster and watcher) {cpu['poster']:.1f} ms  (/proc; the database server not counted)"
                + (
                    f"\n    cluster by process: workers {cpu['cluster_workers']:.1f}, monitor {cpu['cluster_monitor']:.1f}, "
                    f"pusher {cpu['cluster_pusher']:.1f}, sentinel {cpu['cluster_sentinel']:.1f}, main {cpu['cluster_main']:.1f} ms"
                    if "cluster_workers" in cpu
                    else ""
                )
                + (
                    f"\n  new PostgreSQL connections per post-and-wake: {ours['connections']:.2f}"
                    if ours.get("connections") is not None
                    else ""
                )
            )
            result["ours"] = {
                "rate": rate,
                "posts": n,
                "flatness": flat,
                "window": w,
                "cpu_ms": cpu,
                "stages_median_ms": {k: statistics.median(v) for k, v in ours["stages"]["stages"].items() if v},
                "problems": len(ours["stages"]["problems"]),
                "answers_ok": ours["stages"]["answers_ok"],
            }
            peer_result = None
            if peer:
                with contextlib.ExitStack() as stack:
                    peer_url = url or stack.enter_context(scratch_postgres(pg_server))
                    if not url:
                        print("  (LangGraph runs on a scratch PostgreSQL database: ours ran on SQLite)")
                    peer_result = run_langgraph(peer_url, n, args.warmup, start + budget)
            verdict(result, ours, peer_result, rate, flat, w)
    finally:
        if args.broker == "redis":
            with contextlib.suppress(Exception):
                redis.Redis.from_url(args.redis_url).flushdb()
        if not os.environ.get("WF_BENCH_KEEP"):
            shutil.rmtree(scratch, ignore_errors=True)
        if args.db == "sqlite" and os.environ.get("WORKFORCE_VAR_DIR", "").startswith(tempfile.gettempdir()):
            shutil.rmtree(os.environ["WORKFORCE_VAR_DIR"], ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))


def verdict(result: dict, ours: dict, peer: dict | None, rate: float, flat: float, w: int) -> None:
    n = len(ours["posts"])
    asked = result["posts_asked"]
    flat_ok = flat <= FLAT
    flat_text = f"flatness {flat:.2f} {'<=' if flat_ok else '>'} {FLAT}"
    if peer is None:
        print(
            f'verdict: ratio not measured (no LangGraph peer: pip install -e ".[bench]"); {flat_text}'
            f"{'' if flat_ok else ' (not flat)'}"
        )
        return
    m = len(peer["costs"])
    peer_rate = m / peer["elapsed"]
    peer_flat, pw = flatness(peer["costs"])
    print(
        f"  LangGraph: {peer_rate:.2f} posts/s over {m:,} posts ({peer['elapsed']:.1f} s); flatness last{pw}/first{pw} "
        f"{peer_flat:.2f} ({sum(peer['costs'][:pw]) / pw * 1000:.1f} -> {sum(peer['costs'][-pw:]) / pw * 1000:.1f} ms per post)"
    )
    ours_rate = rate if m == n else rate_over(ours["posts"], m)
    ratio = ours_rate / peer_rate
    goal = goal_ratio(m)
    note = (
        "" if m == asked else f"; {m:,} of the {asked:,} posts asked, judged against the goal at {1000 if goal == 3 else 10000:,}"
    )
    print(f"  ratio ours/LangGraph at {m:,} posts: {ratio:.2f}  (goal >= {goal:g}{note})")
    result["langgraph"] = {"rate": peer_rate, "posts": m, "flatness": peer_flat, "window": pw}
    result["ratio"] = ratio
    ok = ratio >= goal and flat_ok
    print(
        f"verdict: {'MEETS' if ok else 'MISSES'} the goal: ours/LangGraph {ratio:.2f} {'>=' if ratio >= goal else '<'} {goal:g} "
        f"at {m:,} posts, ours {flat_text} (goal: >= 3 x at 1,000 posts, >= 10 x at 10,000, flat <= {FLAT})"
    )
    later = across_machines_goal_ratio(m)
    print(
        f"verdict (across-machines issue): {'MEETS' if ratio >= later else 'MISSES'} the goal: ours/LangGraph "
        f"{ratio:.2f} {'>=' if ratio >= later else '<'} {later:g} at {m:,} posts (goal: >= 1 x at 1,000 posts, >= 3 x at 10,000)"
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("interrupted; processes stopped, the database dropped", file=sys.stderr)
        sys.exit(130)
