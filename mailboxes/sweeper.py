"""Recovering dropped route tasks inside the task cluster (pitfalls.md: the Redis broker
has no receipts; a worker killed mid-task leaves its task undone).

Each cluster worker process, when django-q2 spawns it (``post_spawn``), starts one daemon
thread that runs ``mailboxes.routing.do_sweep_routes`` every ``WORKFORCE_SWEEP_SECONDS``:
a route still undecided ``Q_CLUSTER["retry"]`` seconds after it was enqueued is enqueued
again. Sweeps from several workers at once are safe (conditional UPDATEs), and deciding
a route twice records it once.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

_started = False
_lock = threading.Lock()


def on_worker_spawn(sender=None, proc_name: str = "", **kwargs) -> None:
    """django-q2 ``post_spawn`` receiver: start this worker's route sweeper (not in
    ``sync`` mode, where tasks run inside the caller's process)."""
    from django_q.conf import Conf

    if Conf.SYNC:
        return
    start_route_sweeper()


def start_route_sweeper(interval: float | None = None) -> bool:
    """Start this process's route sweeper thread once. Returns True when it started it."""
    global _started
    with _lock:
        if _started:
            return False
        _started = True
    seconds = interval or float(getattr(settings, "WORKFORCE_SWEEP_SECONDS", 15))
    threading.Thread(target=_loop, args=(seconds,), name="route-sweeper", daemon=True).start()
    return True


def _loop(interval: float) -> None:
    from .routing import do_sweep_routes

    while True:
        try:
            close_old_connections()
            requeued = do_sweep_routes()
            if requeued:
                logger.info("route sweeper: requeued %s", requeued)
        except Exception:
            logger.exception("sweeping routes failed")
            try:
                connection.close()
            except Exception:
                pass
        time.sleep(interval)
