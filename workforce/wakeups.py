"""Waking a waiting cluster thread when work arrives, instead of it looking on a clock
(docs/running.md "Idle"; issue 26 item 2).

A thread that waits for something to do (the task queue's pusher, the sweeper, the
round timer) waits on a ``Waiter`` with a timeout that grows while nothing happens; the
code that makes the work calls ``wake(channel)`` in its transaction, and the waiter
returns at that transaction's commit:

- **PostgreSQL**: ``wake`` is ``pg_notify(channel)`` in the caller's transaction
  (delivered at commit, dropped with a rollback, folded into one per transaction), and
  the waiter ``LISTEN``s on a connection of its own, so a waiter on any machine hears it.
- **SQLite** (one machine by nature): ``wake`` sends an empty datagram at commit to a
  Linux abstract UNIX socket named after the database file and the channel, which the
  one waiter of that channel on this machine has bound. Where that cannot be bound (not
  Linux, or a second waiter of the same channel), the waiter sleeps out its timeout.

A lost wake-up costs only time: every waiter still looks after its timeout.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import select
import socket
import time
from typing import TYPE_CHECKING

from django.db import connections, transaction

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

logger = logging.getLogger(__name__)

QUEUE = "workforce_q"  # an enqueue (workforce.broker.ListeningORM): the pushers and the sweeper
TIMERS = "workforce_timers"  # a timer's next deadline moved earlier (a round opened)


def _on_postgres(alias: str = "default") -> bool:
    return connections[alias].vendor == "postgresql"


def _local_address(channel: str, alias: str = "default") -> str:
    """The abstract socket name of ``channel`` for this database file (``\\0`` first)."""
    name = str(connections[alias].settings_dict.get("NAME") or "")
    digest = hashlib.sha1(os.path.realpath(name).encode()).hexdigest()[:16]
    return f"\0workforce-{digest}-{channel}"


def _send_local(address: str) -> None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.setblocking(False)
            sock.sendto(b"", address)
    except OSError:  # nobody waits (ECONNREFUSED), its buffer is full (a wake is pending): fine
        pass


def wake(channel: str, *, payload: str = "", alias: str = "default") -> None:
    """Wake the waiters of ``channel`` when the caller's transaction commits (at once
    outside one). On PostgreSQL one ``pg_notify`` statement; on SQLite a datagram sent
    at commit. Never raises on SQLite; on PostgreSQL raises what the statement raises."""
    if _on_postgres(alias):
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, payload])
        return
    address = _local_address(channel, alias)
    transaction.on_commit(lambda: _send_local(address), using=alias)


def listen_wait(conn: psycopg.Connection, seconds: float) -> bool:
    """Wait up to ``seconds`` for a notification on the listening connection ``conn``
    (True when one or more arrived; all that arrived are taken). The wait is one
    ``select`` on its socket: psycopg's own ``notifies(timeout=)`` wakes ten times a
    second to look for signals, the largest part of an idle cluster's CPU on PostgreSQL.

    Raises:
        psycopg.OperationalError: the connection broke (the caller opens another).
    """
    if any(True for _ in conn.notifies(timeout=0)):  # queued while the caller was busy
        return True
    readable, _, _ = select.select([conn.fileno()], [], [], max(0.0, seconds))
    if not readable:
        return False
    return any(True for _ in conn.notifies(timeout=0))  # a closed connection raises here


class Waiter:
    """Waits for ``wake(channel)`` on any of ``channels``, or a timeout. One per thread;
    opened on the first ``wait`` and opened again after a fork or an error.

    Args:
        channels: the channels to hear.
        alias: the database whose wake-ups these are.
        local: False for a waiter that hears only PostgreSQL's notifications and on
            SQLite just sleeps out its timeout (it leaves the channel's one local
            socket to the waiter that needs it: the pusher).
    """

    def __init__(self, channels: tuple[str, ...], *, alias: str = "default", local: bool = True):
        self.channels = channels
        self.alias = alias
        self.local = local
        self._pid: int | None = None
        self._conn: psycopg.Connection | None = None
        self._socks: list[socket.socket] = []

    def wait(self, seconds: float) -> bool:
        """Block until a wake-up arrives (True) or ``seconds`` pass (False). Wake-ups sent
        while the caller was busy are queued and end the next wait at once; several
        queued ones end one wait."""
        seconds = max(0.0, seconds)
        try:
            if _on_postgres(self.alias):
                return self._wait_postgres(seconds)
            return self._wait_local(seconds)
        except Exception:
            logger.warning("waiting for %s failed; looking on a clock until it works again", self.channels, exc_info=True)
            self.close()
            time.sleep(min(seconds, 1.0))
            return False

    # -- PostgreSQL ------------------------------------------------------------------------

    def _listening(self) -> psycopg.Connection:
        if self._conn is not None and self._pid == os.getpid() and not self._conn.closed:
            return self._conn
        import psycopg

        params = connections[self.alias].get_connection_params()
        conninfo = psycopg.conninfo.make_conninfo(
            **{k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port", "sslmode")}
        )
        conn = psycopg.connect(conninfo, autocommit=True)
        for channel in self.channels:
            conn.execute(f"LISTEN {channel}")
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _wait_postgres(self, seconds: float) -> bool:
        return listen_wait(self._listening(), seconds)

    # -- SQLite: abstract UNIX sockets ------------------------------------------------------

    def _bound(self) -> list[socket.socket]:
        if self._socks and self._pid == os.getpid():
            return self._socks
        self._socks = []
        self._pid = os.getpid()
        for channel in self.channels:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            try:
                sock.bind(_local_address(channel, self.alias))
            except OSError as exc:
                sock.close()
                if exc.errno != errno.EADDRINUSE:
                    raise
                continue  # another waiter hears this channel on this machine
            sock.setblocking(False)
            self._socks.append(sock)
        return self._socks

    def _wait_local(self, seconds: float) -> bool:
        socks = self._bound() if self.local else []
        if not socks:
            time.sleep(seconds)
            return False
        ready, _, _ = select.select(socks, [], [], seconds)
        for sock in ready:
            while True:
                try:
                    sock.recv(1)
                except (BlockingIOError, InterruptedError):
                    break
        return bool(ready)

    def close(self) -> None:
        """Close the listening connection or the sockets (opened again by the next wait)."""
        conn, self._conn = self._conn, None
        if conn is not None and self._pid == os.getpid():
            try:
                conn.close()
            except Exception:
                pass
        socks, self._socks = self._socks, []
        for sock in socks:
            sock.close()


class Backoff:
    """A wait that doubles while nothing happens: ``first`` seconds, then twice that, up
    to ``most``; ``reset()`` when something happened starts again from ``first``."""

    def __init__(self, first: float, most: float):
        self.first = max(0.0, first)
        self.most = max(self.first, most)
        self.current = self.first

    def next(self) -> float:
        """The wait to use now; the one after it is twice as long (at most ``most``)."""
        now = self.current
        self.current = min(self.most, max(self.current * 2, 0.05))
        return now

    def reset(self) -> None:
        self.current = self.first
