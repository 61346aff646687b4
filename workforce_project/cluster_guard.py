"""One task cluster per database, and a cluster that ends with the ``serve`` that started it
(docs/running.md "Commands"; ``serve`` and ``serve_qcluster``).

**One cluster per database.** The cluster ``serve`` starts holds the cluster lock of its
database for its whole life (``ClusterLock``): on PostgreSQL a session advisory lock on its
own connection (named, in ``pg_stat_activity.application_name``, after the cluster's pid,
its serve's pid and host), on SQLite an ``flock`` on ``<database file>.cluster-lock``
(the same words written in it). The cluster's processes are forked from the one that took
it and share that connection's socket or that file, so the lock lasts as long as any of
them lives. Before it starts a cluster, ``serve`` looks at the lock (``wait_for_no_cluster``):
held, it says what holds it, waits up to ``WORKFORCE_STOP_SECONDS`` + 5 s for it to go
(the cluster of a serve killed a moment ago is still stopping), then refuses.

**A cluster ends with its serve.** ``serve`` hands the cluster the read end of a pipe whose
write end only ``serve`` holds: the kernel closes it when ``serve`` ends, however it ends
(``kill -9`` included). The cluster's main process (``guard_cluster``) then stops the
cluster as SIGTERM does (django-q2's graceful stop), and after ``WORKFORCE_STOP_SECONDS``
kills its process group. On Linux it also asks the kernel for SIGTERM when its parent dies
(``PR_SET_PDEATHSIG``), and every process it forks (the sentinel, which forks the workers,
the monitor and the pusher) for SIGKILL when its own parent dies, so a cluster whose main
process is killed leaves no worker behind either.
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import select
import signal
import socket
import threading
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connections

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# How often a wait for the lock looks again (seconds).
LOCK_POLL_SECONDS = 0.5


def lock_key() -> int:
    """The advisory lock's key: one per django-q2 cluster name (its queue), below 2**31 so
    ``pg_locks`` shows it as ``classid`` 0, ``objid`` the key."""
    return zlib.crc32(f"workforce task cluster {settings.Q_CLUSTER['name']}".encode()) & 0x7FFFFFFF


def describe_self(serve_pid: int | None, command: str = "serve") -> str:
    """``"workforce cluster pid 12 serve 11 on host"``: who holds the lock, as the
    message of a refused serve shows it (at most 63 characters: PostgreSQL's
    ``application_name``). ``command`` is the command whose pid ``serve_pid`` is
    (``serve``, or ``work`` for a worker node: ``"… pid 12 work 11 on host"``)."""
    serve = f" {command} {serve_pid}" if serve_pid else ""
    return f"workforce cluster pid {os.getpid()}{serve} on {socket.gethostname()}"[:63]


class ClusterLock:
    """The database's task-cluster lock (see the module docstring).

    ``holder()`` says who holds it (None: nobody); ``acquire(description)`` takes it and
    keeps it for the life of this process and the processes it forks."""

    def __init__(self):
        conf = settings.DATABASES["default"]
        self.postgres = conf["ENGINE"].endswith("postgresql")
        self.key = lock_key()
        self._held = None  # the connection or the file descriptor that holds it

    # -- PostgreSQL ------------------------------------------------------------------

    def _connect(self, application_name: str):
        import psycopg

        params = connections["default"].get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        return psycopg.connect(**params, autocommit=True, application_name=application_name, connect_timeout=10)

    def _pg_holder(self, conn) -> str:
        row = conn.execute(
            "SELECT a.application_name, host(a.client_addr), a.backend_start FROM pg_locks l"
            " JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = %s AND l.objsubid = 1"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            (self.key,),
        ).fetchone()
        if row is None:
            return "another process"
        name, addr, since = row
        return f"{name or 'a process'} (connected from {addr or 'a local socket'} since {since:%Y-%m-%d %H:%M:%S %Z})"

    # -- SQLite ------------------------------------------------------------------------

    def _path(self) -> Path:
        return Path(f"{settings.DATABASES['default']['NAME']}.cluster-lock")

    def _open(self) -> int:
        path = self._path()
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    # -- both ----------------------------------------------------------------------------

    def _try(self, handle) -> bool:
        if self.postgres:
            return bool(handle.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()[0])
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _describe_holder(self, handle) -> str:
        if self.postgres:
            return self._pg_holder(handle)
        text = os.pread(handle, 200, 0).decode(errors="replace").strip()
        return text or "another process"

    def holder(self) -> str | None:
        """Who holds the lock now, in words (``describe_self`` of a live cluster, where it
        connects from and since when); None when nobody does."""
        if self.postgres:
            with self._connect("workforce serve (looking for a task cluster)") as conn:
                if self._try(conn):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
                    return None
                return self._pg_holder(conn)
        fd = self._open()
        try:
            if self._try(fd):
                return None
            return self._describe_holder(fd)
        finally:
            os.close(fd)

    def acquire(self, description: str, *, on_wait: Callable[[str], None] | None = None) -> None:
        """Take the lock as ``description``, waiting as long as another holds it
        (``on_wait(holder)`` is told once), and hold it until this process and the ones it
        forks have ended."""
        handle = self._connect(description) if self.postgres else self._open()
        told = False
        while not self._try(handle):
            if not told and on_wait is not None:
                on_wait(self._describe_holder(handle))
                told = True
            time.sleep(LOCK_POLL_SECONDS)
        if not self.postgres:
            os.ftruncate(handle, 0)
            os.pwrite(handle, f"{description} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}\n".encode(), 0)
        self._held = handle

    def keep(self, description: str, *, every: float = 5.0, quiet: float = 60.0) -> None:
        """On PostgreSQL, take the lock again when its connection is lost (a database
        restart ends the session and the lock with it), in a thread; logs an error if
        another cluster took it meanwhile. Nothing on SQLite (the lock is the file's).

        The thread waits for the connection's socket to have something to read (a server
        that ends the session says so and closes it), and asks ``SELECT 1`` then or every
        ``quiet`` seconds anyway (a connection that died without a word); once lost it
        tries again every ``every`` seconds. An idle cluster is not woken for it."""
        if not self.postgres:
            return

        def run() -> None:
            lost = False
            while (held := self._held) is not None:
                if lost:
                    time.sleep(every)
                else:
                    try:
                        select.select([held.fileno()], [], [], quiet)
                    except (OSError, ValueError):  # closed under us: look now
                        pass
                try:
                    held.execute("SELECT 1")
                    lost = False
                    continue
                except Exception:  # noqa: BLE001  (its connection is gone: take the lock again)
                    lost = True
                try:
                    fresh = self._connect(description)
                except Exception:  # noqa: BLE001  (the database is still down: look again later)
                    continue
                if self._try(fresh):
                    self._held = fresh
                    lost = False
                    logger.warning("took the task cluster lock again after its database connection was lost")
                else:
                    logger.error(
                        "the task cluster lock was lost with its database connection and %s holds it now",
                        self._describe_holder(fresh),
                    )
                    fresh.close()

        threading.Thread(target=run, name="cluster-lock", daemon=True).start()

    def release(self) -> None:
        """Let go of the lock (once the cluster has stopped)."""
        handle, self._held = self._held, None
        if handle is None:
            return
        if self.postgres:
            handle.close()
        else:
            os.close(handle)


def wait_for_no_cluster(seconds: float, *, say: Callable[[str], None]) -> str | None:
    """Wait up to ``seconds`` for the database's cluster lock to be free. Returns None once
    it is, or the holder's description when it is still held then; ``say`` is told once
    what it waits for."""
    lock = ClusterLock()
    deadline = time.monotonic() + seconds
    holder = lock.holder()
    if holder is None:
        return None
    say(f"a task cluster is running on this database: {holder}; waiting up to {seconds:g}s for it to stop")
    while time.monotonic() < deadline:
        time.sleep(LOCK_POLL_SECONDS)
        holder = lock.holder()
        if holder is None:
            return None
    return holder


def _prctl_death_signal(signum: int) -> bool:
    """Ask the kernel to send ``signum`` to this process when the thread that forked it
    ends (Linux ``PR_SET_PDEATHSIG``). Returns False where that does not exist."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _die_with_forking_parent() -> None:
    """``os.register_at_fork`` hooks: a forked child is SIGKILLed when its parent ends,
    and ends at once when its parent ended before the child could ask for that."""
    parent = {"pid": os.getpid()}

    def before() -> None:
        parent["pid"] = os.getpid()

    def after_in_child() -> None:
        if _prctl_death_signal(signal.SIGKILL) and os.getppid() != parent["pid"]:
            os._exit(1)

    os.register_at_fork(before=before, after_in_child=after_in_child)


def guard_cluster(*, serve_pid: int | None, parent_fd: int | None, stop_seconds: float) -> None:
    """Make this process (the cluster's main process, a process-group leader started by
    ``serve``) end with ``serve`` (see the module docstring).

    Args:
        serve_pid: the pid of the serve that started it; it exits at once (code 1) when its
            parent is already another process.
        parent_fd: the read end of serve's pipe; EOF means serve is gone.
        stop_seconds: how long the graceful stop may take before the process group is killed.
    """
    signalled = _prctl_death_signal(signal.SIGTERM)
    if serve_pid and os.getppid() != serve_pid:
        logger.error("serve (pid %s) ended before its task cluster started: not starting it", serve_pid)
        os._exit(1)
    _die_with_forking_parent()
    if parent_fd is None:
        return

    def watch() -> None:
        try:
            while os.read(parent_fd, 1):
                pass
        except OSError:
            pass
        logger.warning("serve (pid %s) is gone: stopping its task cluster", serve_pid)
        if not signalled:
            os.kill(os.getpid(), signal.SIGTERM)  # django-q2's graceful stop
        time.sleep(stop_seconds)
        logger.warning("the task cluster did not stop within %ss of its serve's end: killing it", stop_seconds)
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        else:
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="serve-watchdog", daemon=True).start()
