"""How late a coordinator's rounds close after their deadline, on a real cluster.

Spec 004 "Letting delegates answer each other": a round closes when every delivery in it
has answered or failed, or at its deadline (``WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS``).
The cluster's round timer (``coordinators.services.do_close_overdue_rounds``, a sweep
every 0.5 s in its own thread in each cluster worker) should close it within 1 s of the
deadline; this bench measures how late it does.

For each deadline in ``--deadlines`` (seconds; one ``serve`` per deadline, since the
deadline is a setting):

1. starts the real ``manage.py serve`` (web server + its django-q2 cluster, ORM broker)
   on a free loopback port, against a database of its own (a temp SQLite file, or a
   fresh PostgreSQL database ``wf_deadline_<random>`` created and dropped here), on a
   tree written to a temp dir: coordinator ``bench.help`` (``routing: everyone``,
   ``rounds: 1``) over ``bench.alpha`` and ``bench.beta`` (``embedded/echo``, answering
   at once) and ``bench.slow`` (``openai/slow`` against a fake OpenAI-compatible server
   in this process, on loopback, that holds its answer to every person's post until the
   round has been measured, and answers anything else at once). So round 0 of every
   post closes at its deadline, and round 1 goes out without ``bench.slow``'s answer;
2. runs one warm-up conversation (not measured; its slow delegate answers at once) so
   every worker has booted, then opens ``--samples`` conversations (``POST
   /api/workers/bench.help/sessions``) and posts to each at once (``POST
   /api/flows/coordinator/<id>/actions/run``);
3. waits until every round 0 has closed and every round-1 delivery has been claimed by a
   worker, then reads the server's database directly and measures, per round 0:
   lateness (``coordinators_round.closed_at - deadline_at``; ``closed_by`` must be
   ``deadline``), when its round-1 deliveries were written (their ``created_at``, in the
   closing transaction) and when workers started them (first and last ``started_at``),
   all in milliseconds after the deadline. Who closed it: the timer (its ``sweeper:
   round-deadlines: [...]`` log line), the django-q2 Schedule or the minute sweep (a
   ``closeRound`` request not from the timer), or the conversation's own activity (no
   ``closeRound`` request: a quick delegate's answer landing after the deadline).

Prints a table per deadline (n, median, p95, max, in ms) with the machine's CPU use and
load average over the measured window, and a verdict line: PASS when every round 0
closed at its deadline and the largest lateness at every deadline is at most 1,000 ms.
Exit status 0 on PASS, 1 on FAIL, 2 when it could not run. ``--burn N`` runs N
CPU-spinning processes during each measured window (to see whether lateness depends on
load). Loopback only; every process, database and temp dir it made is removed at the
end, on Ctrl-C and SIGTERM too.

Usage: ``.venv/bin/python bench/round_deadline.py [--db sqlite|postgres] [--deadlines 2,10,60]
[--samples 5] [--burn 0] [--pg-url postgres://postgres@127.0.0.1:5432/postgres] [--keep-log]``.
A default run takes about two and a half minutes (the 60 s deadline dominates).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._breakit import call, percentile  # noqa: E402
from bench._db import ServerDatabase  # noqa: E402
from bench.breakit import Server, as_datetime, jsonish  # noqa: E402
from tests.fakes import FakeOpenAIServer, chat_completion  # noqa: E402

COORDINATOR = "bench.help"
QUICK = ("bench.alpha", "bench.beta")
SLOW = "bench.slow"
DELEGATES = (*QUICK, SLOW)
USER_PREFIX = "u_dl"  # the measured conversations' owners; the slow model holds their posts
WARM_USER = "w_warm"  # the warm-up conversation's owner; the slow model answers it at once
PG_BASE = "postgres://postgres@127.0.0.1:5432/postgres"
GOAL_MS = 1000.0  # a round closes within 1 s of its deadline
TIMER_LINE = re.compile(r"sweeper: round-deadlines: \[([0-9, ]*)\]")


# ----------------------------------------------------------------------------- the tree and the slow model


def write_tree(root: Path) -> Path:
    """Team ``bench``: coordinator ``help`` (everyone, one round) over two echo workers
    and one on ``openai/slow``."""
    files = {
        "teams/bench/workers/help/WORKER.md": (
            "---\ndescription: Ask the bench team anything.\nflow: coordinator\nmodel: embedded/echo\n"
            f"delegates: [{', '.join(DELEGATES)}]\nrouting: everyone\nrounds: 1\n---\n\nYou are the desk.\n"
        ),
        "teams/bench/workers/alpha/WORKER.md": (
            "---\ndescription: The alpha seat; echoes what it hears.\nmodel: embedded/echo\n---\n\nAnswer.\n"
        ),
        "teams/bench/workers/beta/WORKER.md": (
            "---\ndescription: The beta seat; echoes what it hears.\nmodel: embedded/echo\n---\n\nAnswer.\n"
        ),
        "teams/bench/workers/slow/WORKER.md": (
            "---\ndescription: The slow seat; never answers a person before the deadline.\nmodel: openai/slow\n---\n\nAnswer.\n"
        ),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


class HeldModel(FakeOpenAIServer):
    """A chat-completions endpoint on loopback that holds its answer to a measured
    person's post (a turn starting ``u_dl…, through``) until ``release`` is set or
    ``hold_s`` seconds pass, and answers every other turn at once."""

    def __init__(self, hold_s: float):
        super().__init__()
        self.hold_s = hold_s
        self.release = threading.Event()
        self.held = 0
        self.lock = threading.Lock()

    def reply(self, request: dict) -> tuple[int, dict]:
        body = request["body"]
        turn = next((m.get("content") or "" for m in reversed(body["messages"]) if m["role"] == "user"), "")
        if isinstance(turn, str) and turn.startswith(USER_PREFIX):
            with self.lock:
                self.held += 1
            self.release.wait(timeout=self.hold_s)
        return 200, chat_completion(
            f"slow answered: {str(turn)[:200]}",
            model=body["model"],
            id=f"chatcmpl-{uuid.uuid4().hex[:8]}",
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        )

    def close(self) -> None:
        self.release.set()
        super().close()


def serve_env(deadline_s: float, samples: int) -> dict:
    """Queue settings for one serve: one worker per held turn plus three for the rest;
    every timeout well past the deadline, so the held turn neither fails nor is handed
    out again while the round waits (a failed turn would close the round on answers)."""
    d = int(deadline_s)
    return {
        "WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS": str(int(round(deadline_s * 1000))),
        "WORKFORCE_Q_WORKERS": str(samples + 3),
        "WORKFORCE_MODEL_TIMEOUT": str(d + 100),
        "WORKFORCE_TURN_TIMEOUT": str(d + 110),
        "WORKFORCE_Q_TIMEOUT": str(d + 120),
        "WORKFORCE_Q_RETRY": str(d + 150),
    }


# ----------------------------------------------------------------------------- the database


# ----------------------------------------------------------------------------- the machine


def cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (0, 0 elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [float(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    total = sum(fields[:8])
    return total - idle, total


@dataclass
class Machine:
    """The machine over one measured window: CPU busy share (all processes, all cores)
    and the 1-minute load average at its end."""

    started: tuple[float, float] = field(default_factory=cpu_times)
    busy: float | None = None
    load1: float | None = None

    def finish(self) -> None:
        busy, total = cpu_times()
        if total > self.started[1]:
            self.busy = (busy - self.started[0]) / (total - self.started[1])
        try:
            self.load1 = os.getloadavg()[0]
        except OSError:
            pass

    def describe(self) -> str:
        busy = "-" if self.busy is None else f"{self.busy:.0%}"
        load = "-" if self.load1 is None else f"{self.load1:.2f}"
        return f"CPU busy {busy} of {os.cpu_count()} cores, load average {load}"


class Burners:
    """``n`` CPU-spinning child processes (``--burn``), stopped by their pids."""

    def __init__(self, n: int):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        self.procs = []


# ----------------------------------------------------------------------------- talking to the server


def api(server: Server, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    answer = call(server.port, method, path, None if body is None else json.dumps(body).encode(), timeout=60)
    try:
        return answer.status, json.loads(answer.body or b"null")
    except ValueError:
        return answer.status, {"raw": answer.body[:300].decode("utf-8", "replace")}


def open_and_post(server: Server, user: str, message: str) -> str:
    """Open ``user``'s conversation with the coordinator and post ``message`` to it.
    Returns the conversation's session id; raises RuntimeError on a refusal."""
    status, body = api(server, "POST", f"/api/workers/{COORDINATOR}/sessions", {"userId": user})
    if status not in (200, 201):
        raise RuntimeError(f"opening {user}'s conversation answered {status}: {body}")
    session_id = body["sessionId"]
    status, body = api(
        server, "POST", f"/api/flows/coordinator/{session_id}/actions/run", {"userId": user, "input": {"message": message}}
    )
    if status != 202 or body.get("status") != "completed":
        raise RuntimeError(f"posting to {session_id} answered {status}: {body}")
    return session_id


def rounds_of(db: ServerDatabase, prefix: str) -> list[tuple]:
    """Every round of the conversations whose session id starts with
    ``<coordinator>:<prefix>``: (round id, post pk, number, status, deadline_at,
    closed_at, closed_by, session id)."""
    return db.rows(
        "SELECT r.id, r.post_id, r.number, r.status, r.deadline_at, r.closed_at, r.closed_by, s.session_id "
        "FROM coordinators_round r JOIN coordinators_conversation c ON c.id = r.conversation_id "
        "JOIN workforce_session s ON s.id = c.session_id WHERE s.session_id LIKE %s",
        (f"{COORDINATOR}:{prefix}%",),
    )


def round_one_deliveries(db: ServerDatabase) -> list[tuple]:
    """(post pk, worker, created_at, started_at) of every round-1 delivery."""
    return db.rows("SELECT post_id, worker, created_at, started_at FROM coordinators_delegatedpost WHERE round = 1")


def wait_until(predicate, bound: float, poll: float = 0.25):
    """Call ``predicate()`` every ``poll`` s until it answers something truthy (returned)
    or ``bound`` s pass (None)."""
    stop = time.monotonic() + bound
    while time.monotonic() < stop:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    return None


def settled(db: ServerDatabase, prefix: str, expected: int) -> bool:
    """Every round 0 of the ``prefix`` conversations closed, and every round-1 delivery
    claimed by a worker."""
    zeros = [r for r in rounds_of(db, prefix) if r[2] == 0]
    if len(zeros) < expected or any(r[3] == "open" for r in zeros):
        return False
    posts = {r[1] for r in zeros}
    return all(started is not None for post, _, _, started in round_one_deliveries(db) if post in posts)


def finished(db: ServerDatabase, prefix: str) -> bool:
    """Every delivery of the ``prefix`` conversations answered or failed."""
    statuses = db.rows(
        "SELECT d.status FROM coordinators_delegatedpost d JOIN coordinators_conversation c ON c.id = d.conversation_id "
        "JOIN workforce_session s ON s.id = c.session_id WHERE s.session_id LIKE %s",
        (f"{COORDINATOR}:{prefix}%",),
    )
    return bool(statuses) and all(st in ("answered", "failed", "cancelled") for (st,) in statuses)


# ----------------------------------------------------------------------------- measuring


@dataclass
class Sample:
    """One round 0: where it stands and its timings, in ms after its deadline."""

    session_id: str
    round_id: int
    status: str
    closed_by: str
    closer: str  # timer, schedule (the django-q2 Schedule or the minute sweep), activity, or -
    late_ms: float | None
    deadline_at: datetime | None = None
    close_request_ms: float | None = None  # how long the closeRound request that closed it ran
    r1_n: int = 0
    r1_written_ms: float | None = None
    r1_first_started_ms: float | None = None
    r1_last_started_ms: float | None = None


def ms(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds() * 1000.0


def timer_closed(log_text: str) -> set[int]:
    """Round ids the round timer logged closing (``sweeper: round-deadlines: [ids]``)."""
    return {int(x) for m in TIMER_LINE.finditer(log_text) for x in re.findall(r"\d+", m.group(1))}


def request_closed(db: ServerDatabase) -> dict[int, float | None]:
    """Round ids a ``closeRound`` request closed (the timer's, the Schedule's or the
    minute sweep's; a conversation's own activity closes due rounds inside its own
    request instead), each with how long that request ran (ms, started → finished)."""
    closed: dict[int, float | None] = {}
    for output, status, started, finished in db.rows(
        "SELECT output, status, started_at, finished_at FROM workforce_request WHERE action = %s", ("closeRound",)
    ):
        if status != "completed":
            continue
        took = ms(as_datetime(finished), as_datetime(started)) if started and finished else None
        for x in (jsonish(output) or {}).get("closed") or []:
            closed[int(x)] = took
    return closed


def close_requests(db: ServerDatabase, prefix: str) -> tuple[int, int]:
    """``closeRound`` requests on the ``prefix`` conversations: (all, those that closed
    nothing: a second worker's timer, or the Schedule, finding the round already closed)."""
    rows = db.rows(
        "SELECT q.output FROM workforce_request q JOIN workforce_session s ON s.id = q.session_id "
        "WHERE q.action = %s AND s.session_id LIKE %s",
        ("closeRound", f"{COORDINATOR}:{prefix}%"),
    )
    return len(rows), sum(1 for (output,) in rows if not (jsonish(output) or {}).get("closed"))


def timer_batches(log_text: str) -> list[int]:
    """How many rounds each timer pass that closed any closed."""
    return [len(re.findall(r"\d+", m.group(1))) for m in TIMER_LINE.finditer(log_text)]


def measure(db: ServerDatabase, log_text: str) -> list[Sample]:
    """Read every measured round 0 and its round-1 deliveries from the database."""
    by_timer, by_request = timer_closed(log_text), request_closed(db)
    r1: dict[int, list[tuple]] = {}
    for post, worker, created, started in round_one_deliveries(db):
        r1.setdefault(post, []).append((worker, created, started))
    samples = []
    for rid, post, number, status, deadline, closed, closed_by, session_id in sorted(rounds_of(db, USER_PREFIX)):
        if number != 0:
            continue
        deadline_at = as_datetime(deadline) if deadline is not None else None
        closed_at = as_datetime(closed) if closed is not None else None
        closer = "-"
        if closed_at is not None:
            closer = "timer" if rid in by_timer else "schedule" if rid in by_request else "activity"
        s = Sample(
            session_id=session_id,
            round_id=rid,
            status=status,
            closed_by=closed_by or "",
            closer=closer,
            late_ms=ms(closed_at, deadline_at) if closed_at and deadline_at else None,
            deadline_at=deadline_at,
            close_request_ms=by_request.get(rid),
        )
        out = r1.get(post, [])
        s.r1_n = len(out)
        if out and deadline_at:
            s.r1_written_ms = max(ms(as_datetime(c), deadline_at) for _, c, _ in out)
            started = [ms(as_datetime(st), deadline_at) for _, _, st in out if st is not None]
            if started:
                s.r1_first_started_ms, s.r1_last_started_ms = min(started), max(started)
        samples.append(s)
    return samples


@dataclass
class Result:
    """One deadline's run."""

    deadline_s: float
    expected: int
    samples: list[Sample]
    machine: Machine
    workers: int
    problems: list[str] = field(default_factory=list)
    held: int = 0
    batches: list[int] = field(default_factory=list)  # rounds closed per timer pass (measured and warm-up)
    close_requests: tuple[int, int] = (
        0,
        0,
    )  # closeRound requests on the measured conversations: all, empty  # measured posts the slow model was holding when measured

    @property
    def at_deadline(self) -> list[Sample]:
        return [s for s in self.samples if s.status == "closed" and s.closed_by == "deadline" and s.late_ms is not None]

    @property
    def max_late_ms(self) -> float | None:
        values = [s.late_ms for s in self.at_deadline]
        return max(values) if values else None

    def passed(self) -> bool:
        late = self.max_late_ms
        return not self.problems and len(self.at_deadline) == self.expected and late is not None and late <= GOAL_MS


def stats_row(label: str, values: list[float | None]) -> str:
    found = [v for v in values if v is not None]

    def f(v):
        return "-" if v is None else f"{v:,.0f}"

    return (
        f"| {label} | {len(found)} | {f(percentile(found, 0.5))} | {f(percentile(found, 0.95))} | "
        f"{f(max(found) if found else None)} |"
    )


def render(result: Result, db_kind: str, burn: int) -> str:
    """One deadline's table (ms after the deadline) and what closed its rounds."""
    s = result.samples
    burning = f", {burn} CPU burners" if burn else ""
    lines = [
        f"deadline {result.deadline_s:g} s ({db_kind}, ORM broker, {result.workers} workers{burning}; "
        f"machine over the window: {result.machine.describe()})",
        "",
        "| ms after the deadline | n | median | p95 | max |",
        "|---|---|---|---|---|",
        stats_row("round 0 closed (`closed_at - deadline_at`, closed_by deadline)", [x.late_ms for x in result.at_deadline]),
        stats_row("round 1 deliveries written (last `created_at`)", [x.r1_written_ms for x in s]),
        stats_row("round 1 first delivery started (claimed by a worker)", [x.r1_first_started_ms for x in s]),
        stats_row("round 1 last delivery started", [x.r1_last_started_ms for x in s]),
        "",
    ]
    closers = {k: sum(1 for x in s if x.closer == k) for k in ("timer", "schedule", "activity")}
    lines.append(
        f"rounds 0: {len(s)} of {result.expected}; closed by the timer {closers['timer']}, "
        f"the schedule/minute sweep {closers['schedule']}, conversation activity {closers['activity']}; "
        f"closed_by deadline {len(result.at_deadline)}; round-1 deliveries "
        f"{sum(x.r1_n for x in s)}; slow delegate's turns held {result.held}"
    )
    deadlines = [x.deadline_at for x in s if x.deadline_at]
    spread = ms(max(deadlines), min(deadlines)) if deadlines else 0.0
    took = [x.close_request_ms for x in s if x.close_request_ms is not None]
    several = [b for b in result.batches if b > 1]
    lines.append(
        f"the deadlines fell within {spread:,.0f} ms of each other; closeRound requests ran median "
        f"{'-' if not took else f'{percentile(took, 0.5):,.0f}'} ms, max "
        f"{'-' if not took else f'{max(took):,.0f}'} ms; timer passes that closed several rounds: "
        f"{len(several)} (largest {max(several) if several else '-'}); closeRound requests on these "
        f"conversations {result.close_requests[0]}, of which closed nothing {result.close_requests[1]}"
    )
    odd = [x for x in s if x not in result.at_deadline]
    for x in odd:
        lines.append(
            f"  not closed at its deadline: {x.session_id} round {x.round_id}: status {x.status}, closed_by {x.closed_by or '-'}"
        )
    for p in result.problems:
        lines.append(f"  problem: {p}")
    return "\n".join(lines)


def verdict(results: list[Result]) -> tuple[bool, str]:
    """PASS when, at every deadline, every round 0 closed at its deadline and the largest
    lateness is at most ``GOAL_MS``."""
    ok = bool(results) and all(r.passed() for r in results)
    parts = []
    for r in results:
        late = r.max_late_ms
        parts.append(
            f"{'-' if late is None else f'{late:,.0f}'} ms at {r.deadline_s:g} s"
            + ("" if len(r.at_deadline) == r.expected else f" ({len(r.at_deadline)}/{r.expected} at deadline)")
        )
    return ok, (
        f"verdict: {'PASS' if ok else 'FAIL'}: max lateness {', '.join(parts)} "
        f"(goal: every round 0 closes at its deadline, max lateness <= {GOAL_MS:,.0f} ms at every deadline)"
    )


# ----------------------------------------------------------------------------- one deadline


def run_deadline(deadline_s: float, args, tmp: Path, cleanup: list) -> Result:
    """One serve at ``deadline_s``: warm up, post ``args.samples`` conversations at once,
    wait for their rounds, measure. Everything it starts is pushed onto ``cleanup``
    (callables, run last-first); it runs and pops them itself when it returns."""
    work = tmp / f"d{deadline_s:g}"
    root = write_tree(work / "tree")
    db = ServerDatabase(args.db, work, args.pg_url, prefix="wf_deadline")
    cleanup.append(db.drop)
    slow = HeldModel(hold_s=deadline_s + 90).start()
    cleanup.append(slow.close)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "WORKFORCE_BROKER_URL", "WORKFORCE_VAR_DIR"}
        and not k.startswith(("WORKFORCE_Q_", "OPENAI_", "WORKFORCE_COORDINATOR_", "WORKFORCE_MODEL"))
    }
    env.update(db.env)
    queue = serve_env(deadline_s, args.samples)
    env.update(queue)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "bench._cluster_settings",
            "PYTHONUNBUFFERED": "1",
            "WORKFORCE_LOG_LEVEL": "INFO",
            "WORKFORCE_AUTH": "none",
            "OPENAI_BASE_URL": slow.base_url,
            "OPENAI_API_KEY": "sk-bench",
        }
    )
    log = work / "serve.log"
    server = Server(root, env, log)
    cleanup.append(lambda: server.stop(timeout=20))
    print(f"deadline {deadline_s:g} s: starting serve ({args.db})", flush=True)
    server.start(timeout=180)

    # Warm-up: every worker boots (hired seats, sweeper threads) before the measured posts.
    open_and_post(server, WARM_USER, "warm up")
    if not wait_until(lambda: settled(db, WARM_USER, 1) and finished(db, WARM_USER), bound=90):
        raise RuntimeError(f"the warm-up conversation did not settle within 90 s:\n{server.tail()}")

    burners = Burners(args.burn)
    cleanup.append(burners.stop)
    machine = Machine()
    problems: list[str] = []
    users = [f"{USER_PREFIX}{i}" for i in range(args.samples)]
    threads = []
    for user in users:

        def post(user=user):
            try:
                open_and_post(server, user, f"question from {user}")
            except (RuntimeError, OSError) as exc:
                problems.append(str(exc))

        threads.append(threading.Thread(target=post, daemon=True))
    print(f"deadline {deadline_s:g} s: posting {len(users)} conversations at once", flush=True)
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    bound = deadline_s + 60
    if not wait_until(lambda: settled(db, USER_PREFIX, len(users) - len(problems)), bound=bound):
        problems.append(f"not settled within {bound:g} s of the posts (a round 0 still open, or a round-1 delivery not claimed)")
    machine.finish()
    burners.stop()
    held = slow.held
    log_text = server.log.read_text("utf-8", "replace")
    samples = measure(db, log_text)
    closes = close_requests(db, USER_PREFIX)
    if args.keep_log:
        kept = Path(tempfile.gettempdir()) / f"round_deadline-{os.getpid()}-{deadline_s:g}s.log"
        shutil.copy(log, kept)
        print(f"server log: {kept}", file=sys.stderr)
    # Let the held turns answer (late: they land and go no further), then stop.
    slow.release.set()
    while cleanup:
        cleanup.pop()()
    return Result(
        deadline_s,
        len(users),
        samples,
        machine,
        int(queue["WORKFORCE_Q_WORKERS"]),
        problems,
        held,
        timer_batches(log_text),
        closes,
    )


# ----------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--deadlines", default="2,10,60", help="round deadlines in seconds, comma-separated")
    p.add_argument("--samples", type=int, default=5, help="conversations per deadline (1-20)")
    p.add_argument("--burn", type=int, default=0, help="CPU-spinning processes during each measured window (0-8)")
    p.add_argument("--pg-url", default=PG_BASE, help="PostgreSQL server (loopback) to create the database on")
    p.add_argument("--keep-log", action="store_true", help="keep each server's log (paths printed)")
    args = p.parse_args(argv)
    try:
        args.deadlines = [float(x) for x in args.deadlines.split(",") if x.strip()]
    except ValueError:
        p.error("--deadlines takes seconds, comma-separated, e.g. 2,10,60")
    if not args.deadlines or any(d <= 0 or d > 600 for d in args.deadlines):
        p.error("each deadline must be above 0 and at most 600 seconds")
    args.samples = max(1, min(args.samples, 20))
    args.burn = max(0, min(args.burn, 8))
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # stop cleanly on SIGTERM as on Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)
    tmp = Path(tempfile.mkdtemp(prefix="wf_deadline_"))
    cleanup: list = []
    results: list[Result] = []
    code = 2
    try:
        for deadline_s in args.deadlines:
            result = run_deadline(deadline_s, args, tmp, cleanup)
            results.append(result)
            print()
            print(render(result, args.db, args.burn))
            print(flush=True)
        ok, line = verdict(results)
        print(line)
        code = 0 if ok else 1
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        code = 130
    except Exception as exc:  # report it, clean up, exit 2
        print(f"round_deadline could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the cleanup short
            signal.signal(signum, signal.SIG_IGN)
        while cleanup:
            try:
                cleanup.pop()()
            except Exception as exc:
                print(f"cleanup: {type(exc).__name__}: {exc}", file=sys.stderr)
        shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
