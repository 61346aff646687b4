"""The break-it pass, rerunnable: load, kill, settle and count, fuzz.

1. load: starts the real ``manage.py serve`` (web server + its django-q2 cluster child)
   on a free loopback port, against a database of its own (a temp SQLite file, or a
   fresh PostgreSQL database ``wf_breakit_<random>`` created and dropped here), with the
   Redis broker on ``--redis-url`` (default ``redis://127.0.0.1:6379/7``; flushed at start and end, that db only)
   or the ORM broker, on a small tree written to a temp dir: mailbox ``bench.standup``
   whose three echo seats answer every post with ``post-to-mailbox``. Short queue
   timeouts (timeout 8 s, retry 12 s, sweep every 1 s) keep the run quick. ``--posters``
   threads post over HTTP to 127.0.0.1 for ``--seconds``.
2. kill: during the load, ``--kills`` times at random moments, SIGKILL the cluster
   (every process of it; the web server keeps taking posts for 1-3 s, then serve is
   restarted) or the whole serve (web and cluster at once, restarted at once);
   ``--kill-target`` picks which, ``mixed`` alternates.
3. settle: waits (at most ``--settle-seconds``) until every delivery is done or failed,
   the broker's queue is empty and the task table stops growing, then reads the
   database directly and counts: wakes expected (client posts in the transcript x
   members), wakes done (delivery done and the seat's answer line in the transcript),
   lost (every other expected wake, plus posts answered 202 and missing), duplicated
   (a (post, seat) with two completed ``onMailboxPost`` turns, or two answer lines),
   extra tasks (``deliver_post`` tasks beyond one per delivery: distinct task ids in
   django-q2's task table, kept whole by ``bench/breakit_settings.py``'s
   ``save_limit: 0``, plus what is still queued: ``django_q_ormq`` rows on the ORM
   broker, the Redis list's length on Redis; a Redis task lost with a killed worker is
   not counted, its delivery shows as re-enqueued by the sweeper or lost), less the
   **turn-order waits**, counted apart: a task whose outcome was ``waiting`` found its
   seat busy in its conversation and costs one more task when the turn ends (the
   README's one turn at a time), which is not waste.
   With ``--fault db-outage`` (PostgreSQL) the server's database refuses connections and
   loses every backend for ``--fault-seconds``; with ``--fault broker-loss`` (Redis) the
   broker's queue is flushed; both at ``--fault-at`` seconds. The table then shows the
   wake p95 of the posts the fault hit and how long after it the turns resumed and the
   deliveries settled. ``--timings default`` runs with the server's own queue timings
   (timeout 120 s, retry 180 s, sweep 15 s) instead of the short ones.
4. fuzz: a bounded list of malformed and edge inputs against the HTTP API
   (``bench/_breakit.py``'s ``fuzz_cases``), counted by status; every 5xx, non-JSON or
   unanswered ``/api/`` answer is listed with its request.

Prints one table and a verdict line (PASS when lost = duplicated = 5xx = 0 and extra
tasks <= 1% of deliveries); exit status 0 on PASS, 1 on FAIL, 2 when it could not run.
Loopback only; every process and database it made is removed at the end, on Ctrl-C too.

Usage: ``.venv/bin/python bench/breakit.py [--db sqlite|postgres] [--broker orm|redis]
[--posters 4] [--seconds 30] [--think 0.3] [--kills 3] [--kill-target mixed] [--fault none|db-outage|broker-loss]
[--fault-seconds 12] [--timings short|default] [--no-fuzz | --fuzz-only]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._breakit import (  # noqa: E402
    LOOPBACK,
    Case,
    Figures,
    call,
    count_duplicated,
    count_extra_tasks,
    count_lost,
    error_lines,
    fuzz_cases,
    percentile,
    render,
    run_fuzz,
    verdict,
)
from bench._db import ServerDatabase  # noqa: E402

MAILBOX = "bench.standup"
SEATS = ("bench.alpha", "bench.beta", "bench.gamma")
BOARD_MAILBOX, BOARD = "bench.desk", "tasks"
COORDINATOR = "bench.help"
REDIS_URL = "redis://127.0.0.1:6379/7"
QUEUE_KEY = "django_q:workforce:q"  # django-q2's Redis list for cluster name "workforce"
PG_BASE = "postgres://postgres@127.0.0.1:5432/postgres"
POST_BODY = re.compile(r"^p\d+-\d+-[0-9a-f]{8}$")
STANDING_ORDER = '/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}'
QUEUE_ENV = {
    "WORKFORCE_Q_WORKERS": "2",
    "WORKFORCE_Q_TIMEOUT": "8",
    "WORKFORCE_Q_RETRY": "12",
    "WORKFORCE_TURN_TIMEOUT": "6",
    "WORKFORCE_MODEL_TIMEOUT": "5",
    "WORKFORCE_SWEEP_SECONDS": "1",
}


# ----------------------------------------------------------------------------- the tree


def write_tree(root: Path) -> Path:
    """A team ``bench``: mailbox ``standup`` whose three echo seats answer each post in
    it; mailbox ``desk`` holding board ``tasks``; coordinator ``help`` over two seats."""
    files = {
        "teams/bench/mailboxes/standup/MAILBOX.md": (
            f"---\ndescription: Where the bench team posts status.\nmembers: [{', '.join(SEATS)}]\n---\n\n"
            "Post what you finished.\n"
        ),
        "teams/bench/mailboxes/desk/MAILBOX.md": (
            "---\ndescription: The bench desk and its board.\nmembers: [bench.alpha]\nboards: [tasks]\n---\n\nFile tasks here.\n"
        ),
        "teams/bench/workers/help/WORKER.md": (
            "---\ndescription: Ask the bench team anything.\nflow: coordinator\nmodel: embedded/echo\n"
            "delegates: [bench.alpha, bench.beta]\nrouting: everyone\nrounds: 1\n---\n\nYou are the desk.\n"
        ),
    }
    for seat in SEATS:
        name = seat.split(".")[1]
        files[f"teams/bench/workers/{name}/WORKER.md"] = (
            f"---\ndescription: The {name} seat; echoes what it hears.\nmodel: embedded/echo\n"
            f"tools: [post-to-mailbox]\n---\n\nAnswer in the mailbox.\n{STANDING_ORDER}\n"
        )
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ----------------------------------------------------------------------------- database and broker


def jsonish(value):
    """A JSON column's value: decoded by psycopg on PostgreSQL, text on SQLite."""
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def as_datetime(value) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


class Broker:
    """Where queued tasks wait: the ORM broker's table or the Redis list (its database
    only: ``--redis-url``, db 7 by default)."""

    def __init__(self, kind: str, db: ServerDatabase, url: str = REDIS_URL):
        self.kind, self.db, self.url = kind, db, url
        self.redis = None
        if kind == "redis":
            import redis

            self.redis = redis.Redis.from_url(self.url)
            self.redis.flushdb()  # its database only

    @property
    def env(self) -> dict:
        return {"WORKFORCE_BROKER_URL": self.url} if self.kind == "redis" else {}

    def queued(self) -> int:
        if self.redis is not None:
            return int(self.redis.llen(QUEUE_KEY))
        return self.db.rows("SELECT COUNT(*) FROM django_q_ormq")[0][0]

    def close(self) -> None:
        if self.redis is not None:
            try:
                self.redis.flushdb()
            finally:
                self.redis.close()
                self.redis = None


# ----------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _killpg(pid: int | None) -> None:
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class Server:
    """``manage.py serve`` in its own process group; its cluster child runs in a group of
    its own (serve starts it so), whose pid serve prints at start."""

    CLUSTER_LINE = re.compile(rb"task cluster started \(pid (\d+)\)")

    def __init__(self, root: Path, env: dict, log: Path):
        self.root, self.env, self.log = root, env, log
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.cluster_pid: int | None = None
        self.lock = threading.Lock()  # one start/stop/kill at a time

    def start(self, timeout: float = 90.0) -> None:
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"{LOOPBACK}:{self.port}", "--root", str(self.root)],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        self.cluster_pid = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}:\n{self.tail(offset)}")
            if self.cluster_pid is None:
                with self.log.open("rb") as f:
                    f.seek(offset)
                    if m := self.CLUSTER_LINE.search(f.read()):
                        self.cluster_pid = int(m.group(1))
            if self.cluster_pid and self.listening():
                return
            time.sleep(0.1)
        self.kill_all()
        raise RuntimeError(f"serve did not come up within {timeout}s:\n{self.tail(offset)}")

    def tail(self, offset: int = 0, chars: int = 4000) -> str:
        data = self.log.read_bytes()[offset:]
        return data[-chars:].decode("utf-8", "replace")

    def listening(self) -> bool:
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def kill_cluster(self) -> None:
        """SIGKILL every process of the cluster at once (a worker machine losing power)."""
        _killpg(self.cluster_pid)

    def kill_all(self) -> None:
        """SIGKILL serve and its cluster at once (the whole machine losing power)."""
        if self.process is not None:
            _killpg(self.process.pid)
            self.process.wait()
        _killpg(self.cluster_pid)

    def stop(self, timeout: float = 45.0) -> None:
        """SIGTERM serve (it stops its cluster) and wait; SIGKILL whatever is left."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill_all()
        self.process = None


# ----------------------------------------------------------------------------- load and kills


class Load:
    """``posters`` threads posting into the standup mailbox until ``deadline``."""

    def __init__(self, server: Server, figures: Figures, posters: int, think: float):
        self.server, self.figures, self.posters, self.think = server, figures, posters, think
        self.acked: list[str] = []
        self.samples: list[str] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self, seconds: float) -> list[threading.Thread]:
        deadline = time.monotonic() + seconds
        threads = [threading.Thread(target=self._poster, args=(i, deadline), daemon=True) for i in range(self.posters)]
        for t in threads:
            t.start()
        return threads

    def _count(self, key: str, sample: str | None = None) -> None:
        with self.lock:
            setattr(self.figures, key, getattr(self.figures, key) + 1)
            if sample and len(self.samples) < 10:
                self.samples.append(sample)

    def _poster(self, i: int, deadline: float) -> None:
        n = 0
        path = f"/api/flows/mailbox/{MAILBOX}/actions/post"
        while time.monotonic() < deadline and not self.stop.is_set():
            body = f"p{i}-{n}-{uuid.uuid4().hex[:8]}"
            n += 1
            payload = json.dumps({"userId": f"u_poster{i}", "input": {"body": body}}).encode()
            try:
                answer = call(self.server.port, "POST", path, payload, timeout=30)
            except ConnectionRefusedError:
                self._count("posts_refused")
                time.sleep(0.2)
                continue
            except OSError:
                self._count("posts_broken")
                continue
            if not answer.is_json:
                self._count("posts_non_json", f"{answer.status} {answer.content_type}: {answer.body[:120]!r}")
            if answer.status == 202:
                line_id = (json.loads(answer.body).get("output") or {}).get("id") if answer.is_json else None
                with self.lock:
                    self.figures.posts_202 += 1
                    if line_id:
                        self.acked.append(line_id)
            elif answer.status >= 500:
                self._count("posts_5xx", f"{answer.status}: {answer.body[:160]!r}")
            else:
                self._count("posts_4xx", f"{answer.status}: {answer.body[:160]!r}")
            if self.think:
                time.sleep(self.think)


def kill_plan(kills: int, seconds: float, target: str, rng: random.Random) -> list[tuple[float, str]]:
    """``kills`` moments in the middle 70% of the load, at least 4 s apart when they fit,
    each with what to kill (``mixed`` alternates, starting with the cluster)."""
    if kills <= 0:
        return []
    lo, hi = 0.15 * seconds, 0.85 * seconds
    gap = min(4.0, (hi - lo) / kills)
    times: list[float] = []
    for _ in range(200):
        times = sorted(rng.uniform(lo, hi) for _ in range(kills))
        if all(b - a >= gap for a, b in zip(times, times[1:], strict=False)):
            break
    targets = [target if target != "mixed" else ("cluster" if k % 2 == 0 else "serve") for k in range(kills)]
    return list(zip(times, targets, strict=False))


def killer(
    server: Server, plan: list[tuple[float, str]], figures: Figures, started: float, stop: threading.Event, rng: random.Random
) -> None:
    for at, target in plan:
        if stop.wait(max(0.0, started + at - time.monotonic())):
            return
        with server.lock:
            if stop.is_set():  # cleaning up: start nothing more
                return
            t = time.monotonic() - started
            try:
                kill_once(server, target, t, figures, rng)
            except Exception as exc:  # a restart that failed: the main thread starts it again after the load
                figures.kill_log.append(f"{target}@{t:.0f}s: restart failed ({type(exc).__name__})")
                if stop.is_set():
                    return


def kill_once(server: Server, target: str, t: float, figures: Figures, rng: random.Random) -> None:
    """SIGKILL ``target`` (``cluster`` or ``serve``) and bring serve back."""
    if target == "cluster":
        server.kill_cluster()
        alone = rng.uniform(1.0, 3.0)  # posts keep coming with no cluster: a backlog
        time.sleep(alone)
        down = time.monotonic()
        server.stop()
        server.start()
        figures.kill_log.append(f"cluster@{t:.0f}s (web alone {alone:.1f}s, then restarted in {time.monotonic() - down:.1f}s)")
    else:
        server.kill_all()
        down = time.monotonic()
        server.start()
        figures.kill_log.append(f"serve@{t:.0f}s (restarted in {time.monotonic() - down:.1f}s)")
    figures.kills += 1


# ----------------------------------------------------------------------------- faults


class Fault:
    """``--fault``: at ``at`` seconds into the load, take the database away for
    ``seconds`` (``db-outage``: PostgreSQL refuses new connections and every backend of
    the server's database is terminated, as a restart does) or make the Redis broker
    lose its queue (``broker-loss``: ``FLUSHDB`` of its database, as a restart without
    persistence does). ``started``/``ended`` are wall-clock seconds (epoch)."""

    def __init__(self, kind: str, at: float, seconds: float, db: ServerDatabase, broker: Broker):
        self.kind, self.at, self.seconds, self.db, self.broker = kind, at, seconds, db, broker
        self.started: float | None = None
        self.ended: float | None = None
        self.lost = 0

    def describe(self) -> str:
        if self.kind == "db-outage":
            return f"PostgreSQL refused the server's database for {self.seconds:.0f} s at {self.at:.0f} s"
        return f"the Redis broker lost its queue ({self.lost} tasks) at {self.at:.0f} s"

    def run(self, started: float, stop: threading.Event) -> None:
        if stop.wait(max(0.0, started + self.at - time.monotonic())):
            return
        self.started = time.time()
        if self.kind == "broker-loss":
            self.lost = self.broker.queued()
            self.broker.redis.flushdb()  # the bench's Redis database only
            self.ended = time.time()
            return
        import psycopg

        with psycopg.connect(self.db.admin, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.db.name}" ALLOW_CONNECTIONS false')
            try:
                conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (self.db.name,))
                stop.wait(self.seconds)
            finally:
                conn.execute(f'ALTER DATABASE "{self.db.name}" ALLOW_CONNECTIONS true')
        self.ended = time.time()


# ----------------------------------------------------------------------------- settle and count


def mailbox_pk(db: ServerDatabase, session_id: str) -> int | None:
    found = db.rows("SELECT id FROM workforce_session WHERE session_id = %s", (session_id,))
    return found[0][0] if found else None


def deliver_tasks(db: ServerDatabase) -> tuple[int, int, int, int]:
    """``deliver_post`` tasks the cluster finished: (distinct ids, runs, runs that found
    their delivery already taken, runs that found the seat's turn slot taken). django-q2
    keeps one row per task id, counting its redeliveries in ``attempt_count``; the
    result is a base64 pickle of the outcome (``do_deliver``'s: ``not-claimed``,
    ``waiting``, ...). The task table is the ledger of turn-order waits: the
    ``TurnWait`` row a wait leaves is deleted once its task is enqueued."""
    rows = db.rows("SELECT attempt_count, result FROM django_q_task WHERE func = %s", ("mailboxes.tasks.deliver_post",))
    not_claimed = waiting = 0
    for _, result in rows:
        try:
            outcome = base64.b64decode(result) if result else b""
        except ValueError:
            continue
        if b"not-claimed" in outcome:
            not_claimed += 1
        elif b"waiting" in outcome:
            waiting += 1
    return len(rows), sum(max(1, a or 1) for a, _ in rows), not_claimed, waiting


def settle(db: ServerDatabase, broker: Broker, bound: float) -> float:
    """Wait until every client post has all its deliveries done or failed, nothing is
    queued and the task table stopped growing (3 s), at most ``bound`` seconds.
    Returns the seconds waited."""
    t0 = time.monotonic()
    steady_since, last_tasks = None, -1
    while time.monotonic() - t0 < bound:
        pk = mailbox_pk(db, MAILBOX)
        posts = db.rows("SELECT COUNT(*) FROM mailboxes_line WHERE session_id = %s AND seat_authored = %s", (pk, False))[0][0]
        open_, total = db.rows(
            "SELECT SUM(CASE WHEN status IN ('pending', 'running') THEN 1 ELSE 0 END), COUNT(*) "
            "FROM seats_delivery WHERE mailbox_id = %s",
            (pk,),
        )[0]
        tasks = db.rows("SELECT COUNT(*) FROM django_q_task")[0][0]
        quiet = total >= posts * len(SEATS) and not open_ and broker.queued() == 0
        if quiet and tasks == last_tasks:
            steady_since = steady_since or time.monotonic()
            if time.monotonic() - steady_since >= 3:
                break
        else:
            steady_since = None
        last_tasks = tasks
        time.sleep(0.5)
    return time.monotonic() - t0


def count(
    db: ServerDatabase, broker: Broker, figures: Figures, acked: list[str], log_text: str, fault: Fault | None = None
) -> None:
    """Read the server's database and fill ``figures``' delivery and task counts."""
    pk = mailbox_pk(db, MAILBOX)
    lines = db.rows("SELECT line_id, body, at, seat_authored, author FROM mailboxes_line WHERE session_id = %s", (pk,))
    posts = {lid: (body, at) for lid, body, at, seat, _ in lines if not seat and POST_BODY.match(body)}
    by_body = {body: lid for lid, (body, _) in posts.items()}
    answers = [(by_body.get(body.rsplit(": ", 1)[-1]), author) for _, body, _, seat, author in lines if seat]
    answers = [(p, a) for p, a in answers if p]
    deliveries = db.rows("SELECT post_id, member, status FROM seats_delivery WHERE mailbox_id = %s", (pk,))
    done = [(p, m) for p, m, s in deliveries if s == "done"]
    open_ = [(p, m) for p, m, s in deliveries if s in ("pending", "running")]
    turns = []
    first_start: dict[tuple[str, str], datetime] = {}
    for input_, status, started in db.rows(
        "SELECT input, status, started_at FROM workforce_request WHERE action = %s", ("onMailboxPost",)
    ):
        data = jsonish(input_) or {}
        if data.get("mailboxId") != MAILBOX or status != "completed":
            continue
        key = (data.get("postId"), data.get("member"))
        turns.append(key)
        if started is not None:
            at = as_datetime(started)
            first_start[key] = min(first_start.get(key, at), at)
    acked_set = set(acked)
    figures.posts_in_db = len(posts)
    figures.acked_missing = len(acked_set - set(posts))
    figures.members = len(SEATS)
    figures.expected_wakes, figures.wakes_done, figures.lost, figures.unsettled = count_lost(
        posts, SEATS, done, answers, figures.acked_missing, open_
    )
    figures.deliveries = len(deliveries)
    figures.failed = sum(1 for *_, s in deliveries if s == "failed")
    figures.duplicated_turns, figures.duplicated_answers = count_duplicated(turns, answers)
    tasks, runs, not_claimed, waiting = deliver_tasks(db)
    figures.queued_left = broker.queued()
    figures.tasks = tasks + figures.queued_left
    figures.task_runs, figures.tasks_not_claimed, figures.turn_order_waits = runs, not_claimed, waiting
    figures.extra_tasks = count_extra_tasks(figures.tasks, figures.deliveries, waiting)
    figures.load_log_errors = len(error_lines(log_text))
    figures.sweeper_requeued = sum(
        len(re.findall(r"\d+", m)) for m in re.findall(r"sweeper: deliveries: SweepResult\(requeued=\[([^\]]*)\]", log_text)
    )
    latencies = [
        (first_start[(p, m)].timestamp() - at / 1000) for p, (_, at) in posts.items() for m in SEATS if (p, m) in first_start
    ]
    figures.wake_median_s = percentile(latencies, 0.5)
    figures.wake_p95_s = percentile(latencies, 0.95)
    figures.wake_max_s = max(latencies) if latencies else None
    if fault is not None and fault.ended is not None:
        hit = [
            first_start[(p, m)].timestamp() - at / 1000
            for p, (_, at) in posts.items()
            for m in SEATS
            if (p, m) in first_start and fault.started - 10 <= at / 1000 <= fault.ended
        ]
        figures.fault_wake_p95_s = percentile(hit, 0.95)
        figures.fault_wake_max_s = max(hit) if hit else None
        after = [
            as_datetime(s).timestamp()
            for (s,) in db.rows(
                "SELECT started_at FROM workforce_request WHERE action = %s AND started_at IS NOT NULL", ("onMailboxPost",)
            )
        ]
        after = [t for t in after if t >= fault.ended]
        figures.fault_resume_s = min(after) - fault.ended if after else None
        settled = [
            as_datetime(f).timestamp()
            for (f,) in db.rows("SELECT finished_at FROM seats_delivery WHERE mailbox_id = %s AND finished_at IS NOT NULL", (pk,))
        ]
        figures.fault_drained_s = max(settled) - fault.ended if settled else None
        figures.fault = fault.describe()


def probe_derived_ids(port: int, figures: Figures) -> None:
    """A coordinator conversation whose own id fits its column (300 chars) while the
    delegate session ids derived from it (``<conversation>:<delegate>``) do not: learn
    how long the composed id is for a short ``sessionId``, open one of 296 chars, run a
    message in it. A failure may be the cluster's only: ``quiet``, then the log."""
    path = f"/api/workers/{COORDINATOR}/sessions"

    def open_(session_id: str) -> str | None:
        answer = run_fuzz(
            port,
            [
                Case(
                    f"derived: open a conversation, sessionId {len(session_id)} chars",
                    "POST",
                    path,
                    json.dumps({"userId": "u_fuzz", "sessionId": session_id}).encode(),
                )
            ],
            figures,
        )[0]
        if answer is None or answer.status not in (200, 201) or not answer.is_json:
            return None
        return json.loads(answer.body).get("sessionId")

    short = open_("probe")
    if not short:
        return
    overhead = len(short) - len("probe")
    session_id = open_("d" * (296 - overhead))
    if not session_id:
        return
    run_fuzz(
        port,
        [
            Case(
                f"derived: run in a {len(session_id)}-char conversation (delegate ids "
                f"{len(session_id) + len(':bench.alpha')} chars)",
                "POST",
                f"/api/flows/coordinator/{session_id}/actions/run",
                json.dumps({"userId": "u_fuzz", "input": {"message": "hello"}}).encode(),
            )
        ],
        figures,
    )


def quiet(broker: Broker, bound: float) -> None:
    """Wait until the broker's queue is empty plus 2 s for what is running, at most ``bound`` s."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline and broker.queued():
        time.sleep(0.5)
    time.sleep(min(2.0, max(0.0, deadline - time.monotonic())))


# ----------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--broker", choices=("orm", "redis"), default="orm")
    p.add_argument("--posters", type=int, default=4, help="concurrent posting threads (1-64)")
    p.add_argument("--seconds", type=float, default=30, help="how long they post (at most 300)")
    p.add_argument("--think", type=float, default=0.3, help="seconds each poster waits between posts")
    p.add_argument("--kills", type=int, default=3, help="SIGKILLs during the load (at most 20)")
    p.add_argument("--kill-target", choices=("cluster", "serve", "mixed"), default="mixed")
    p.add_argument("--settle-seconds", type=float, default=75, help="longest wait for the deliveries to settle")
    p.add_argument(
        "--fault",
        choices=("none", "db-outage", "broker-loss"),
        default="none",
        help="db-outage (needs --db postgres): refuse the database for --fault-seconds; "
        "broker-loss (needs --broker redis): flush the broker's queue",
    )
    p.add_argument("--fault-at", type=float, default=None, help="seconds into the load (default 40%% of --seconds)")
    p.add_argument("--fault-seconds", type=float, default=12, help="how long the database stays away (at most 60)")
    p.add_argument(
        "--timings",
        choices=("short", "default"),
        default="short",
        help="short: queue timeout 8 s, retry 12 s, sweep every 1 s (a quick run); default: the server's own "
        "(timeout 120 s, retry 180 s, sweep 15 s), as a deployment runs",
    )
    p.add_argument("--seed", type=int, default=None, help="random seed for the kill moments")
    p.add_argument(
        "--redis-url",
        default=REDIS_URL,
        help=f"the Redis broker's database (loopback; flushed at start and end), default {REDIS_URL}",
    )
    p.add_argument("--pg-url", default=None, help=f"PostgreSQL server (loopback) to create the database on; default {PG_BASE}")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--no-fuzz", action="store_true", help="skip the fuzz pass")
    g.add_argument("--fuzz-only", action="store_true", help="only the fuzz pass (no load, no kills)")
    p.add_argument("--keep-log", action="store_true", help="keep the server's log (its path is printed)")
    args = p.parse_args(argv)
    args.posters = max(1, min(args.posters, 64))
    args.seconds = max(1.0, min(args.seconds, 300.0))
    args.kills = max(0, min(args.kills, 20))
    args.settle_seconds = max(5.0, min(args.settle_seconds, 600.0))
    args.fault_seconds = max(1.0, min(args.fault_seconds, 60.0))
    if args.fault == "db-outage" and args.db != "postgres":
        p.error("--fault db-outage needs --db postgres")
    if args.fault == "broker-loss" and args.broker != "redis":
        p.error("--fault broker-loss needs --broker redis")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # stop cleanly on SIGTERM as on Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="wf_breakit_"))
    figures = Figures()
    db = broker = server = load = fault = None
    stop = threading.Event()
    code = 2
    try:
        root = write_tree(tmp / "tree")
        pg_base = args.pg_url or os.environ.get("BREAKIT_PG_URL") or PG_BASE
        db = ServerDatabase(args.db, tmp, pg_base, prefix="wf_breakit")
        if not args.redis_url.startswith(("redis://127.0.0.1", "redis://localhost")):
            raise SystemExit("--redis-url must be on loopback")
        broker = Broker(args.broker, db, args.redis_url)
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "WORKFORCE_BROKER_URL", "WORKFORCE_VAR_DIR"}
            and not k.startswith(("WORKFORCE_Q_", "OPENAI_"))
        }
        env.update(db.env)
        env.update(broker.env)
        env.update(QUEUE_ENV if args.timings == "short" else {"WORKFORCE_Q_WORKERS": QUEUE_ENV["WORKFORCE_Q_WORKERS"]})
        env.update(
            {
                "DJANGO_SETTINGS_MODULE": "bench.breakit_settings",
                "PYTHONUNBUFFERED": "1",
                "WORKFORCE_LOG_LEVEL": "INFO",
                "WORKFORCE_AUTH": "none",
            }
        )
        server = Server(root, env, tmp / "serve.log")
        server.start()
        timings = (
            f"queue timeout {QUEUE_ENV['WORKFORCE_Q_TIMEOUT']}s retry {QUEUE_ENV['WORKFORCE_Q_RETRY']}s "
            f"sweep {QUEUE_ENV['WORKFORCE_SWEEP_SECONDS']}s"
            if args.timings == "short"
            else "the server's default queue timings"
        )
        header = (
            f"break-it rerun: {args.db} + {args.broker} broker, {args.posters} posters x {args.seconds:.0f} s "
            f"(think {args.think}s), {args.kills} kills ({args.kill_target}, seed {seed}), "
            f"{timings}, {QUEUE_ENV['WORKFORCE_Q_WORKERS']} workers" + (f", fault {args.fault}" if args.fault != "none" else "")
        )
        if args.fuzz_only:
            header = f"break-it rerun, fuzz only: {args.db} + {args.broker} broker"
        else:
            print(f"load: {header}", flush=True)
            load = Load(server, figures, args.posters, args.think)
            started = time.monotonic()
            threads = load.run(args.seconds)
            kills = threading.Thread(
                target=killer,
                args=(server, kill_plan(args.kills, args.seconds, args.kill_target, rng), figures, started, stop, rng),
                daemon=True,
            )
            kills.start()
            if args.fault != "none":
                fault = Fault(
                    args.fault, 0.4 * args.seconds if args.fault_at is None else args.fault_at, args.fault_seconds, db, broker
                )
                faulting = threading.Thread(target=fault.run, args=(started, stop), daemon=True)
                faulting.start()
            for t in threads:
                t.join()
            kills.join(timeout=120)
            if fault is not None:
                faulting.join(timeout=120)
            with server.lock:
                if server.process is None or server.process.poll() is not None:
                    server.start()
            print(
                f"load done after {time.monotonic() - started:.0f} s: {figures.posts_202} posts answered 202; "
                f"settling (at most {args.settle_seconds:.0f} s)",
                flush=True,
            )
            figures.settle_s = settle(db, broker, args.settle_seconds)
            count(db, broker, figures, load.acked, server.log.read_text("utf-8", "replace"), fault)
        if not args.no_fuzz:
            cases = fuzz_cases(mailbox=MAILBOX, board_mailbox=BOARD_MAILBOX, board=BOARD, coordinator=COORDINATOR)
            print(f"fuzz: {len(cases) + 3} requests", flush=True)
            offset = server.log.stat().st_size
            run_fuzz(server.port, cases, figures)
            probe_derived_ids(server.port, figures)
            quiet(broker, 15)
            figures.fuzz_log_errors = error_lines(server.tail(offset, chars=10_000_000))
        print()
        print(render(figures, header=header))
        if load and load.samples:
            print("\nload answers that were not 202 (first 10):")
            for s in load.samples:
                print(f"  - {s}")
        code = 0 if verdict(figures)[0] else 1
    except KeyboardInterrupt:
        print("\ninterrupted: cleaning up", file=sys.stderr)
        code = 130
    except Exception as exc:  # report it, clean up, exit 2
        print(f"breakit could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the cleanup short
            signal.signal(signum, signal.SIG_IGN)
        stop.set()
        if load:
            load.stop.set()
        if server:
            # Hold the lock for good: a restart under way finishes first, and none starts after.
            server.lock.acquire(timeout=120)
            server.stop(timeout=10)  # counted already: a stop that hangs (under backlog) is cut short
            if args.keep_log:
                kept = Path(tempfile.gettempdir()) / f"breakit-{os.getpid()}.log"
                shutil.copy(server.log, kept)
                print(f"server log: {kept}", file=sys.stderr)
        if broker:
            broker.close()
        if db:
            db.drop()
        shutil.rmtree(tmp, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
