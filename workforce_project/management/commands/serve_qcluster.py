"""``manage.py serve_qcluster``: the django-q2 cluster as ``serve`` runs it (a child
process): holding its database's cluster lock, and ending when its serve ends
(``workforce_project.cluster_guard``). Not meant to be run by hand: ``serve`` passes it
its pid and the read end of a pipe.

It is django-q2's cluster in fewer processes (docs/running.md "Memory"): this process is
the cluster's sentinel itself (``manage.py qcluster`` forks a sentinel from a main process
that then only waits), and the sentinel runs django-q2's pusher and monitor as threads of
its own (they wait on the broker and on the workers' results, which costs no CPU), so the
cluster is this process and its workers. With one worker (``WORKFORCE_Q_WORKERS=1``, the
default) that worker is a thread of this process too, and the cluster is one process:
each Python process with Django and the apps loaded is about 60 MiB of RSS. A task that
runs past the cluster's timeout cannot be stopped in a thread, so the cluster ends
(``TIMEOUT_EXIT``), as django-q2 ends a worker process: serve starts another, and the
work's leases run it again.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from multiprocessing import Value
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.cluster import Sentinel
from django_q.monitor import monitor
from django_q.pusher import pusher
from django_q.status import Stat
from django_q.worker import worker

from workforce_project.cluster_guard import ClusterLock, describe_self, guard_cluster

logger = logging.getLogger(__name__)

# The exit status of a cluster whose in-process worker ran past the timeout.
TIMEOUT_EXIT = 3


class Command(BaseCommand):
    help = "Run the task cluster for serve: one per database, ending when its serve ends."

    def add_arguments(self, parser):
        parser.add_argument("--serve-pid", type=int, default=None, help="The pid of the serve that started it.")
        parser.add_argument(
            "--serve-command",
            choices=("serve", "work"),
            default="serve",
            help="The command that started it (serve, or work for a worker node).",
        )
        parser.add_argument("--parent-fd", type=int, default=None, help="The read end of serve's pipe.")

    def handle(self, *args, serve_pid=None, serve_command="serve", parent_fd=None, **options):
        guard_cluster(serve_pid=serve_pid, parent_fd=parent_fd, stop_seconds=float(settings.WORKFORCE_STOP_SECONDS))

        def waiting(holder: str) -> None:
            self.stderr.write(f"waiting for the task cluster already running on this database to stop: {holder}")

        # Several machines' clusters share the database by design (docs/nodes.md): the
        # Redis broker hands each task to one of them.
        lock = None if settings.WORKFORCE_MULTI_NODE else ClusterLock()
        if lock is not None:
            lock.acquire(describe_self(serve_pid, serve_command), on_wait=waiting)
            lock.keep(describe_self(serve_pid, serve_command))  # a database restart ends the session that held it
        assert settings.SECRET_KEY  # as django-q2's qcluster command: read once, before the forks
        run_sentinel()
        if lock is not None:
            lock.release()


class _Thread(threading.Thread):
    """A thread that stands where django-q2's sentinel keeps a process (``pid``,
    ``is_alive``), for its status and its guard; a worker's also has django-q2's ``timer``."""

    timer: Any = None

    @property
    def pid(self) -> int:
        return os.getpid()


class ServeSentinel(Sentinel):
    """django-q2's sentinel with its pusher and monitor as threads (``spawn_pusher``,
    ``spawn_monitor``; its workers stay processes), which also wakes its pusher as it
    stops: an idle pusher waits up to ``WORKFORCE_BROKER_IDLE_SECONDS`` for work
    (``workforce.broker``) and looks at its stop event only after that wait."""

    def start(self):
        # django-q2's cluster pings its broker from a forked sentinel, where the ORM broker
        # also hands back what a cluster before it had taken (workforce.broker); this
        # sentinel is the main process, so it asks for that itself.
        hand_back = getattr(self.broker, "hand_back_taken", None)
        if hand_back is not None:
            try:
                hand_back()
            except Exception:  # the database is down: the broker's retry hands them out later
                logger.warning("could not hand back the tasks a cluster before this one had taken", exc_info=True)
        super().start()

    def _thread(self, target, *args) -> _Thread:
        thread = _Thread(target=target, args=args, name=f"{target.__name__}-{uuid.uuid4().hex[:8]}", daemon=True)
        thread.start()
        return thread

    def spawn_pusher(self):
        return self._thread(pusher, self.task_queue, self.event_out, self.broker)

    def spawn_monitor(self):
        return self._thread(monitor, self.result_queue, self.broker)

    def spawn_worker(self):
        """django-q2's worker, as a thread of this process when it is the cluster's only
        one (see the module docstring); otherwise a process forked from this one."""
        if self.pool_size != 1:
            super().spawn_worker()
            return
        timer = Value("f", -1)  # as django-q2's: -1 idle, the seconds left while busy
        thread = _Thread(
            target=worker,
            args=(self.task_queue, self.result_queue, timer, self.timeout),
            name=f"Worker-{uuid.uuid4().hex[:8]}",
            daemon=True,
        )
        thread.timer = timer  # read by django-q2's guard
        self.pool.append(thread)
        thread.start()

    def reincarnate(self, process):
        """django-q2's, and for the in-process worker: a new thread when it stopped (a
        recycle), the cluster's end when its task ran past the timeout."""
        if not (isinstance(process, _Thread) and process in self.pool):
            super().reincarnate(process)
            return
        if process.timer.value == 0:
            logger.critical(
                "a task ran past the cluster's timeout (%s s) in its worker thread: ending the cluster, serve starts another",
                self.timeout,
            )
            for handler in logging.getLogger().handlers:
                handler.flush()
            os._exit(TIMEOUT_EXIT)
        self.pool.remove(process)
        self.spawn_worker()
        self.reincarnations += 1

    def stop_workers(self, *, save: Callable[[], None] = lambda: None, pause: float = 0.1) -> None:
        """Tell every worker to stop once the tasks queued before it are done, wait until
        none is alive (calling ``save`` every ``pause`` seconds), then close the task
        queue. django-q2 closes the queue first, which its worker processes do not mind
        (they read their own end of it); a worker thread reads this process's end, and
        closing it under a thread blocked on it raised ``OSError: Bad file descriptor``
        in that thread at every few stops."""
        for _ in range(len(self.pool)):
            self.task_queue.put("STOP")
        while self.pool:
            for process in list(self.pool):
                if not process.is_alive():
                    self.pool.remove(process)
            if self.pool:
                time.sleep(pause)
            save()
        self.task_queue.close()
        self.task_queue.join_thread()

    def stop(self):
        """django-q2's stop (pusher, then the workers once their queue is drained, then
        the monitor once it saved every result), for threads: the monitor is joined
        before the result queue is closed, since it reads that queue in this process."""
        Stat(self).save()
        self.event_out.set()
        wake = getattr(self.broker, "wake_pusher", None)
        if wake is not None:
            wake()
        while self.pusher.is_alive():
            self.pusher.join(0.1)
            Stat(self).save()
        self.stop_workers(save=lambda: Stat(self).save())
        self.result_queue.put("STOP")
        self.monitor.join()
        self.result_queue.close()
        self.result_queue.join_thread()
        Stat(self).save()


def run_sentinel() -> None:
    """Run the cluster in this process until SIGTERM or SIGINT (django-q2's graceful
    stop: the running tasks finish), then return."""
    stop, started = threading.Event(), threading.Event()
    sentinel = ServeSentinel(stop, started, uuid.uuid4(), start=False)

    def on_signal(signum, frame):
        # Set from another thread: the guard's wait on it is this (the main) thread's.
        threading.Thread(target=stop.set, name="cluster-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    sentinel.start()
