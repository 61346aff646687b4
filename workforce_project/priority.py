"""The web server's share of the CPU beside its own task cluster (docs/running.md
"Back-pressure"): ``serve`` runs both on one machine, and a busy web server took the cores
the cluster needed to run the turns it accepted (issue 26 item 5). With
``WORKFORCE_WEB_NICE`` set, ``serve`` lowers the CPU priority of its own threads once its
cluster has started, so the cluster's processes win the CPU when both want it.

Linux only: a thread's nice value is its own there (``/proc/self/task``), so the thread
that restarts the cluster (``serve``'s cluster keeper) is left as it was and a cluster it
starts keeps the normal priority; threads started later by a lowered thread (the
request threads) inherit the lowered value. An unprivileged process can lower its
priority but never raise it back, hence the keeper's exemption.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

NICE_MAX = 19


def lower_own_priority(increment: int, *, keep: set[int]) -> int:
    """Add ``increment`` to the nice value of every thread of this process except the
    native thread ids in ``keep`` (at most 19). Returns how many threads were lowered; 0
    when ``increment`` is not positive or the system has no ``/proc/self/task``.

    Args:
        increment: nice steps to add, 1-19 (each step is ~10 % less CPU weight under
            Linux's scheduler when the cores are contended).
        keep: native thread ids (``threading.get_native_id()``) left as they are.
    """
    tasks = Path("/proc/self/task")
    if increment <= 0 or not tasks.is_dir():
        return 0
    lowered = 0
    for entry in tasks.iterdir():
        tid = int(entry.name)
        if tid in keep:
            continue
        try:
            now = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(NICE_MAX, now + increment))
            lowered += 1
        except (ProcessLookupError, PermissionError, OSError):  # a thread that just ended
            logger.debug("could not lower thread %s", tid, exc_info=True)
    return lowered
