"""Board claims per second, as ratios against a raw claim loop in the same run.

For 1 and for 4 drainers (separate processes, started together), N rows are claimed
until none is left:

- raw: one ``UPDATE … WHERE id = (SELECT id … ORDER BY … LIMIT 1 FOR UPDATE SKIP LOCKED)
  RETURNING id`` per claim in autocommit, on the same table (another ledger id), so the
  same shape and indexes. On SQLite the raw loop has no SKIP LOCKED (SQLite has no row
  locks); the figures are then mostly about its single writer.
- service: ``boards.services.do_claim_task`` until it returns None (the claimable
  query with the deps check and the assignee, lapsed rows first in claim order, the
  ``claimed`` change record; one statement on PostgreSQL);
- drain: ``boards.services.do_drain_board`` with a runner that does nothing, the loop a
  seat's drain task runs (claim, run, settle with its ``completed`` record, claim the
  next), against a raw loop of the same claim plus one ``UPDATE … SET status =
  'completed'`` per row (raw+settle).

Prints rows/s for each, the ratios service/raw and drain/raw+settle, and a verdict (the
goal: service at 4 drainers >= 0.5 × raw, zero double claims; the drain's ratio is
printed beside it against the same 0.5). Usage:
``python bench/board_claims.py [--rows 2000]``; set DATABASE_URL for PostgreSQL (a
throwaway database is created and dropped).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench._db import throwaway_database  # noqa: E402

ORG = "default"
CLAIM_GOAL = 0.5  # 4 drainers through the service at least half the raw SKIP LOCKED loop (the speed goal)


def worker(mode: str, board_id: str, start_at: float) -> None:
    """One drainer process: wait for ``start_at``, claim until nothing is left, print
    ``<claims> <start> <end>``."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings_test")
    import django

    django.setup()
    from django.db import connection

    from boards.services import do_claim_task, do_drain_board
    from workforce.models import Organization

    org = Organization.objects.get(pk=ORG)
    connection.ensure_connection()
    pg = connection.vendor == "postgresql"
    lock = " FOR UPDATE SKIP LOCKED" if pg else ""
    raw_sql = (
        "UPDATE boards_boardtask SET status = 'in_progress', attempts = attempts + 1, "
        "claim_token = %s, lease_until = %s, started_at = %s, updated_at = %s "
        "WHERE id = (SELECT id FROM boards_boardtask WHERE organization_id = %s AND board_id = %s "
        f"AND status = 'pending' ORDER BY created_at, id LIMIT 1{lock}) AND status = 'pending' RETURNING id"
    )
    while time.time() < start_at:
        time.sleep(0.002)
    t0 = time.time()
    n = 0
    settle_sql = (
        "UPDATE boards_boardtask SET status = 'completed', output = 'null', claim_token = NULL, "
        "lease_until = NULL, completed_at = %s, updated_at = %s WHERE id = %s AND claim_token = %s"
    )
    if mode == "service":
        while do_claim_task(org, board_id, worker_key=None, run="bench") is not None:
            n += 1
    elif mode == "drain":
        n = do_drain_board(org, board_id, worker_key=None, run_row=lambda task: None, run="bench").completed
    else:
        import secrets

        from django.utils import timezone

        with connection.cursor() as cur:
            while True:
                now = timezone.now()
                token = secrets.token_hex(16)
                cur.execute(raw_sql, [token, now, now, now, ORG, board_id])
                claimed = cur.fetchone()
                if claimed is not None and mode == "raw_settle":
                    cur.execute(settle_sql, [timezone.now(), timezone.now(), claimed[0], token])
                if claimed is None:
                    # SQLite: a lost conditional UPDATE also returns nothing; check for rows left
                    cur.execute(
                        "SELECT 1 FROM boards_boardtask WHERE organization_id = %s AND board_id = %s AND status = 'pending' LIMIT 1",
                        [ORG, board_id],
                    )
                    if cur.fetchone() is None:
                        break
                    continue
                n += 1
    print(n, t0, time.time())


def run(mode: str, drainers: int, rows: int, tag: str) -> float:
    from boards.models import BoardTask
    from workforce.models import Organization

    org = Organization.objects.get(pk=ORG)
    board_id = f"bench.{mode}.b{drainers}{tag}"
    BoardTask.objects.bulk_create([BoardTask(organization=org, board_id=board_id, goal=f"row {i}") for i in range(rows)])
    start_at = time.time() + 2.5
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", mode, "--board", board_id, "--start-at", str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(drainers)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=False):
        if p.returncode != 0:
            raise SystemExit(err)
    counts, starts, ends = zip(*[tuple(float(x) for x in out.split()) for out, _ in outs], strict=False)
    assert int(sum(counts)) == rows, (mode, counts)
    # every row claimed exactly once (attempts 1), and settled by the drains that settle
    done = "completed" if mode in ("drain", "raw_settle") else "in_progress"
    assert BoardTask.objects.filter(board_id=board_id, attempts=1, status=done).count() == rows, mode
    if mode in ("service", "drain"):
        from boards.models import TaskChange

        claims = TaskChange.objects.filter(board_id=board_id, kind="claimed").count()
        assert claims == rows, f"{mode}: {claims} claim records for {rows} rows (a double claim)"
    return rows / (max(ends) - min(starts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--worker", choices=["service", "raw", "drain", "raw_settle"])
    parser.add_argument("--board")
    parser.add_argument("--start-at", type=float)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.board, args.start_at)
        return

    with throwaway_database() as connection:
        from workforce.sessions import ensure_organization

        ensure_organization(ORG)
        print(f"database: {connection.vendor}, {args.rows} rows per run")
        connection.close()  # the drainers open their own
        ratios = {}
        drain_ratios = {}
        for drainers in (1, 4):
            raw = run("raw", drainers, args.rows, "")
            service = run("service", drainers, args.rows, "")
            raw_settle = run("raw_settle", drainers, args.rows, "")
            drain = run("drain", drainers, args.rows, "")
            ratios[drainers] = service / raw
            drain_ratios[drainers] = drain / raw_settle
            print(
                f"{drainers} drainer(s): raw claim loop {raw:,.0f}/s, service {service:,.0f}/s, ratio service/raw {service / raw:.2f}; "
                f"raw claim+settle {raw_settle:,.0f}/s, drain loop {drain:,.0f}/s, ratio drain/raw+settle {drain / raw_settle:.2f}"
            )
        ok = ratios[4] >= CLAIM_GOAL
        # run() asserts that every row was claimed exactly once (attempts = 1, one claimed
        # record per row): a double claim stops the bench before this line.
        print(
            f"verdict: {'MEETS' if ok else 'MISSES'} the goal: service/raw at 4 drainers {ratios[4]:.2f} "
            f"{'>=' if ok else '<'} {CLAIM_GOAL}, zero double claims (goal: >= {CLAIM_GOAL} x raw, zero double claims); "
            f"drain/raw+settle at 4 drainers {drain_ratios[4]:.2f} ({'>=' if drain_ratios[4] >= CLAIM_GOAL else '<'} {CLAIM_GOAL})"
        )


if __name__ == "__main__":
    main()
