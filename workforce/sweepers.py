"""Recovering dropped work inside the task cluster (the Redis broker has no
receipts, and a worker killed mid-task leaves its task undone or its row claimed).

Apps register named sweeps with ``register_sweep`` in their ``AppConfig.ready``: the
mailboxes app its routes (``mailboxes.routing.do_sweep_routes``), the seats app its
deliveries and its board drains, the coordinators app its own (which the cluster runs
from a django-q2 Schedule instead). Each cluster worker process, when django-q2 spawns it
(the ``post_spawn`` signal, connected by this app), boots the process
(``workforce.runtime.boot_for_task``: hired seats, the mailbox kind's notify block) and
starts one daemon thread that runs the registered sweeps, in the order registered,
every ``settings.WORKFORCE_SWEEP_SECONDS``; ``manage.py sweep`` runs every one of them
once by hand. A sweep that fails is logged and its
database connection closed; the sweeps after it still run. Sweeps from several workers
at once must be safe: each one re-enqueues with a conditional UPDATE or a claim.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from .holders import is_outage
from .runtime import boot_for_task

logger = logging.getLogger(__name__)

_sweeps: dict[str, Callable[[], Any]] = {}
_every: dict[str, float] = {}  # a sweep's own cadence, seconds, when it has one
_by_hand_only: set[str] = set()  # sweeps the cluster runs on a schedule of their own
_started = threading.Event()  # this process's sweeper threads are running
_lock = threading.Lock()


def register_sweep(name: str, sweep: Callable[[], Any], *, every: float | None = None, in_sweeper_thread: bool = True) -> None:
    """Run ``sweep()`` on every pass of the cluster workers' sweeper thread, and from
    ``manage.py sweep``.

    Args:
        name: names the sweep in the log and in ``manage.py sweep --only`` (``routes``,
            ``deliveries``); registering a name again replaces its sweep and keeps its
            place.
        sweep: takes nothing and returns what it did (logged at INFO), or something
            falsy when it did nothing. It must be idempotent and safe to run from
            several processes at once.
        every: its own cadence in seconds (a timer, such as round deadlines at 0.5 s),
            run in a thread of its own; None runs it every ``WORKFORCE_SWEEP_SECONDS``.
            Keep a short cadence for sweeps whose query is one indexed read.
        in_sweeper_thread: False for a sweep the cluster already runs on a schedule of
            its own (the coordinators' django-q2 Schedule): ``manage.py sweep`` runs it,
            the sweeper thread does not.

    Raises:
        ValueError: ``every`` is not a positive number.
    """
    if every is not None and every <= 0:
        raise ValueError(f"every must be a positive number of seconds, not {every!r}")
    _sweeps[name] = sweep
    if every is None:
        _every.pop(name, None)
    else:
        _every[name] = float(every)
    if in_sweeper_thread:
        _by_hand_only.discard(name)
    else:
        _by_hand_only.add(name)


def registered_sweeps() -> dict[str, Callable[[], Any]]:
    """The registered sweeps by name, in the order they run."""
    return dict(_sweeps)


def sweeper_threads() -> int:
    """Threads ``start_sweeper`` runs in each cluster worker that reach the database,
    each with a connection of its own: one for the sweeps without a cadence of their
    own (when there are any) and one per sweep registered with ``every``. Read after
    the apps' ``ready()`` registered theirs."""
    return (1 if _plain_sweeps() else 0) + len(_every)


def _plain_sweeps() -> list[str]:
    """The sweeps the workers' main sweeper thread runs: no cadence of their own, not
    left to a schedule of their own."""
    return [name for name in _sweeps if name not in _every and name not in _by_hand_only]


def sweep_interval() -> float:
    """Seconds between sweeps (``settings.WORKFORCE_SWEEP_SECONDS``)."""
    return float(settings.WORKFORCE_SWEEP_SECONDS)


def run_sweep(name: str) -> Any:
    """Run the sweep registered as ``name`` once (after closing stale database connections) and
    return what it returned. Raises ``KeyError`` for a name nobody registered, and
    whatever the sweep raises (``manage.py sweep`` reports it)."""
    sweep = _sweeps[name]
    if not connection.in_atomic_block:  # a caller's transaction (a test) keeps its connection
        close_old_connections()
    return sweep()


def run_sweeps(names: list[str] | None = None) -> dict[str, Any]:
    """One pass of a sweeper thread: every registered sweep once (or those in
    ``names``), in order, but those registered with ``in_sweeper_thread=False``. Never
    raises.

    Returns:
        ``{name: what the sweep returned}`` for the sweeps that finished; a sweep that
        raised is logged, its connection closed, and left out.
    """
    return _run([name for name in _sweeps if name not in _by_hand_only and (names is None or name in names)])


def _run(names: list[str]) -> dict[str, Any]:
    done: dict[str, Any] = {}
    for name in names:
        try:
            result = run_sweep(name)
        except Exception as exc:
            if is_outage(exc):  # retried within a second (_loop): one line, not a traceback a second
                logger.warning("sweeping %s failed: the database is unreachable (%s)", name, " ".join(str(exc).split())[:200])
            else:
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


def run_all_sweeps() -> dict[str, Any]:
    """Every registered sweep once, now, but the timers (``every``): the plain ones and
    those the cluster runs on a schedule of their own (a broker that lost its queue:
    ``workforce.broker_watch.do_watch_broker``). Never raises; as ``run_sweeps``."""
    return _run([name for name in _sweeps if name not in _every])


def start_sweeper(interval: float | None = None) -> bool:
    """Start this process's sweeper threads once: one running the sweeps without a
    cadence of their own every ``interval`` seconds (default ``sweep_interval()``),
    and one per sweep registered with ``every`` (a timer), so a slow sweep never delays
    a deadline. Returns True when this call started them."""
    with _lock:
        if _started.is_set():
            return False
        _started.set()
    groups = [("sweeper", _plain_sweeps(), interval or sweep_interval())]
    groups += [(f"sweeper-{name}", [name], every) for name, every in _every.items()]
    for thread_name, names, every in groups:
        thread = threading.Thread(target=_loop, args=(names, every), name=thread_name, daemon=True)
        thread.start()
    return True


RETRY_SECONDS = 1.0  # between passes while a sweep fails (the database is down)


def _loop(names: list[str], interval: float) -> None:
    while True:
        done = run_sweeps(names)
        # A pass that failed (a database outage) is tried again within a second, so the
        # work an outage interrupted resumes within seconds of the database coming back,
        # not at the next pass.
        time.sleep(interval if len(done) == len(names) else min(interval, RETRY_SECONDS))


def on_worker_spawn(sender=None, proc_name: str = "", **kwargs) -> None:
    """django-q2 ``post_spawn`` receiver: boot this worker process
    (``workforce.runtime.boot_for_task``) and start its sweeper.

    Does nothing in ``sync`` mode, where django-q2 runs each task's "worker" inside the
    caller's process (tests): that process is configured by whoever runs it. A boot that
    fails (a bad tree) is logged and the sweeper still starts."""
    if boot_for_task(proc_name):
        start_sweeper()
