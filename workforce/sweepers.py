"""Recovering dropped work inside the task cluster (pitfalls.md: the Redis broker has no
receipts, and a worker killed mid-task leaves its task undone or its row claimed).

Apps register named sweeps with ``register_sweep`` in their ``AppConfig.ready``: the
mailboxes app its routes (``mailboxes.routing.do_sweep_routes``), the seats app its
deliveries and its board drains. Each cluster worker process, when django-q2 spawns it
(the ``post_spawn`` signal, connected by this app), boots the process
(``workforce.runtime.boot_for_task``: hired seats, the mailbox kind's notify block) and
starts one daemon thread that runs every registered sweep, in the order registered,
every ``WORKFORCE_SWEEP_SECONDS`` (default 15). A sweep that fails is logged and its
database connection closed; the sweeps after it still run. Sweeps from several workers
at once must be safe: each one re-enqueues with a conditional UPDATE or a claim.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from django.conf import settings
from django.db import close_old_connections, connection

from .runtime import boot_for_task

logger = logging.getLogger(__name__)

_sweeps: dict[str, Callable[[], Any]] = {}
_every: dict[str, float] = {}  # a sweep's own cadence, seconds, when it has one
_started = False
_lock = threading.Lock()


def register_sweep(name: str, sweep: Callable[[], Any], *, every: float | None = None) -> None:
    """Run ``sweep()`` on every pass of the cluster workers' sweeper thread.

    Args:
        name: names the sweep in the log (``routes``, ``deliveries``); registering a
            name again replaces its sweep and keeps its place.
        sweep: takes nothing and returns what it did (logged at INFO), or something
            falsy when it did nothing. It must be idempotent and safe to run from
            several processes at once.
        every: its own cadence in seconds (a timer, such as round deadlines at 0.5 s);
            None runs it every ``WORKFORCE_SWEEP_SECONDS``. Keep a short cadence for
            sweeps whose query is one indexed read.
    """
    _sweeps[name] = sweep
    if every is None:
        _every.pop(name, None)
    else:
        if every <= 0:
            raise ValueError(f"every must be a positive number of seconds, not {every!r}")
        _every[name] = float(every)


def registered_sweeps() -> dict[str, Callable[[], Any]]:
    """The registered sweeps by name, in the order they run."""
    return dict(_sweeps)


def sweep_interval() -> float:
    """Seconds between sweeps (``WORKFORCE_SWEEP_SECONDS``, default 15)."""
    return float(getattr(settings, "WORKFORCE_SWEEP_SECONDS", 15))


def run_sweeps(names: list[str] | None = None) -> dict[str, Any]:
    """One pass: every registered sweep once (or those in ``names``), in order. Never
    raises.

    Returns:
        ``{name: what the sweep returned}`` for the sweeps that finished; a sweep that
        raised is logged, its connection closed, and left out.
    """
    done: dict[str, Any] = {}
    for name, sweep in list(_sweeps.items()):
        if names is not None and name not in names:
            continue
        try:
            close_old_connections()
            result = sweep()
        except Exception:
            logger.exception("sweeping %s failed", name)
            try:
                connection.close()
            except Exception:
                pass
            continue
        if result:
            logger.info("sweeper: %s: %s", name, result)
        done[name] = result
    return done


def start_sweeper(interval: float | None = None) -> bool:
    """Start this process's sweeper threads once: one running the sweeps without a
    cadence of their own every ``interval`` seconds (default ``sweep_interval()``),
    and one per sweep registered with ``every`` (a timer), so a slow sweep never delays
    a deadline. Returns True when this call started them."""
    global _started
    with _lock:
        if _started:
            return False
        _started = True
    plain = [name for name in _sweeps if name not in _every]
    groups = [("sweeper", plain, interval or sweep_interval())]
    groups += [(f"sweeper-{name}", [name], every) for name, every in _every.items()]
    for thread_name, names, every in groups:
        thread = threading.Thread(target=_loop, args=(names, every), name=thread_name, daemon=True)
        thread.start()
    return True


def _loop(names: list[str], interval: float) -> None:
    while True:
        run_sweeps(names)
        time.sleep(interval)


def on_worker_spawn(sender=None, proc_name: str = "", **kwargs) -> None:
    """django-q2 ``post_spawn`` receiver: boot this worker process
    (``workforce.runtime.boot_for_task``) and start its sweeper.

    Does nothing in ``sync`` mode, where django-q2 runs each task's "worker" inside the
    caller's process (tests): that process is configured by whoever runs it. A boot that
    fails (a bad tree) is logged and the sweeper still starts."""
    if boot_for_task(proc_name):
        start_sweeper()
