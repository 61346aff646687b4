"""``manage.py serve [--addr HOST:PORT] [--root PATH]``: the main job (docs/running.md "The first start", "Commands").

Migrates, checks and opens the workforce tree, then runs the web server (uvicorn, in
this process) and the django-q2 cluster (a child process) together until interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from mail.repair import index_unswept_vaults_once
from mailboxes.checks import BOARD_CHECK_IDS
from mailboxes.roster import TreeError
from mailboxes.services import OpenRefused
from seats.drains import board_warnings
from seats.hiring import HireRefused, WorkerTreeError
from workforce import inline
from workforce.holders import do_enqueue_outage_retries
from workforce.streams import stop_streams
from workforce.tree import WorkforceRootError
from workforce_project.boot import boot, open_roster
from workforce_project.cluster_guard import wait_for_no_cluster
from workforce_project.database_errors import explain_database_error, unapplied_migrations
from workforce_project.deployment import (
    BrokerUnreachable,
    describe_broker,
    describe_database,
    describe_statements,
    enable_web_pool,
    is_loopback,
    ping_broker,
)
from workforce_project.migrating import migrate
from workforce_project.nodes import multi_node_problems, multi_node_warnings, startup_lock
from workforce_project.priority import lower_own_priority

logger = logging.getLogger(__name__)


def parse_addr(addr: str) -> tuple[str, int]:
    """``"127.0.0.1:8000"`` -> ``("127.0.0.1", 8000)``; ``"8000"`` or ``":8000"`` binds 127.0.0.1;
    ``"[::1]:8000"`` -> ``("::1", 8000)``. Port 0 asks the system for a free one.

    Raises:
        CommandError: not HOST:PORT (a URL included), or a port outside 0-65535 (the socket layer would
            wrap 70000 round to 4464 rather than refuse it).
    """
    host, _, port = addr.rpartition(":")
    try:
        number = int(port)
        if "/" in host:  # a URL ("http://127.0.0.1:8000"), not an address
            raise ValueError(host)
    except ValueError:
        raise CommandError(f"--addr must be HOST:PORT, not {addr!r}") from None
    if not 0 <= number <= 65535:
        raise CommandError(f"--addr's port must be 0-65535 (0: any free port), not {number}")
    return host.strip("[]") or "127.0.0.1", number


def host_port(host: str, port: int) -> str:
    """``host:port`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Command(BaseCommand):
    help = "Migrate, open the workforce tree, and run the web server and the task cluster."
    requires_system_checks: list = []  # checked below, after --root is applied
    # The command's name, in what it says of itself and of its cluster (``work`` sets its own).
    command_name = "serve"

    def add_arguments(self, parser):
        parser.add_argument("--addr", default="127.0.0.1:8000", help="Where to listen (HOST:PORT).")
        parser.add_argument("--root", default=None, help="The workforce tree (default: WORKFORCE_ROOT).")
        parser.add_argument("--no-cluster", action="store_true", help="Run the web server only.")
        parser.add_argument(
            "--insecure",
            action="store_true",
            help="Allow a non-loopback --addr with WORKFORCE_AUTH=none (anyone who reaches it acts as anyone).",
        )

    def handle(self, *args, addr="127.0.0.1:8000", root=None, no_cluster=False, insecure=False, **options):
        host, port = parse_addr(addr)
        if settings.WORKFORCE_AUTH == "none" and not is_loopback(host) and not insecure:
            raise CommandError(
                f"refusing to serve {host_port(host, port)} with WORKFORCE_AUTH=none: anyone who can reach it reads and "
                "posts as anyone by naming a userId. Set WORKFORCE_AUTH=token, or pass --insecure to serve it "
                "without access control anyway."
            )
        self._check_setup(root)
        # The port is bound before the tree is opened, the cluster started or "serving"
        # printed: an address in use stops serve here, having written nothing. It listens
        # only once the server is about to run, so a client that connects meanwhile is
        # refused rather than left waiting on a start that may still fail.
        listeners = _bind(host, port)
        try:
            # Several nodes' clusters share one database by design (docs/nodes.md).
            if not no_cluster and not settings.WORKFORCE_MULTI_NODE:
                self._no_other_cluster()
            self._serve(listeners, host, no_cluster)
        finally:
            for sock in listeners:  # uvicorn closed them if it ran; a refusal above did not
                sock.close()

    def _check_setup(self, root: str | None) -> None:
        """What every node checks first (``serve`` and ``work``): apply ``--root``, run the
        system checks, say the database and the broker, refuse a multi-node setup that
        cannot work (``workforce_project.nodes``), and ping the Redis broker.

        Raises:
            CommandError: a check failed, the setup is refused, or the broker does not answer.
        """
        if root:
            settings.WORKFORCE_ROOT = str(Path(root).resolve())
            os.environ["WORKFORCE_ROOT"] = settings.WORKFORCE_ROOT  # the cluster reads the same tree
        if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
            Path(settings.DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
        # Stops here, naming every problem, on a bad tree or queue config. The board
        # warnings are printed once below, from the hired seats, so the check leaves them out.
        settings.SILENCED_SYSTEM_CHECKS = [*settings.SILENCED_SYSTEM_CHECKS, *BOARD_CHECK_IDS.values()]
        call_command("check")
        self.stdout.write(f"database: {describe_database()}")
        statements = describe_statements()
        if statements is not None:
            self.stdout.write(f"database statements: {statements}")
        self.stdout.write(f"broker: {describe_broker()}")
        refuse_multi_node_problems(self.stdout)
        try:
            ping_broker()
        except BrokerUnreachable as exc:
            reason = str(exc).rstrip(".")  # redis's own messages end with one
            fix = "" if settings.WORKFORCE_MULTI_NODE else ", or unset WORKFORCE_BROKER_URL to use the ORM broker"
            raise CommandError(f"{reason}. Start it{fix}.") from None

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _migrate(self) -> None:
        """Apply the migrations the database lacks, saying so first; an empty database
        the fast way (``workforce_project.migrating``)."""
        unapplied, total = unapplied_migrations()
        if not unapplied:
            return
        self._say(f"migrating the database ({unapplied} of {total} migrations to apply)")
        started = time.monotonic()
        fast = migrate()
        how = ": a new database, its tables made from the models" if fast else ""
        self._say(f"migrated in {time.monotonic() - started:.1f}s{how}")

    def _no_other_cluster(self) -> None:
        """Wait a while for a task cluster already running on this database to stop (that
        of a serve killed a moment ago stops within WORKFORCE_STOP_SECONDS), then refuse:
        two clusters on one database run each task's work twice over
        (``workforce_project.cluster_guard``).

        Raises:
            CommandError: still running then, naming it.
        """
        seconds = float(settings.WORKFORCE_STOP_SECONDS) + 5

        def say(line: str) -> None:
            self.stdout.write(line)
            self.stdout.flush()

        try:
            holder = wait_for_no_cluster(seconds, say=say)
        except Exception as exc:  # noqa: BLE001  (the database did not answer: say so in one line)
            explained = explain_database_error(exc, command=self.command_name)
            raise CommandError(explained or f"cannot reach the database ({describe_database()}): {exc}") from None
        if holder is not None:
            raise CommandError(
                f"a task cluster is already running on this database ({describe_database()}): {holder}. "
                "Stop it (or the serve that runs it) first, or pass --no-cluster to run only a web server beside it."
            )

    def _start_cluster(self) -> subprocess.Popen:
        """Start serve's task cluster (``manage.py serve_qcluster``), a child in a process
        group of its own that ends when serve does. Called again by ``_Stopper.keep``
        when the cluster ended on its own."""
        manage = Path(settings.BASE_DIR) / "manage.py"
        # The cluster watches the read end; only this process holds the write end
        # (os.pipe's are not inherited), so it sees EOF when serve ends, however.
        watch, alive = os.pipe()
        self._alive.append(alive)
        cluster = subprocess.Popen(
            # serve ran the checks already: the cluster would print their warnings again.
            [
                sys.executable,
                str(manage),
                "serve_qcluster",
                "--skip-checks",
                "--serve-pid",
                str(os.getpid()),
                "--serve-command",
                self.command_name,
                "--parent-fd",
                str(watch),
            ],
            env=os.environ.copy(),
            pass_fds=(watch,),
            # Its own process group: Ctrl-C reaches serve only, which stops the
            # cluster by signalling its main process (signalling its whole group
            # can deadlock django-q2 on shutdown).
            start_new_session=True,
        )
        os.close(watch)
        return cluster

    def _start_up(self) -> None:
        """What every node does before it works (``serve`` and ``work``): migrate, read the
        tree and hire its workers, open its mailboxes, saying each; then index mail in vaults
        this database never read. Nodes starting at once do the first three one at a time
        (``workforce_project.nodes.startup_lock``; docs/nodes.md).

        Raises:
            CommandError: the tree has errors, or a mailbox or a hire is refused.
        """
        # Nodes starting at once migrate and open the tree one at a time (docs/nodes.md).
        with startup_lock(on_wait=lambda: self._say("another node is starting on this database: waiting for it")):
            self._migrate()
            self._say(f"reading the workforce tree {settings.WORKFORCE_ROOT} and hiring its workers")
            try:
                roster = boot(settings.WORKFORCE_ROOT, log_board_warnings=False)
                self._say(f"opening {len(roster.mailboxes)} mailbox(es)")
                outcomes = open_roster(roster)
            except (TreeError, WorkforceRootError, OpenRefused, WorkerTreeError, HireRefused) as exc:
                raise CommandError(str(exc)) from None
        for outcome in outcomes:
            self.stdout.write(f"{outcome.mailbox_id}: {outcome.outcome}")
            if outcome.drift_warning:  # its file changed after it was opened
                self.stdout.write(f"warning: {outcome.drift_warning}")
        for warning in board_warnings():  # a board nobody drains, a drain of a board nobody holds
            self.stdout.write(f"warning: {warning.message}")
        # Mail in vaults this database never read (a second database on the same vault
        # folder, a lost index) is indexed before the first request, not a sweep later.
        indexed = index_unswept_vaults_once()
        if indexed:
            self.stdout.write(f"mail: indexed {len(indexed)} threads from vaults this database had not read")

    def _serve(self, listeners: list[socket.socket], host: str, no_cluster: bool) -> None:
        port = listeners[0].getsockname()[1]  # the one the system picked for port 0
        self._start_up()
        # From here a client's connection waits for uvicorn instead of being refused; and
        # before the cluster starts, so a refusal here leaves no cluster behind.
        _listen(listeners, host, port)
        self._alive: list[int] = []  # the write ends of the pipes the clusters watch
        if enable_web_pool():
            self.stdout.write(f"web connections: pooled, at most {settings.WORKFORCE_WEB_CONCURRENCY}")
        self.stdout.write(
            f"serving {settings.WORKFORCE_ROOT} on http://{host_port(host, port)}/ "
            f"(the API's index at /api/, its docs at /api/docs/, its schema at /api/schema/, the admin at /admin/)"
        )
        self.stdout.write(f"open the pages at http://{_url_host(host)}:{port}/")
        if not no_cluster:
            self.stdout.write("starting the task cluster once the web server answers")
        self.stdout.flush()
        stopper = _Stopper(None, float(settings.WORKFORCE_STOP_SECONDS))
        # One machine: this process runs committed turns itself while it has a free thread
        # (workforce.inline); a web node of several leaves them all to the worker nodes.
        threads = inline_threads()
        if (
            not no_cluster
            and not settings.WORKFORCE_MULTI_NODE
            and inline.start(threads, after_task=_hand_on_outage_retries, busy=_web_busy)
        ):
            self.stdout.write(f"turns in the web process: at most {threads} at once, the rest in the cluster")

        def start_cluster() -> None:
            """The cluster starts once the web server answers: its processes would
            otherwise take the CPU the web server needs to start (on two cores, about
            2 s of a first start), and a post made meanwhile waits as a row for it."""
            if no_cluster:
                return
            cluster = stopper.adopt(self._start_cluster)
            if cluster is not None:
                self._say(f"task cluster started (pid {cluster.pid})")
                keeper = threading.Thread(target=stopper.keep, args=(self._start_cluster,), name="cluster-keeper", daemon=True)
                keeper.start()
                nice = int(settings.WORKFORCE_WEB_NICE)
                # The web server yields the CPU to the cluster it feeds (workforce_project.priority);
                # the keeper stays as it is, so a cluster it restarts is not lowered too.
                if nice > 0 and keeper.native_id is not None and lower_own_priority(nice, keep={keeper.native_id}):
                    self._say(f"web server: CPU priority lowered by {nice} (WORKFORCE_WEB_NICE) beside its task cluster")

        # uvicorn re-raises the signal that stopped it once it has shut down; with the
        # default SIGTERM action that would kill this process before the cluster is
        # stopped, so SIGTERM raises SystemExit and stops the cluster below, as Ctrl-C does.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        config = uvicorn.Config(
            "workforce_project.asgi:application",
            host=host,
            port=port,
            # The access log is INFO: WORKFORCE_LOG_LEVEL=WARNING silences it with the rest.
            log_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
            lifespan="on",  # the MCP mount's session manager runs in it (workforce_project.asgi)
            # h11 whatever else is installed: uvicorn's httptools protocol (its "auto" pick
            # when httptools is there) sends header names in lower case, h11 as Django
            # wrote them ("Location"), which clients reading them case-sensitively rely on.
            http="h11",
            # No WebSocket routes: "auto" would load the websockets package (docs/running.md "Memory").
            ws="none",
            # Open requests and streams get part of the stop budget, then are cut.
            timeout_graceful_shutdown=max(1, int(stopper.seconds * 0.8)),
        )
        try:
            _Server(config, on_exit=stopper.begin, on_started=start_cluster).run(sockets=listeners)
        except SystemExit as stop:  # SIGTERM, re-raised by uvicorn once it has shut down
            stopper.finish()
            _exit_now(stop.code if isinstance(stop.code, int) else 1)
        except KeyboardInterrupt:  # Ctrl-C
            stopper.finish()
            _exit_now(128 + signal.SIGINT)
        finally:
            stopper.finish()


def refuse_multi_node_problems(out) -> None:
    """Print the warnings of a multi-node setup to ``out`` (a command's stdout), after
    refusing one that cannot work across machines (``workforce_project.nodes``).

    Raises:
        CommandError: every problem, one line each, naming its fix.
    """
    problems = multi_node_problems()
    if problems:
        raise CommandError("\n".join(problems))
    for warning in multi_node_warnings():
        out.write(f"warning: {warning}")


def _bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``host:port``, not listening yet (``_listen``), for uvicorn to
    serve on: one per address ``host`` resolves to, made as asyncio's
    ``loop.create_server(host=, port=)`` (what uvicorn calls without them) makes them:
    the resolver's family, type and protocol, ``SO_REUSEADDR``, IPv6 sockets IPv6-only.
    The protocol matters: asyncio sets ``TCP_NODELAY`` only on connections whose
    listening socket says ``IPPROTO_TCP``, and without it a keep-alive client waits out
    delayed ACKs (about 40 ms a request).

    Raises:
        CommandError: the address does not resolve or can't be bound (in use, not this
            machine's, no permission), naming it and the reason.
    """
    try:
        found = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise CommandError(f"cannot listen on {host_port(host, port)}: {exc.strerror or exc}") from None
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:
        for sock in bound:
            sock.close()
        raise CommandError(f"cannot listen on {host_port(host, port)}: {exc.strerror or exc}") from None
    return bound


def _listen(sockets: list[socket.socket], host: str, port: int) -> None:
    """Start listening on the ``_bind`` sockets (uvicorn's default backlog).

    Raises:
        CommandError: another process bound the same address meanwhile and listens on it.
    """
    try:
        for sock in sockets:
            sock.listen(2048)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host_port(host, port)}: {exc.strerror or exc}") from None


def _url_host(host: str) -> str:
    """``host`` as a browser's address takes it: an IPv6 address in brackets, and a
    wildcard bind as the loopback address."""
    if host in {"0.0.0.0", ""}:
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def inline_threads() -> int:
    """The web process's turn threads: ``WORKFORCE_INLINE_TURNS``, at most
    ``WORKFORCE_WEB_CONCURRENCY`` - 1. A turn here keeps one of the web's database
    connections for the whole turn, model call included, so the cap leaves requests at
    least one (with every one held a read waited 10 s and answered 503)."""
    return max(0, min(settings.WORKFORCE_INLINE_TURNS, settings.WORKFORCE_WEB_CONCURRENCY - 1))


def _web_busy() -> bool:
    """Whether the web process has other requests to answer than the one committing: a
    turn then goes to the cluster, whose processes have CPU of their own, rather than
    take this process's (measured: with 8 conversations at once, turns here cost a
    sixth of the throughput; with one, they save a fifth of each answer's wait)."""
    from workforce_project.asgi import short_requests_running

    return short_requests_running() > 1


def _hand_on_outage_retries() -> None:
    """After a turn in the web process: tasks it gave up on in a database outage
    (``workforce.holders.outage_safe``) go to the cluster, as a worker's sweep would send
    them; nothing in the web process runs that sweep."""
    try:
        do_enqueue_outage_retries()
    except Exception:  # noqa: BLE001  (the database is still away: the rows' sweepers take them)
        logger.warning("tasks left by a database outage were not enqueued again; their sweepers will", exc_info=True)


def _exit_on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


def _exit_now(code: int) -> None:
    """Leave at once, once the web server and the cluster are down: tearing down the
    interpreter of a loaded Django process takes seconds on a busy machine, and nothing
    is left that needs it (every transaction has ended, logs are flushed here)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


TICK_SECONDS = 1.0  # the web server's own wake-up while idle (uvicorn's is 0.1 s)


class _Server(uvicorn.Server):
    """uvicorn's server, telling ``on_exit`` the moment a stop signal arrives, so the
    cluster stops while the web server drains instead of after it, and ending the open
    live streams, which would otherwise hold the stop until the graceful timeout."""

    def __init__(self, config: uvicorn.Config, *, on_exit: Callable[[], None], on_started: Callable[[], None]):
        super().__init__(config)
        self._on_exit = on_exit
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if not self.should_exit:
            self._on_started()

    def handle_exit(self, sig, frame):
        self._on_exit()
        stop_streams()  # open live streams end now (clients resume with Last-Event-ID)
        super().handle_exit(sig, frame)
        loop, woken = getattr(self, "_tick_loop", None), getattr(self, "_tick_wake", None)
        if loop is not None and woken is not None:
            loop.call_soon_threadsafe(woken.set)  # main_loop's wait ends now, not at its next tick

    async def main_loop(self) -> None:
        """uvicorn's loop, ticking once a second rather than ten times (an idle server's
        largest waker): each tick sets the Date header, whose resolution is a second, and
        looks whether to stop; a stop signal ends the wait at once (``handle_exit``)."""
        self._tick_loop, self._tick_wake = asyncio.get_running_loop(), asyncio.Event()
        should_exit = await self.on_tick(0)
        while not should_exit:
            try:
                await asyncio.wait_for(self._tick_wake.wait(), TICK_SECONDS)
            except TimeoutError:
                pass
            should_exit = await self.on_tick(0)  # counter 0: uvicorn updates the Date header on it


class _Stopper:
    """Stops the task cluster within ``seconds`` of the first stop signal.

    ``begin()`` (at the signal) sends SIGTERM to the cluster's main process only
    (signalling its group can deadlock its shutdown); ``finish()`` (once
    the web server is down) waits for it until the deadline, then SIGKILLs its whole
    process group: under a backlog django-q2 runs every task it prefetched before it
    exits. Work cut short is not lost: a delivery or a row is leased, and its sweeper
    hands it out again once the lease lapses."""

    # A cluster that ends on its own again and again is started again at most this often.
    RESTART_DELAYS = (1.0, 2.0, 5.0, 10.0, 30.0)
    # One that ran this long before it ended starts again after the first delay.
    STEADY_SECONDS = 60.0

    def __init__(self, cluster: subprocess.Popen | None, seconds: float):
        self.cluster = cluster
        self.seconds = seconds
        self.deadline: float | None = None
        # begin() (a signal handler, on the main thread) and keep() (its own thread) agree
        # on which cluster is serve's: re-entrant, as a signal may arrive inside finish().
        self.lock = threading.RLock()

    def begin(self) -> None:
        with self.lock:
            if self.deadline is not None:
                return
            self.deadline = time.monotonic() + self.seconds
            inline.stop()  # no new turn starts in the web process: they wait for the cluster
            if self.cluster is not None and self.cluster.poll() is None:
                self.cluster.send_signal(signal.SIGTERM)

    def adopt(self, start: Callable[[], subprocess.Popen]) -> subprocess.Popen | None:
        """Start serve's first cluster with ``start()`` and make it the one this stops;
        None, starting nothing, when the stop has begun already."""
        with self.lock:
            if self.deadline is not None:
                return None
            self.cluster = start()
            return self.cluster

    def keep(self, start: Callable[[], subprocess.Popen]) -> None:
        """Run on a thread of its own for serve's life: when the cluster ends while serve
        is not stopping (its main process killed, a crash), end what is left of its
        process group and start another with ``start()`` (a new ``subprocess.Popen``),
        after a delay growing while it keeps ending (``RESTART_DELAYS``), and say so on
        stderr. Without it serve went on answering 202 with no cluster to run the work.
        Returns once serve stops."""
        failures = 0
        while True:
            cluster, started = self.cluster, time.monotonic()
            if cluster is None:  # kept only once a cluster was adopted
                return
            cluster.wait()
            with self.lock:
                if self.deadline is not None:
                    return
                self._kill_group()  # its workers, if its main process alone was killed
            lived = time.monotonic() - started
            failures = 0 if lived >= self.STEADY_SECONDS else failures + 1
            delay = self.RESTART_DELAYS[min(failures, len(self.RESTART_DELAYS) - 1)]
            sys.stderr.write(
                f"task cluster (pid {cluster.pid}) ended on its own (exit status {cluster.returncode}) "
                f"after {lived:.0f}s: starting another in {delay:g}s\n"
            )
            sys.stderr.flush()
            time.sleep(delay)
            with self.lock:
                if self.deadline is not None:
                    return
                self.cluster = again = start()
                sys.stderr.write(f"task cluster started again (pid {again.pid})\n")
                sys.stderr.flush()

    def finish(self) -> None:
        self.begin()  # the web server stopped for another reason: stop the cluster too
        # Turns running in the web process end within the stop budget, or their claims
        # lapse and the cluster runs them again.
        inline.stop(deadline=self.deadline)
        cluster, deadline = self.cluster, self.deadline
        if cluster is None or deadline is None:
            return
        if cluster.poll() is not None:
            # Its main process is gone (killed on its own): its workers may still run in
            # its process group, re-parented to init. They go with serve.
            self._kill_group()
            return
        try:
            cluster.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._kill_group()
            cluster.wait()
            sys.stderr.write(f"task cluster killed after {self.seconds:g}s; unfinished work is left to its leases\n")
            return
        self._kill_group()  # a worker its main process left behind

    def _kill_group(self) -> None:
        if self.cluster is None:
            return
        try:
            os.killpg(self.cluster.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
