"""``manage.py serve_qcluster``: the django-q2 cluster as ``serve`` runs it (a child
process): holding its database's cluster lock, and ending when its serve ends
(``workforce_project.cluster_guard``). Not meant to be run by hand: ``serve`` passes it
its pid and the read end of a pipe."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from multiprocessing import Event

from django.conf import settings
from django.core.management.base import BaseCommand
from django_q.cluster import Cluster, Sentinel, get_mp_context

from workforce_project.cluster_guard import ClusterLock, describe_self, guard_cluster


class Command(BaseCommand):
    help = "Run the task cluster for serve: one per database, ending when its serve ends."

    def add_arguments(self, parser):
        parser.add_argument("--serve-pid", type=int, default=None, help="The pid of the serve that started it.")
        parser.add_argument("--parent-fd", type=int, default=None, help="The read end of serve's pipe.")

    def handle(self, *args, serve_pid=None, parent_fd=None, **options):
        guard_cluster(serve_pid=serve_pid, parent_fd=parent_fd, stop_seconds=float(settings.WORKFORCE_STOP_SECONDS))

        def waiting(holder: str) -> None:
            self.stderr.write(f"waiting for the task cluster already running on this database to stop: {holder}")

        lock = ClusterLock()
        lock.acquire(describe_self(serve_pid), on_wait=waiting)
        lock.keep(describe_self(serve_pid))  # a database restart ends the session that held it
        assert settings.SECRET_KEY  # as django-q2's qcluster command, read before the fork
        ServeCluster().start()
        # start() returns once its sentinel runs; this frame keeps the lock (its
        # connection, its file) referenced until the cluster has stopped, waiting on the
        # sentinel's exit rather than looking on a clock.
        while children := multiprocessing.active_children():
            for child in children:
                child.join()
        lock.release()


class ServeSentinel(Sentinel):
    """django-q2's sentinel, which also wakes its pusher as it stops: an idle pusher
    waits up to ``WORKFORCE_BROKER_IDLE_SECONDS`` for work (``workforce.broker``), and
    looks at its stop event only after that wait."""

    def stop(self):
        self.event_out.set()
        wake = getattr(self.broker, "wake_pusher", None)
        if wake is not None:
            wake()
        super().stop()


class ServeCluster(Cluster):
    """django-q2's ``Cluster`` (what ``manage.py qcluster`` runs), with ``ServeSentinel``."""

    def start(self) -> int:
        self.stop_event = Event()
        self.start_event = Event()
        self.sentinel = get_mp_context().Process(
            target=ServeSentinel,
            name=f"Process-{uuid.uuid4().hex}",
            args=(self.stop_event, self.start_event, self.cluster_id, self.broker, self.timeout),
        )
        self.sentinel.start()
        # As Cluster.start: poll (a wait() could deadlock with a signal), until it runs.
        while self.start_event and not self.start_event.is_set():
            if not self.sentinel.is_alive():
                if self.sentinel.exitcode == 0:
                    break
                raise RuntimeError(f"the task cluster failed to start: its sentinel exited with code {self.sentinel.exitcode}")
            time.sleep(0.1)
        return self.pid
