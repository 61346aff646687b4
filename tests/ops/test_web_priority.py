"""``WORKFORCE_WEB_NICE`` (workforce_project.priority): serve lowers its own threads'
CPU priority beside its cluster, all but the thread that restarts the cluster, so a
cluster it starts keeps the normal priority. Run in a child process: a process cannot
raise its priority back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, threading
from workforce_project.priority import lower_own_priority

ready, done = threading.Event(), threading.Event()
tids = {}

def worker(name):
    tids[name] = threading.get_native_id()
    ready.set() if name == "keeper" else None
    done.wait()

threads = [threading.Thread(target=worker, args=(n,)) for n in ("keeper", "other")]
for t in threads:
    t.start()
while len(tids) < 2:
    pass
base = os.getpriority(os.PRIO_PROCESS, 0)
lowered = lower_own_priority(5, keep={tids["keeper"]})
later = []
t = threading.Thread(target=lambda: later.append(os.getpriority(os.PRIO_PROCESS, 0)))
t.start(); t.join()
child = int(os.popen("sh -c 'cut -d\\" \\" -f19 /proc/$$/stat'").read())  # a process the main thread starts
print(lowered, os.getpriority(os.PRIO_PROCESS, tids["keeper"]) - base, os.getpriority(os.PRIO_PROCESS, tids["other"]) - base,
      os.getpriority(os.PRIO_PROCESS, 0) - base, later[0] - base, child - base, lower_own_priority(0, keep=set()))
done.set()
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="per-thread nice values are Linux's")
def test_every_thread_but_the_keeper_is_lowered_and_what_they_start_inherits_it():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    # lowered: the main thread and "other" (2); keeper +0; other, main, a later thread and a
    # child process +5; an increment of 0 lowers nothing.
    assert out.stdout.split() == ["2", "0", "5", "5", "5", "5", "0"], out.stderr
