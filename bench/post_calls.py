"""The post's Python function calls and statements, counted: a noise-free companion to
``bench/posts.py`` for a shared machine, where time is what the neighbours measure too.

N posts into one mailbox through the service (``do_run_action(... "post" ...)``, the path
``bench/posts.py`` times), after a warm-up, under ``cProfile``: prints the function
calls per post (``pstats`` total calls / N, deterministic for a given tree, database and
interpreter) and, over another N posts, the statements per post (every statement the
connection sends, through Django's ``execute_wrapper``). Run it from two checkouts (a
``git archive`` of an older commit, the same interpreter) to compare their post paths.

Then, with no profiler, this process's CPU per post (``time.process_time``) over
``--rounds`` rounds of ``--posts`` / ``--rounds`` posts: the lowest round's, the one the
neighbours on a shared machine disturbed least, and the median.

``--callgrind``: only ``--posts`` posts with callgrind's instrumentation on around them
(``callgrind_control -i on``/``off``), nothing else; run it as ``valgrind --tool=callgrind
--instr-atstart=no --callgrind-out-file=F python bench/post_calls.py --callgrind`` and
divide the ``totals:`` line of F by ``--posts``: instructions per post, which a loaded
machine does not change.

Usage: ``python bench/post_calls.py [--posts 600] [--rounds 10] [--dump FILE] [--top 0]``;
set DATABASE_URL for PostgreSQL (a throwaway database is created and dropped).
``--dump`` writes the profile (``pstats``) for a diff by function; ``--top K`` prints
the K functions called most.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import throwaway_database  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--dump", default="")
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--callgrind", action="store_true")
    args = parser.parse_args()

    with throwaway_database() as connection:
        from mailboxes.binder import BoundMailbox, Roster
        from mailboxes.roster import set_current_roster
        from mailboxes.services import do_open_mailboxes
        from workforce.models import DEFAULT_ORG_ID
        from workforce.sessions import do_run_action, ensure_organization

        org = ensure_organization(DEFAULT_ORG_ID)
        box = BoundMailbox(id="bench.box0", kind="mailbox", description="bench", members=["bench.a"], charter="")
        set_current_roster(Roster(mailboxes=[box]))
        do_open_mailboxes(org, [box], user_id="bench")
        body = "x" * 120

        def post() -> None:
            r = do_run_action(org=org, kind="mailbox", session_id="bench.box0", action="post", input={"body": body}, user_id="u")
            assert r.status == "completed", r.error

        for _ in range(args.warmup):  # first-call caches (statements, plans) out of the count
            post()

        if args.callgrind:
            instrument = ["callgrind_control", "-i"]
            subprocess.run([*instrument, "on", str(os.getpid())], check=True, capture_output=True)
            for _ in range(args.posts):
                post()
            subprocess.run([*instrument, "off", str(os.getpid())], check=True, capture_output=True)
            print(f"{args.posts} posts instrumented: divide the callgrind file's totals by {args.posts}")
            return

        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.posts):
            post()
        profile.disable()
        stats = pstats.Stats(profile)

        statements: list[str] = []

        def count(execute, sql, params, many, context):
            statements.append(sql)
            return execute(sql, params, many, context)

        with connection.execute_wrapper(count):
            for _ in range(args.posts):
                post()

        per_round = max(1, args.posts // args.rounds)
        cpu = []
        for _ in range(args.rounds):
            c0 = time.process_time()
            for _ in range(per_round):
                post()
            cpu.append((time.process_time() - c0) / per_round)

        print(f"tree: {Path(__file__).resolve().parents[1]}")
        print(f"database: {connection.vendor}")
        print(f"calls per post: {stats.total_calls / args.posts:,.1f} ({stats.total_calls:,} for {args.posts})")  # type: ignore[attr-defined]
        print(f"statements per post: {len(statements) / args.posts:g}")
        print(
            f"CPU per post: {min(cpu) * 1e6:,.0f} us lowest, {statistics.median(cpu) * 1e6:,.0f} us median "
            f"({args.rounds} rounds of {per_round}, no profiler)"
        )
        if args.dump:
            stats.dump_stats(args.dump)
        if args.top:
            stats.sort_stats("ncalls").print_stats(args.top)


if __name__ == "__main__":
    main()
