"""``manage.py serve [--addr HOST:PORT] [--root PATH]``: the main job (README "Run it").

Migrates, checks and opens the workforce tree, then runs the web server (uvicorn, in
this process) and the django-q2 cluster (a child process) together until interrupted.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from mailboxes.roster import TreeError
from mailboxes.services import OpenRefused
from seats.drains import board_warnings
from seats.services import HireRefused, WorkerTreeError
from workforce.tree import WorkforceRootError
from workforce_project.boot import boot, open_roster


def parse_addr(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:8000"`` -> ``("127.0.0.1", 8000)``; ``"8000"`` binds 127.0.0.1."""
    host, _, port = addr.rpartition(":")
    try:
        return (host.strip("[]") or "127.0.0.1", int(port))
    except ValueError:
        raise CommandError(f"--addr must be HOST:PORT, not {addr!r}") from None


class Command(BaseCommand):
    help = "Migrate, open the workforce tree, and run the web server and the task cluster."
    requires_system_checks: list = []  # checked below, after --root is applied

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="Where to listen (HOST:PORT).")
        parser.add_argument("--root", default=None, help="The workforce tree (default: WORKFORCE_ROOT).")
        parser.add_argument("--no-cluster", action="store_true", help="Run the web server only.")

    def handle(self, *args, addr="127.0.0.1:8000", root=None, no_cluster=False, **options):
        import uvicorn

        host, port = parse_addr(addr)
        if root:
            settings.WORKFORCE_ROOT = str(Path(root).resolve())
            os.environ["WORKFORCE_ROOT"] = settings.WORKFORCE_ROOT  # the cluster reads the same tree
        if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
            Path(settings.DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        call_command("check")  # stops here, naming every problem, on a bad tree or queue config
        call_command("migrate", interactive=False, verbosity=0)
        try:
            outcomes = open_roster(boot(settings.WORKFORCE_ROOT))
        except (TreeError, WorkforceRootError, OpenRefused, WorkerTreeError, HireRefused) as exc:
            raise CommandError(str(exc)) from None
        for outcome in outcomes:
            self.stdout.write(f"{outcome.mailbox_id}: {outcome.outcome}")
        for warning in board_warnings():  # a board nobody drains, a drain of a board nobody holds
            self.stdout.write(f"warning: {warning.message}")
        cluster = None
        if not no_cluster:
            manage = Path(settings.BASE_DIR) / "manage.py"
            cluster = subprocess.Popen(
                [sys.executable, str(manage), "qcluster"],
                env=os.environ.copy(),
                # Its own process group: Ctrl-C reaches serve only, which stops the
                # cluster by signalling its main process (signalling its whole group
                # can deadlock django-q2 on shutdown).
                start_new_session=True,
            )
            self.stdout.write(f"task cluster started (pid {cluster.pid})")
        self.stdout.write(f"serving {settings.WORKFORCE_ROOT} on http://{host}:{port}/api/")
        self.stdout.flush()
        # uvicorn re-raises the signal that stopped it once it has shut down; with the
        # default SIGTERM action that would kill this process before the cluster is
        # stopped, so SIGTERM exits through ``finally`` like Ctrl-C does.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        try:
            uvicorn.run("workforce_project.asgi:application", host=host, port=port, log_level="info", lifespan="off")
        finally:
            if cluster is not None:
                _stop_cluster(cluster)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _stop_cluster(cluster: subprocess.Popen) -> None:
    """SIGTERM the cluster's main process only (signalling its group can deadlock its
    shutdown), wait, and kill it if it will not stop."""
    if cluster.poll() is not None:
        return
    cluster.send_signal(signal.SIGTERM)
    try:
        cluster.wait(timeout=30)
    except subprocess.TimeoutExpired:
        # Last resort, after a clean stop had its chance: the whole group, workers too.
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()
