"""``manage.py serve_qcluster``: the django-q2 cluster as ``serve`` runs it (a child
process): holding its database's cluster lock, and ending when its serve ends
(``workforce_project.cluster_guard``). Not meant to be run by hand: ``serve`` passes it
its pid and the read end of a pipe."""

from __future__ import annotations

import multiprocessing
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

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

        # Several machines' clusters share the database by design (docs/nodes.md): the
        # Redis broker hands each task to one of them.
        lock = None if settings.WORKFORCE_MULTI_NODE else ClusterLock()
        if lock is not None:
            lock.acquire(describe_self(serve_pid), on_wait=waiting)
            lock.keep(describe_self(serve_pid))  # a database restart ends the session that held it
        call_command("qcluster", skip_checks=True)
        # qcluster returns once its sentinel runs; this frame keeps the lock (its
        # connection, its file) referenced until the cluster has stopped.
        while multiprocessing.active_children():
            time.sleep(0.5)
        if lock is not None:
            lock.release()
