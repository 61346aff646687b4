"""Same-process dispatch: ``serve``'s web process runs a committed task itself, right
after the commit, instead of handing it to the cluster (docs/architecture.md, "Where a
turn runs").

On one machine the hop from the web process to a cluster worker is most of a short
turn's wait: the task row written and pushed, the worker's claim, its start. A task
whose work is a durable row with its own claim and sweeper (a delivery, a route, a
delegated post: each app names its tasks with ``allow``) may skip that hop: when the
runner is on and has a free thread at the commit, the task runs on that thread in this
process; otherwise it goes to the cluster as before. The row stays the durable record
either way: the task's own claim keeps it from running twice, and what this process does
not finish (it died, it stopped) its app's sweeper hands to the cluster, as it does for a
task the broker lost.

The runner is on only in ``serve`` with its cluster on one machine
(``WORKFORCE_INLINE_TURNS`` threads, 0 = off); never in tests' synchronous mode, on a web
node of several (``serve --no-cluster``), nor in the cluster's own processes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections, connections
from django.utils.module_loading import import_string

from .runtime import Slot

logger = logging.getLogger(__name__)

_allowed: set[str] = set()


def allow(func_path: str) -> None:
    """Let task ``func_path`` run in the web process (called from an app's ``ready``).

    Only for a task whose first argument is a row's pk and whose work that row records:
    it claims the row with a conditional UPDATE (so a second run does nothing) and the
    app's sweeper enqueues it again when it is left pending or its claim lapses."""
    _allowed.add(func_path)


def allowed(func_path: str) -> bool:
    """Whether ``func_path`` was named with ``allow``."""
    return func_path in _allowed


class Runner:
    """At most ``threads`` tasks of this process at once, on threads of its own;
    ``after_task()`` runs on the thread after each (it must not raise); while ``busy()``
    says True the process has other work for its CPU and takes none.

    ``offer`` runs a task when a thread is free and says whether it took it; ``stop``
    takes no more and waits for those running. Thread-safe."""

    def __init__(
        self,
        threads: int,
        *,
        after_task: Callable[[], None] | None = None,
        busy: Callable[[], bool] | None = None,
    ):
        self.threads = threads
        self._after_task = after_task
        self._busy = busy
        self._lock = threading.Lock()
        self._running = 0
        self._idle = threading.Condition(self._lock)
        self._stopping = False
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="inline-turn")
        self.ran = 0  # tasks run here, for the log and the tests

    def offer(self, func_path: str, args: tuple[Any, ...]) -> bool:
        """Run ``func_path(*args)`` on a free thread of this runner. False, doing
        nothing, when every thread is busy, the process is (``busy``) or the runner is
        stopping."""
        if self._busy is not None and self._busy():
            return False
        with self._lock:
            if self._stopping or self._running >= self.threads:
                return False
            self._running += 1
        try:
            self._pool.submit(self._run, func_path, args)
        except RuntimeError:  # the pool shut down between the check and the submit
            self._done(ran=False)
            return False
        return True

    def _run(self, func_path: str, args: tuple[Any, ...]) -> None:
        close_old_connections()
        try:
            import_string(func_path)(*args)
        except Exception:  # a task's own failures are recorded by it; this is a bug
            logger.exception("%s%s failed in the web process; its sweeper hands it to the cluster", func_path, list(args))
        finally:
            try:
                if self._after_task is not None:
                    self._after_task()
            finally:
                # Back to the web pool (PostgreSQL) or closed: a turn's thread keeps none.
                connections.close_all()
                self._done(ran=True)

    def _done(self, *, ran: bool) -> None:
        with self._lock:
            self._running -= 1
            self.ran += ran
            self._idle.notify_all()

    def running(self) -> int:
        """Tasks running now."""
        with self._lock:
            return self._running

    def stop(self, *, deadline: float | None = None) -> bool:
        """Take no more tasks and wait for those running, until ``deadline``
        (``time.monotonic()``; None: no wait). True when none is left running; a task
        cut short is its row's: its claim lapses and its sweeper hands it on."""
        with self._lock:
            self._stopping = True
            while self._running and deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._idle.wait(left)
            idle = not self._running
        self._pool.shutdown(wait=False)
        return idle


# This process's runner (its runtime's slot: workforce.runtime): None, every task to the cluster.
_RUNNER: Slot[Runner | None] = Slot("workforce.inline.runner", empty=lambda: None)


def start(threads: int, *, after_task: Callable[[], None] | None = None, busy: Callable[[], bool] | None = None) -> Runner | None:
    """Turn this process's runner on with ``threads`` threads (``serve``; ``after_task``
    and ``busy`` as ``Runner``'s); None when ``threads`` is 0."""
    runner = Runner(threads, after_task=after_task, busy=busy) if threads > 0 else None
    _RUNNER.set(runner)
    return runner


def runner() -> Runner | None:
    """This process's runner, or None when tasks all go to the cluster."""
    return _RUNNER.get()


def stop(*, deadline: float | None = None) -> bool:
    """Stop this process's runner (``Runner.stop``); True when there is none."""
    current = _RUNNER.get()
    return True if current is None else current.stop(deadline=deadline)


def offer_after_commit(func_path: str, args: tuple[Any, ...], send: Callable[[], None]) -> bool:
    """For ``workforce.dispatch.enqueue``: when this process runs ``func_path`` itself,
    arrange, at the commit, to run it here or else call ``send()`` (the cluster's
    enqueue), and say True; False when the caller must enqueue it as usual."""
    current = _RUNNER.get()
    if current is None or func_path not in _allowed:
        return False
    from django.db import transaction

    def at_commit() -> None:
        if not current.offer(func_path, args):
            send()

    transaction.on_commit(at_commit)
    return True
