"""``manage.py work [--root PATH]``: a worker node, the task cluster without a web server
(docs/nodes.md; docs/running.md "Commands").

It starts as ``serve`` does (the checks, the database and the broker said and checked, a
multi-node setup that cannot work refused, migrations applied, the tree read and its
mailboxes opened, unread vaults indexed), then runs the task cluster as ``serve`` runs its
own (``serve_qcluster``, a child that ends with it however it ends, started again if it
ends on its own) until SIGTERM or Ctrl-C, and stops within ``WORKFORCE_STOP_SECONDS``
(work cut short is left to its leases).

On one machine (``WORKFORCE_MULTI_NODE`` off) its cluster holds the database's cluster lock
as ``serve``'s does: beside a running cluster it waits, then refuses. With
``WORKFORCE_MULTI_NODE=true`` any number of worker nodes run at once; the Redis broker
hands each task to one of them.
"""

from __future__ import annotations

import signal
import threading

from django.conf import settings
from django.core.management.base import CommandError

from workforce_project.cluster_guard import wait_for_no_cluster
from workforce_project.database_errors import explain_database_error
from workforce_project.deployment import describe_database
from workforce_project.management.commands import serve


class Command(serve.Command):
    help = "Run a worker node: serve's start-up, then the task cluster alone, until stopped."
    command_name = "work"

    def add_arguments(self, parser):
        parser.add_argument("--root", default=None, help="The workforce tree (default: WORKFORCE_ROOT).")

    def handle(self, *args, root=None, **options):
        self._check_setup(root)
        if not settings.WORKFORCE_MULTI_NODE:
            self._no_other_cluster_on_this_machine()
        self._start_up()
        self._alive: list[int] = []  # the write ends of the pipes the clusters watch
        stopper = serve._Stopper(None, float(settings.WORKFORCE_STOP_SECONDS))
        stop = threading.Event()
        code = {"exit": 0}

        def on_signal(signum, frame):
            code["exit"] = 128 + signum
            stopper.begin()  # the cluster's main process gets SIGTERM now
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        cluster = stopper.adopt(self._start_cluster)
        if cluster is not None:
            role = "worker node (one of several machines)" if settings.WORKFORCE_MULTI_NODE else "worker"
            workers = settings.Q_CLUSTER["workers"]
            self._say(f"{role}: task cluster started (pid {cluster.pid}, {workers} worker{'' if workers == 1 else 's'})")
            threading.Thread(target=stopper.keep, args=(self._start_cluster,), name="cluster-keeper", daemon=True).start()
        while not stop.wait(1.0):
            pass
        stopper.finish()
        serve._exit_now(code["exit"])

    def _no_other_cluster_on_this_machine(self) -> None:
        """``serve``'s wait for a cluster already running on this database, refused with
        the fix for a team that meant several worker nodes.

        Raises:
            CommandError: a cluster still runs on the database, naming it.
        """
        try:
            holder = wait_for_no_cluster(float(settings.WORKFORCE_STOP_SECONDS) + 5, say=self._say)
        except Exception as exc:  # noqa: BLE001  (the database did not answer: say so in one line)
            raise CommandError(
                explain_database_error(exc, command=self.command_name)
                or f"cannot reach the database ({describe_database()}): {exc}"
            ) from None
        if holder is not None:
            raise CommandError(
                f"a task cluster is already running on this database ({describe_database()}): {holder}. "
                "Stop it first; or, for worker nodes on several machines, set WORKFORCE_MULTI_NODE=true with "
                "PostgreSQL and WORKFORCE_BROKER_URL=redis://… on every node (docs/nodes.md)."
            )
