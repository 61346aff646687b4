"""Time from a post's commit to the start of each woken seat's turn (a seat woken on the task cluster),
on a real django-q2 cluster, for a mailbox of 1 member and one of 25.

Setup: a throwaway database (temp SQLite, or a fresh PostgreSQL database when
DATABASE_URL names one), a tree with one mailbox per size whose members are agent
seats on ``embedded/echo`` (no tools: the turn is the model call and its records), the
tree booted and opened in this process, and ``manage.py qcluster`` started beside it with
the same settings (not the sync test settings).

Each post is committed through the service (``do_run_action(... "post" ...)``); the
commit time is taken by the first on-commit callback, before the fan-out's enqueues run.
A seat's turn starts when its ``onMailboxPost`` request is created (``started_at``),
right after its delivery is claimed. Posts go one at a time, each after the last one's
deliveries finished, so every figure is one post's fan-out on an idle cluster.

Usage: ``python bench/seat_wake.py [--posts 20] [--workers 2] [--sizes 1,25]``.
Prints median and 95th percentile in milliseconds per size, the ratios to the baselines
(the ORM broker's poll; the 1-member p95) and a verdict against the goal (1 member: median
<= 20 ms, p95 <= 60 ms; 25 members: p95 <= 2 × the 1-member p95).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")  # a real cluster, not sync
os.environ.setdefault("WORKFORCE_LOG_LEVEL", "WARNING")

from bench._db import cluster_cpu, pg_sessions, start_cluster, throwaway_database  # noqa: E402

WORKER = "---\ndescription: Listens.\nmodel: embedded/echo\n---\n\nYou listen.\n"


def write_tree(root: Path, sizes: list[int]) -> Path:
    most = max(sizes)
    for n in range(most):
        path = root / f"teams/bench/workers/w{n}/WORKER.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(WORKER)
    for size in sizes:
        members = ", ".join(f"bench.w{n}" for n in range(size))
        path = root / f"teams/bench/mailboxes/m{size}/MAILBOX.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            textwrap.dedent(f"""\
            ---
            description: A mailbox of {size}.
            members: [{members}]
            ---

            Benchmark.
            """)
        )
    return root


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[index]


MEDIAN_GOAL, P95_GOAL, FAN_OUT_GOAL = 20.0, 60.0, 2.0  # ms, ms, × the 1-member p95 (the speed goal)


def verdict(figures: dict[int, tuple[float, float]], poll: float) -> str:
    """The ratios to the baselines (1 member: the ORM broker's poll interval; more
    members: the 1-member p95) and a one-line verdict against the goal: 1 member median
    <= 20 ms and p95 <= 60 ms, the largest size's p95 <= 2 × the 1-member p95."""
    if 1 not in figures:
        return "verdict: not judged (the goal is stated against 1 member: add 1 to --sizes)"
    median, p95 = figures[1]
    lines = [f"  ratio 1-member median / the ORM broker's poll ({poll:g} s): {median / (poll * 1000):.2f}"]
    ok = median <= MEDIAN_GOAL and p95 <= P95_GOAL
    parts = [
        f"1 member median {median:.1f} ms {'<=' if median <= MEDIAN_GOAL else '>'} {MEDIAN_GOAL:g}, "
        f"p95 {p95:.1f} ms {'<=' if p95 <= P95_GOAL else '>'} {P95_GOAL:g}"
    ]
    largest = max(figures)
    if largest > 1:
        fan = figures[largest][1] / p95
        lines.append(f"  ratio {largest}-member p95 / 1-member p95: {fan:.2f}")
        ok = ok and fan <= FAN_OUT_GOAL
        parts.append(
            f"{largest} members p95 {fan:.2f} {'<=' if fan <= FAN_OUT_GOAL else '>'} {FAN_OUT_GOAL:g} x the 1-member p95"
        )
    lines.append(
        f"verdict: {'MEETS' if ok else 'MISSES'} the goal: "
        + ", ".join(parts)
        + f" (goal: median <= {MEDIAN_GOAL:g} ms, p95 <= {P95_GOAL:g} ms; 25 members p95 <= {FAN_OUT_GOAL:g} x 1 member)"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=20, help="posts per mailbox size")
    parser.add_argument("--workers", type=int, default=None, help="cluster workers (default: settings)")
    parser.add_argument("--sizes", default="1,25", help="member counts, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    root = write_tree(Path(tempfile.mkdtemp(prefix="wf_bench_tree_")), sizes)
    os.environ["WORKFORCE_ROOT"] = str(root)
    if args.workers:
        os.environ["WORKFORCE_Q_WORKERS"] = str(args.workers)

    with throwaway_database() as connection:
        from django.conf import settings
        from django.db import transaction
        from django.utils import timezone

        from mailboxes.models import Delivery
        from workforce.models import DEFAULT_ORG_ID
        from workforce.sessions import do_run_action, ensure_organization
        from workforce_project.boot import boot, open_roster

        assert not settings.Q_CLUSTER.get("sync"), "the bench needs a real cluster"
        open_roster(boot(root))
        org = ensure_organization(DEFAULT_ORG_ID)
        cluster, log = start_cluster()

        busy: list[float] = []  # each delivery's claim -> settle, ms: a worker's time per turn
        cycles: list[float] = []  # per post: ms between turn starts on one worker
        workers = int(settings.Q_CLUSTER["workers"])

        def one_post(size: int, n: int) -> list[float]:
            stamp: dict = {}
            with transaction.atomic():
                transaction.on_commit(lambda: stamp.setdefault("at", timezone.now()))
                request = do_run_action(
                    org=org,
                    kind="mailbox",
                    session_id=f"bench.m{size}",
                    action="post",
                    input={"body": f"post {n}"},
                    user_id="u_bench",
                )
            post_id = request.output["id"]
            deadline = time.monotonic() + 120
            while True:
                rows = list(Delivery.objects.filter(post_id=post_id).select_related("turn_request"))
                if len(rows) == size and all(r.status in ("done", "failed") for r in rows):
                    break
                if time.monotonic() > deadline or cluster.poll() is not None:
                    raise SystemExit(f"deliveries did not finish; cluster log:\n{log.read_text()[-3000:]}")
                time.sleep(0.02)
            assert all(r.status == "done" for r in rows), [r.error for r in rows if r.error]
            busy.extend((r.finished_at - r.started_at).total_seconds() * 1000 for r in rows)
            starts = sorted(r.turn_request.started_at for r in rows)
            if size > 1:  # a worker's whole cycle per turn: its turns' starts, first to last
                cycles.append((starts[-1] - starts[0]).total_seconds() * 1000 / ((size - 1) / workers))
            return [(r.turn_request.started_at - stamp["at"]).total_seconds() * 1000 for r in rows]

        try:
            for size in sizes:  # warm up every worker process (boot, imports, connections)
                for n in range(3):
                    one_post(size, -1 - n)
            engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
            print(
                f"seat wake latency: post commit -> start of each woken seat's turn "
                f"({engine}, {settings.Q_CLUSTER['workers']} cluster workers, ORM broker poll "
                f"{settings.Q_CLUSTER.get('poll')}s, {args.posts} posts per size, embedded/echo)"
            )
            figures: dict[int, tuple[float, float]] = {}
            url = os.environ.get("DATABASE_URL", "") if engine == "postgresql" else ""
            for size in sizes:
                latencies: list[float] = []
                firsts: list[float] = []
                busy.clear()
                cycles.clear()
                cpu0, sessions0 = cluster_cpu(cluster.pid, workers), pg_sessions(url) if url else None
                for n in range(args.posts):
                    got = one_post(size, n)
                    latencies.extend(got)
                    firsts.append(min(got))
                cpu1 = cluster_cpu(cluster.pid, workers)
                time.sleep(1.5)  # backends report their sessions to the statistics within a second
                sessions1 = pg_sessions(url) if url else None
                figures[size] = (statistics.median(latencies), percentile(latencies, 0.95))
                print(
                    f"  {size:>3} member(s): {len(latencies):>4} turns  median {statistics.median(latencies):7.1f} ms"
                    f"  p95 {percentile(latencies, 0.95):7.1f} ms  (first seat per post: median "
                    f"{statistics.median(firsts):6.1f} ms)"
                )
                cpu = {role: (cpu1[role] - cpu0[role]) * 1000 / args.posts for role in cpu0}
                print(
                    f"        cluster CPU per post ({size} turn(s)): {sum(cpu.values()):6.1f} ms  (workers {cpu['workers']:.1f}, "
                    f"monitor {cpu['monitor']:.1f}, pusher {cpu['pusher']:.1f}, sentinel {cpu['sentinel']:.1f}, "
                    f"main {cpu['main']:.1f}; /proc, idle time between posts included)"
                )
                if size > 1 and 1 in figures:
                    # The k-th seat's turn cannot start before k // workers turns ahead of it
                    # on its worker have run (claim -> settle each), after the first seat's
                    # wake: the p95 seat's floor from worker throughput alone.
                    ahead = (math.ceil(0.95 * size) - 1) // workers
                    floor = figures[1][0] + ahead * statistics.median(busy)
                    print(
                        f"        worker throughput bound: a turn holds its worker {statistics.median(busy):.1f} ms "
                        f"(median claim -> settle); the p95 seat waits for {ahead} turns ahead of it on each of "
                        f"{workers} workers: p95 >= {floor:.0f} ms = {floor / figures[1][1]:.2f} x the 1-member p95"
                    )
                    print(
                        f"        measured: a worker starts a turn every {statistics.median(cycles):.1f} ms (median per post), "
                        f"{statistics.median(cycles) - statistics.median(busy):.1f} ms of it outside claim -> settle "
                        f"(django-q2's hand-off, the task's own reads and commits, waiting for a core)"
                    )
                if sessions0 is not None and sessions1 is not None:
                    # Minus the statistics read's own session; this process keeps its one connection.
                    print(f"        new PostgreSQL connections per post: {(sessions1 - sessions0 - 1) / args.posts:.2f}")
            print(verdict(figures, settings.Q_CLUSTER.get("poll") or 0.2))
        finally:
            cluster.send_signal(signal.SIGTERM)  # the main process only (a group signal can deadlock it)
            try:
                cluster.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
                cluster.wait()
            connection.close()


if __name__ == "__main__":
    main()
