"""Recovering dropped deliveries inside the task cluster (pitfalls.md: the Redis broker
has no receipts, and a worker killed mid-task leaves its delivery claimed).

Each cluster worker process, when django-q2 spawns it (the ``post_spawn`` signal),
boots the process (``workforce.runtime.ensure_booted``: hired seats, the mailbox kind's
notify block) and starts one daemon thread that runs ``do_sweep_deliveries`` and
``seats.drains.do_sweep_board_drains`` every ``WORKFORCE_SWEEP_SECONDS`` (default 15).
Sweeps from several workers at once are safe: each re-enqueue is a conditional UPDATE,
and a board drain is decided by its claim.
"""
from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import close_old_connections, connection

from workforce.runtime import ensure_booted

from .drains import do_sweep_board_drains
from .services import do_sweep_deliveries

logger = logging.getLogger(__name__)

_started = False
_lock = threading.Lock()


def sweep_interval() -> float:
    """Seconds between sweeps (``WORKFORCE_SWEEP_SECONDS``)."""
    return float(getattr(settings, "WORKFORCE_SWEEP_SECONDS", 15))


def on_worker_spawn(sender=None, proc_name: str = "", **kwargs) -> None:
    """django-q2 ``post_spawn`` receiver: boot this worker process and start its sweeper.

    Does nothing in ``sync`` mode, where django-q2 runs each task's "worker" inside the
    caller's process (tests): that process is configured by whoever runs it."""
    from django_q.conf import Conf

    if Conf.SYNC:
        return
    try:
        ensure_booted()
    except Exception:
        logger.exception("booting cluster worker %s failed", proc_name)
    start_sweeper()


def start_sweeper(interval: float | None = None) -> bool:
    """Start this process's sweeper thread once. Returns True when it started it."""
    global _started
    with _lock:
        if _started:
            return False
        _started = True
    thread = threading.Thread(target=_loop, args=(interval or sweep_interval(),), name="delivery-sweeper", daemon=True)
    thread.start()
    return True


def _loop(interval: float) -> None:
    while True:
        try:
            close_old_connections()
            result = do_sweep_deliveries()
            if result.requeued or result.abandoned:
                logger.info("sweeper: requeued %s, abandoned %s", result.requeued, result.abandoned)
        except Exception:
            logger.exception("sweeping deliveries failed")
            try:
                connection.close()
            except Exception:
                pass
        try:  # board rows nothing picked up (seats.drains)
            woken = do_sweep_board_drains()
            if woken:
                logger.info("sweeper: woke board drains %s", woken)
        except Exception:
            logger.exception("sweeping board drains failed")
            try:
                connection.close()
            except Exception:
                pass
        time.sleep(interval)
