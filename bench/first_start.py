"""The first start: ``python manage.py serve`` on the embedded defaults (SQLite, the ORM
broker, the example tree) in a fresh ``WORKFORCE_VAR_DIR``, until ``GET /api/`` answers
200 (issue 25 item 12; goal: within 10 s).

    python bench/first_start.py [--runs 3] [--repo PATH]

``--repo`` times another checkout of the project with this interpreter (a ``git worktree``
or ``git archive`` of an older commit, to compare before with after). Each run starts
``serve`` on a free loopback port with a new temp ``WORKFORCE_VAR_DIR``, reads its output
line by line with the time each line arrived, polls ``/api/`` every 0.1 s, and stops it
with SIGINT once it answered. Prints, per run, when serve printed its first line, when it
said it had migrated, when it said it was serving, and when HTTP answered (seconds from
the start of the process); then the medians, the machine's load average, and a verdict.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_start(repo: Path, *, timeout: float = 180.0) -> dict[str, float]:
    """One first start of ``repo``'s serve; the seconds at which each milestone came."""
    var = tempfile.mkdtemp(prefix="wf_first_start_")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE", "WORKFORCE_ROOT"}}
    env.update({"WORKFORCE_VAR_DIR": var, "PYTHONUNBUFFERED": "1"})
    started = time.monotonic()
    serve = subprocess.Popen(
        [sys.executable, str(repo / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}"],
        cwd=repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    marks: dict[str, float] = {}
    lines: list[str] = []

    def read() -> None:
        assert serve.stdout is not None
        for line in serve.stdout:
            at = time.monotonic() - started
            lines.append(f"{at:6.2f} {line.rstrip()}")
            marks.setdefault("first line", at)
            if line.startswith("migrated in "):
                marks.setdefault("migrated", at)
            if line.startswith("serving "):
                marks.setdefault("serving", at)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        while time.monotonic() - started < timeout:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/", timeout=5) as answer:
                    if answer.status == 200:
                        marks["HTTP 200"] = time.monotonic() - started
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if serve.poll() is not None:
                raise SystemExit("serve ended before it answered:\n" + "\n".join(lines))
            time.sleep(0.1)
        else:
            raise SystemExit(f"no answer within {timeout:g}s:\n" + "\n".join(lines))
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
        reader.join(timeout=5)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repo", type=Path, default=REPO, help="the checkout to start (default: this one)")
    options = parser.parse_args()
    names = ("first line", "migrated", "serving", "HTTP 200")
    runs = []
    load = os.getloadavg()
    for n in range(options.runs):
        marks = one_start(options.repo.resolve())
        runs.append(marks)
        print(f"run {n + 1}: " + ", ".join(f"{name} {marks[name]:.2f}s" for name in names if name in marks), flush=True)
    medians = {name: statistics.median(r[name] for r in runs) for name in names if all(name in r for r in runs)}
    print("median: " + ", ".join(f"{name} {value:.2f}s" for name, value in medians.items()))
    print(f"load average at the start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} ({os.cpu_count()} CPUs)")
    answered = medians["HTTP 200"]
    verdict = "meets" if answered <= GOAL_SECONDS else "misses"
    print(f"verdict: first HTTP answer {answered:.2f}s (median of {len(runs)}), goal <= {GOAL_SECONDS:g}s: {verdict}")


if __name__ == "__main__":
    main()
