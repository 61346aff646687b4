"""A seat turn's history window read (``seats.queries.conversation_history``, issue 26),
this checkout's against another commit's (``--baseline``, loaded from git into this
process: same interpreter, same database, same rows), alternated call by call.

One conversation per shape, ``WORKFORCE_HISTORY_WINDOW`` (50) turns in the window and
10 older ones: ``echo`` (a short prompt and a short reply per turn, the peer bench's
echo seat) and ``tools`` (a prompt, two ``tool-call`` items and a reply carrying two tool
calls with their results). Prints per shape: Python function calls per call (``cProfile``
total calls, one call after a warm-up: deterministic for a tree, a database and an
interpreter), then this thread's CPU per call (``time.thread_time_ns``; the database
server's is not in it) over ``--calls`` calls alternated baseline/this, medians, and
checks both return the same history.

Usage: ``python bench/history_window.py [--calls 2000] [--baseline bf6f4b5]``; set
DATABASE_URL for PostgreSQL (a throwaway database is created and dropped).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import REPO, throwaway_database  # noqa: E402

RESULT = "r" * 400
SHAPES = ("echo", "tools")


def baseline_queries(rev: str) -> types.ModuleType:
    """``seats/queries.py`` at ``rev``, as a module of package ``seats`` (its own floors)."""
    source = subprocess.run(["git", "show", f"{rev}:seats/queries.py"], cwd=REPO, check=True, capture_output=True, text=True)
    module = types.ModuleType("seats._baseline_queries")
    module.__package__ = "seats"
    exec(compile(source.stdout, f"{rev}:seats/queries.py", "exec"), module.__dict__)
    return module


def conversation(org, shape: str, turns: int):
    from workforce.models import Item, Request, Session

    session = Session.objects.create(organization=org, session_id=f"bench.m:{shape}", flow_kind="agent", user_id="u")
    seq = 0
    for n in range(turns):
        request = Request.objects.create(organization=org, session=session, action="t", user_id="u", status="completed")
        items = [{"role": "user", "text": f"question {n}: " + "q" * 60}]
        reply = {"role": "assistant", "text": f"answer {n}: " + "a" * 200, "agentName": "bench.seat"}
        if shape == "tools":
            calls = [{"id": f"c{n}.{k}", "name": "search", "arguments": {"q": "x" * 40}, "result": RESULT} for k in range(2)]
            items += [{"name": c["name"], "arguments": c["arguments"], "status": "done", "result": RESULT} for c in calls]
            reply["toolCalls"] = calls
        items.append(reply)
        for k, data in enumerate(items):
            seq += 1
            kind = "message" if k in (0, len(items) - 1) else "tool-call"
            Item.objects.create(session=session, request=request, seq=seq, type=kind, data=data)
    return session


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--baseline", default="bf6f4b5")
    args = parser.parse_args()

    with throwaway_database() as connection:
        from seats import queries
        from workforce.sessions import ensure_organization, history_window

        old = baseline_queries(args.baseline)
        org = ensure_organization("bench")
        print(f"{connection.vendor}, window {history_window()} turns, baseline {args.baseline}")
        for shape in SHAPES:
            session = conversation(org, shape, history_window() + 10)
            reads = {"baseline": old.conversation_history, "this": queries.conversation_history}
            results = {name: read(session, speaker="bench.seat") for name, read in reads.items()}
            assert results["baseline"] == results["this"], "the histories differ"
            assert len(results["this"]) == 2 * history_window()
            calls = {}
            for name, read in reads.items():
                for _ in range(20):
                    read(session, speaker="bench.seat")
                profile = cProfile.Profile()
                profile.runcall(read, session, speaker="bench.seat")
                calls[name] = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
            cpu: dict[str, list[int]] = {name: [] for name in reads}
            for _ in range(args.calls // 2):
                for name, read in reads.items():
                    start = time.thread_time_ns()
                    read(session, speaker="bench.seat")
                    cpu[name].append(time.thread_time_ns() - start)
            med = {name: statistics.median(values) / 1000 for name, values in cpu.items()}
            print(
                f"{shape}: {len(results['this'])} messages; function calls per call baseline {calls['baseline']}, "
                f"this {calls['this']} ({calls['this'] / calls['baseline']:.2f} x); CPU per call (median of "
                f"{args.calls // 2} each) baseline {med['baseline']:.0f} µs, this {med['this']:.0f} µs "
                f"({med['this'] / med['baseline']:.2f} x)"
            )


if __name__ == "__main__":
    main()
