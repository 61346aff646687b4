"""The sweeper under a deliberate backlog: extra tasks per delivery, and post-to-wake
latency by position in the backlog, on a real django-q2 cluster with a short retry.

Setup: a throwaway database (temp SQLite, or a fresh PostgreSQL database when
DATABASE_URL names one), one mailbox of ``--members`` agent seats on ``embedded/echo``,
``manage.py qcluster`` started beside this process with a short ``timeout``/``retry``
(``--retry``; ``timeout`` one less, the lease one more) and a sweep every
``--sweep`` seconds in every worker. The broker is the ORM one, or Redis with
``--broker redis://127.0.0.1:6379/3`` (loopback only; the queue there is purged first).

After a warm-up, ``--posts`` posts are committed as fast as this process can (each
wakes every member), so the queue holds far more than the cluster runs within one
retry. Each delivery's latency is from its post's commit to the start of its seat's
turn; deliveries are ranked by when they were enqueued. Extra tasks are the sweeper's
re-enqueues (``requeues``, summed) and, counted independently, the ``deliver_post`` tasks
the cluster ran for these deliveries beyond one each (django-q2 keeps every result here:
``bench/_cluster_settings.py``).

Usage: ``python bench/sweeper_backlog.py [--posts 150] [--members 4] [--retry 6]
[--sweep 1] [--workers 2] [--broker orm|redis://127.0.0.1:6379/3]``.
Prints the ratio, latency by decile, the slope of latency over position, and a verdict.
"""

from __future__ import annotations

import argparse
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
from bench._db import start_cluster  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench._cluster_settings")  # a real cluster, not sync; every result kept
os.environ.setdefault("WORKFORCE_LOG_LEVEL", "WARNING")

WORKER = "---\ndescription: Listens.\nmodel: embedded/echo\n---\n\nYou listen.\n"


def write_tree(root: Path, members: int) -> Path:
    for n in range(members):
        path = root / f"teams/bench/workers/w{n}/WORKER.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(WORKER)
    path = root / "teams/bench/mailboxes/backlog/MAILBOX.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        textwrap.dedent(f"""\
        ---
        description: A mailbox under backlog.
        members: [{", ".join(f"bench.w{n}" for n in range(members))}]
        ---

        Benchmark.
        """)
    )
    return root


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares ``y = a + b x``: ``(a, b, r squared)``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=False))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else 0.0
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else 1.0
    return my - b * mx, b, r2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--posts", type=int, default=150)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--retry", type=int, default=6, help="Q_CLUSTER retry, seconds (timeout is one less)")
    parser.add_argument("--sweep", type=float, default=1.0, help="WORKFORCE_SWEEP_SECONDS")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--broker", default="orm", help='"orm" or a loopback redis:// URL')
    parser.add_argument("--deadline", type=float, default=600, help="give up after this many seconds")
    args = parser.parse_args()
    if args.broker != "orm":
        if not args.broker.startswith(("redis://127.0.0.1", "redis://localhost")):
            raise SystemExit("the bench talks to loopback only: --broker redis://127.0.0.1:6379/<db>")
        os.environ["WORKFORCE_BROKER_URL"] = args.broker
    os.environ.update(
        WORKFORCE_Q_WORKERS=str(args.workers),
        WORKFORCE_Q_RETRY=str(args.retry),
        WORKFORCE_Q_TIMEOUT=str(max(1, args.retry - 1)),
        WORKFORCE_SWEEP_SECONDS=str(args.sweep),
        WORKFORCE_TURN_TIMEOUT=str(max(0.5, args.retry - 2)),
        WORKFORCE_MODEL_TIMEOUT=str(max(0.5, args.retry - 2)),
    )
    root = write_tree(Path(tempfile.mkdtemp(prefix="wf_bench_tree_")), args.members)
    os.environ["WORKFORCE_ROOT"] = str(root)

    from bench._db import throwaway_database

    with throwaway_database() as connection:
        from django.conf import settings
        from django.db import transaction
        from django.db.models import Sum
        from django.utils import timezone
        from django_q.brokers import get_broker
        from django_q.models import Task

        from mailboxes.models import Delivery
        from workforce.models import DEFAULT_ORG_ID
        from workforce.sessions import do_run_action, ensure_organization
        from workforce_project.boot import boot, open_roster

        assert not settings.Q_CLUSTER.get("sync"), "the bench needs a real cluster"
        if args.broker != "orm":
            get_broker().purge_queue()
        open_roster(boot(root))
        org = ensure_organization(DEFAULT_ORG_ID)
        cluster, log = start_cluster()
        stamps: dict[str, object] = {}

        def post(n: int) -> str:
            stamp: dict = {}
            with transaction.atomic():
                transaction.on_commit(lambda: stamp.setdefault("at", timezone.now()))
                request = do_run_action(
                    org=org,
                    kind="mailbox",
                    session_id="bench.backlog",
                    action="post",
                    input={"body": f"post {n}"},
                    user_id="u_bench",
                )
            stamps[request.output["id"]] = stamp["at"]
            return request.output["id"]

        def wait_done(post_ids: list[str], deadline: float) -> None:
            want = len(post_ids) * args.members
            while Delivery.objects.filter(post_id__in=post_ids, status__in=("done", "failed")).count() < want:
                if time.monotonic() > deadline or cluster.poll() is not None:
                    raise SystemExit(f"deliveries did not finish; cluster log:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)

        started = time.monotonic()
        try:
            warm = [post(-1 - n) for n in range(3)]
            wait_done(warm, started + 120)
            Task.objects.all().delete()
            t0 = time.monotonic()
            post_ids = [post(n) for n in range(args.posts)]
            posted = time.monotonic() - t0
            wait_done(post_ids, started + args.deadline)
            drained = time.monotonic() - t0
            time.sleep(max(2 * args.sweep, 1.0))  # let the sweepers look once more at an empty backlog
            rows = list(Delivery.objects.filter(post_id__in=post_ids).select_related("turn_request").order_by("created_at", "pk"))
            requeues = None  # the sweepers' own count, where the code keeps one
            if any(f.name == "requeues" for f in Delivery._meta.fields):
                requeues = Delivery.objects.filter(post_id__in=post_ids).aggregate(n=Sum("requeues"))["n"] or 0
            ids = {r.pk for r in rows}
            ran = sum(1 for t in Task.objects.filter(func="mailboxes.tasks.deliver_post") if t.args and t.args[0] in ids)
        finally:
            cluster.send_signal(signal.SIGTERM)  # the main process only: signalling its group can deadlock its shutdown
            try:
                cluster.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
                cluster.wait()
        failed = [r for r in rows if r.status != "done"]
        latencies = [(r.turn_request.started_at - stamps[r.post_id]).total_seconds() for r in rows if r.turn_request]
        n = len(rows)
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        broker = "ORM" if args.broker == "orm" else args.broker
        print(
            f"sweeper under backlog ({engine}, {broker} broker, {args.workers} workers, retry {args.retry}s, "
            f"sweep every {args.sweep}s)"
        )
        print(
            f"  {args.posts} posts x {args.members} members = {n} deliveries, posted in {posted:.1f}s, "
            f"drained in {drained:.1f}s ({n / drained:.1f} deliveries/s); {len(failed)} not done"
        )
        extra = ran - n
        twice = [r for r in rows if r.attempts > 1]
        ratio = extra / n if n else 0.0
        print(
            f"  extra tasks: {extra} deliver_post tasks run beyond one per delivery = {100 * ratio:.2f}% of "
            f"deliveries ({ran} run; the sweepers' own count of re-enqueues: "
            f"{'n/a' if requeues is None else requeues})"
        )
        if twice:
            print(
                f"  {len(twice)} deliveries claimed twice (a lease lapsed: the cluster killed or lost the task "
                f"running it); cluster log: {log}"
            )
        ordered = sorted(latencies)
        deciles = [latencies[i * n // 10 : (i + 1) * n // 10] for i in range(10)]
        print(
            "  post-to-wake latency by position in the backlog (median per decile, s): "
            + " ".join(f"{statistics.median(d):.1f}" for d in deciles if d)
        )
        _, slope, r2 = linear_fit([float(i) for i in range(len(latencies))], latencies)
        print(
            f"  median {statistics.median(ordered):.1f}s, max {ordered[-1]:.1f}s; first decile "
            f"{statistics.median(deciles[0]):.1f}s, last decile {statistics.median(deciles[-1]):.1f}s; "
            f"slope {1000 * slope:.1f} ms per position (1/throughput {1000 * drained / n:.1f} ms), R^2 {r2:.3f}"
        )
        ok = ratio <= 0.01 and not failed and r2 >= 0.9
        print(
            f"verdict: {'PASS' if ok else 'FAIL'}: extra tasks {100 * ratio:.2f}% (<= 1%), "
            f"latency {'drains linearly' if r2 >= 0.9 else 'does not drain linearly'} (R^2 {r2:.2f}), "
            f"{len(failed)} deliveries not done"
        )
        connection.close()
        if not ok:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
