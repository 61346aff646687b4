"""Recovering dropped work inside the task cluster (the Redis broker has no
receipts, and a worker killed mid-task leaves its task undone or its row claimed).

Apps register named sweeps with ``register_sweep`` in their ``AppConfig.ready``: the
mailboxes app its routes (``mailboxes.routing.do_sweep_routes``), the seats app its
deliveries and its board drains, the coordinators app its own (which the cluster runs
from a django-q2 Schedule instead). Each cluster worker process, when django-q2 spawns it
(the ``post_spawn`` signal, connected by this app), boots the process
(``workforce.runtime.boot_for_task``: hired seats, the mailbox kind's notify block) and
starts a daemon thread that runs the registered sweeps once, in the order registered;
then one worker per machine and database (``start_sweeper``) runs them every
``settings.WORKFORCE_SWEEP_SECONDS`` while there is work, backing off to
``settings.WORKFORCE_SWEEP_IDLE_SECONDS`` while there is none, and its timers sleep
until their next deadline (docs/running.md "Idle"); ``manage.py sweep`` runs every one
of them once by hand. A sweep that fails is logged and its
database connection closed; the sweeps after it still run. Sweeps from several workers
at once must be safe: each one re-enqueues with a conditional UPDATE or a claim.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection

from .holders import is_outage
from .runtime import boot_for_task
from .wakeups import Backoff, Waiter

logger = logging.getLogger(__name__)

_sweeps: dict[str, Callable[[], Any]] = {}
_every: dict[str, float] = {}  # a sweep's own cadence, seconds, when it has one
_due: dict[str, Callable[[], float | None]] = {}  # a timer's "seconds until I have work"
_wake_on: dict[str, str] = {}  # a timer's wake-up channel (workforce.wakeups)
_by_hand_only: set[str] = set()  # sweeps the cluster runs on a schedule of their own
_started = threading.Event()  # this process's sweeper threads are running
_lock = threading.Lock()


def register_sweep(
    name: str,
    sweep: Callable[[], Any],
    *,
    every: float | None = None,
    in_sweeper_thread: bool = True,
    due: Callable[[], float | None] | None = None,
    wake_on: str | None = None,
) -> None:
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
        due: with ``every``: returns the seconds until the timer next has work (a
            round's deadline; 0 or less: now), or None when nothing is scheduled; the
            timer then sleeps until then (at most ``WORKFORCE_SWEEP_IDLE_SECONDS``)
            instead of looking every ``every`` seconds.
        wake_on: with ``due``: a ``workforce.wakeups`` channel that work for this timer
            is announced on (``wake(channel)`` where a deadline is set), which ends
            its sleep at once.

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
    for table, value in ((_due, due), (_wake_on, wake_on)):
        if value is None or every is None:
            table.pop(name, None)
        else:
            table[name] = value  # type: ignore[assignment]
    if in_sweeper_thread:
        _by_hand_only.discard(name)
    else:
        _by_hand_only.add(name)


def registered_sweeps() -> dict[str, Callable[[], Any]]:
    """The registered sweeps by name, in the order they run."""
    return dict(_sweeps)


def sweeper_threads() -> int:
    """Database connections ``start_sweeper`` may hold in a cluster worker, at most (the
    worker that is its machine's sweeper): one for the sweeps without a cadence of their
    own (when there are any), one per sweep registered
    with ``every``, and one more for each of those woken by a channel. Read after the
    apps' ``ready()`` registered theirs."""
    return (1 if _plain_sweeps() else 0) + len(_every) + len(_wake_on)


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


def idle_sweep_interval() -> float:
    """The longest wait between passes while they find nothing and no task starts
    (``settings.WORKFORCE_SWEEP_IDLE_SECONDS``, at least ``sweep_interval()``)."""
    return max(sweep_interval(), float(settings.WORKFORCE_SWEEP_IDLE_SECONDS))


def start_sweeper(interval: float | None = None) -> bool:
    """Start this process's sweeper: a thread that runs every sweep once now (a spawning
    worker recovers what a dead one held at once), then waits to become this machine's
    one sweeper of this database (``_machine_lock``: the other workers' threads wait
    in the kernel, costing nothing, and take over the moment its holder dies), then
    runs the sweeps without a cadence of their own every ``interval`` seconds (default
    ``sweep_interval()``) while there is work, backing off to
    ``idle_sweep_interval()`` while passes find nothing and no task starts in this
    worker (``on_task_start`` brings the cadence back), and starts one thread per timer sweep
    (``every``), so a slow sweep never delays a deadline. Returns True when this call
    started it."""
    with _lock:
        if _started.is_set():
            return False
        _started.set()
    every = interval or sweep_interval()
    threading.Thread(target=_sweeper, args=(every,), name="sweeper", daemon=True).start()
    return True


RETRY_SECONDS = 1.0  # between passes while a sweep fails (the database is down)


def _machine_lock():
    """Block until this process holds this machine's sweeper lock of this database (an
    ``flock`` on a file in ``settings.VAR_DIR``, released by the kernel when the process
    ends). Returns the open file (kept for the process's life), or None when the file
    cannot be opened: every worker then sweeps, which is safe, only dearer."""
    import fcntl
    import hashlib

    db = settings.DATABASES["default"]
    key = "|".join(str(db.get(k) or "") for k in ("NAME", "HOST", "PORT")) + "|" + str(settings.Q_CLUSTER.get("name"))
    path = Path(settings.VAR_DIR) / f"sweeper-{hashlib.sha1(key.encode()).hexdigest()[:12]}.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+")  # noqa: SIM115  (held for the process's life)
    except OSError:
        logger.warning("cannot open the sweeper lock %s: every worker sweeps", path)
        return None
    fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


_held: list[Any] = []  # the machine lock's open file, once taken


def _sweeper(interval: float) -> None:
    plain, timers = _plain_sweeps(), dict(_every)
    run_sweeps([*plain, *timers])  # at spawn, as the docs promise: what a dead worker held, now
    handle = _machine_lock()
    if handle is not None:
        _held.append(handle)
    for name, every in timers.items():
        threading.Thread(target=_timer, args=(name, every), name=f"sweeper-{name}", daemon=True).start()
    _loop(plain, interval, first_wait=True)


_activity = threading.Event()  # this worker started a task that is not a periodic one
_periodic: set[str] = set()  # tasks run on a clock (a django-q2 Schedule): not activity


def note_periodic_task(func: str) -> None:
    """A task the cluster runs on a clock of its own (``coordinators.tasks.sweep``, every
    minute): running it does not bring the sweeper back to its busy cadence."""
    _periodic.add(func)


def on_task_start(sender=None, func=None, task=None, **kwargs) -> None:
    """django-q2 ``pre_execute`` receiver (in a worker): a task starts, so work is in
    flight: this process's sweeper, if it is its machine's, returns to its busy cadence
    (``WORKFORCE_SWEEP_SECONDS``)."""
    name = (task or {}).get("func")
    if not isinstance(name, str) or name not in _periodic:
        _activity.set()


def _loop(names: list[str], interval: float, *, first_wait: bool = False, stop: threading.Event | None = None) -> None:
    """The plain sweeps every ``interval`` seconds while they find work or tasks run,
    doubling the wait up to ``idle_sweep_interval()`` while not; until ``stop`` is set
    (a test's; the cluster's thread runs for the process's life)."""
    backoff = Backoff(interval, idle_sweep_interval())
    while stop is None or not stop.is_set():
        started = time.monotonic()
        if first_wait:
            done: dict[str, Any] = dict.fromkeys(names)
            first_wait = False
        else:
            done = run_sweeps(names)
        if len(done) < len(names):
            # A pass that failed (a database outage) is tried again within a second, so the
            # work an outage interrupted resumes within seconds of the database coming back.
            time.sleep(min(interval, RETRY_SECONDS))
            continue
        if any(done.values()):
            backoff.reset()
        if _activity.wait(backoff.next()):
            # A task started here: work is in flight again. Back to the busy cadence; the
            # next pass comes ``interval`` after the last one, as it did before the wait.
            _activity.clear()
            backoff.reset()
            time.sleep(max(0.0, started + interval - time.monotonic()))


def _timer(name: str, every: float, *, stop: threading.Event | None = None) -> None:
    """One timer sweep: every ``every`` seconds, or, with a ``due``, at its next piece of
    work (at most ``idle_sweep_interval()``), woken by its ``wake_on`` channel; until
    ``stop`` is set (a test's)."""
    due, channel = _due.get(name), _wake_on.get(name)
    waiter = Waiter((channel,)) if channel else None
    most = idle_sweep_interval()
    while stop is None or not stop.is_set():
        done = run_sweeps([name])
        if name not in done or due is None:
            time.sleep(every if name in done else min(every, RETRY_SECONDS))
            continue
        try:
            left = due()
        except Exception:  # as a failed pass: look again soon
            logger.warning("sweeper: %s: when next failed", name, exc_info=True)
            left = every
        wait = most if left is None else (min(most, left) if left > 0 else every)
        if waiter is not None:
            waiter.wait(wait)
        else:
            time.sleep(wait)
    if waiter is not None:
        waiter.close()


def on_worker_spawn(sender=None, proc_name: str = "", **kwargs) -> None:
    """django-q2 ``post_spawn`` receiver: boot this worker process
    (``workforce.runtime.boot_for_task``) and start its sweeper.

    Does nothing in ``sync`` mode, where django-q2 runs each task's "worker" inside the
    caller's process (tests): that process is configured by whoever runs it. A boot that
    fails (a bad tree) is logged and the sweeper still starts."""
    if boot_for_task(proc_name):
        start_sweeper()
