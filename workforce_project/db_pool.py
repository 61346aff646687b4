"""The web process's PostgreSQL connection pool, which answers at once while the database
is down (``deployment.enable_web_pool``; docs/running.md "Settings (environment)", ``WORKFORCE_DB_POOL``).

psycopg's pool, as Django builds it, hands out a pooled connection the database has
already closed (a restart, ``pg_terminate_backend``): the request's first query fails and
it answered 500. And while the database refuses connections, a request waits the pool's
whole timeout (10 s) for one that never comes. ``OutageAwarePool`` changes both:

- before it hands out a connection it looks at it, for free: an idle connection has
  nothing to read, so one whose socket is readable (the server's "terminating
  connection" message, or its end of the socket closed) is checked with a round trip,
  and dropped (and replaced) when it fails;
- the moment one of its connection attempts is refused, every request waiting for a
  connection is failed (``PoolTimeout``, a 503 ``database-unavailable`` to the client),
  and until an attempt succeeds again each request tries one connection itself, at most
  one at a time (the others are refused at once): refused, it answers 503 at once;
  accepted, the database is back and the pool grows again at once, without waiting out
  its reconnection back-off (which ``reconnect_timeout`` keeps short).
"""

from __future__ import annotations

import logging
import select
import threading
from time import monotonic

from psycopg_pool import ConnectionPool, PoolTimeout

logger = logging.getLogger(__name__)

# How long one probe of a database that refused the pool may take to connect (seconds).
PROBE_CONNECT_SECONDS = 2


def connection_is_usable(conn) -> bool:
    """Whether an idle pooled psycopg connection still works. Free when it does: only a
    socket with something to read (which an idle connection never has) costs a round trip."""
    if conn.closed or conn.broken:
        return False
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except Exception:  # noqa: BLE001  (no socket any more: not usable)
        return False
    if not readable:
        return True
    try:
        ConnectionPool.check_connection(conn)
    except Exception:  # noqa: BLE001  (any failure: the connection is not usable)
        return False
    return True


class OutageAwarePool(ConnectionPool):
    """psycopg's ``ConnectionPool``, failing fast while the database refuses connections
    (see the module docstring). Same arguments as ``ConnectionPool``; give it no ``check``
    (it checks each connection itself, ``connection_is_usable``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._refused: str | None = None  # why the last connection attempt failed; None: it worked
        self._probing = threading.Lock()

    # -- noticing an outage ------------------------------------------------------------

    def _connect(self, timeout: float | None = None):
        try:
            conn = super()._connect(timeout)
        except Exception as exc:
            self._note_refused(exc)
            raise
        self._note_back()
        return conn

    def _note_refused(self, exc: BaseException) -> None:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        if self._refused is None:
            logger.warning("the database refused a connection (%s): requests answer 503 until it takes one again", reason)
        self._refused = reason
        # Requests waiting for a connection answer now, not at the pool's timeout.
        with self._lock:
            waiting = list(self._waiting)
            self._waiting.clear()
        for client in waiting:
            client.fail(PoolTimeout(f"the database refused a connection: {reason}"))

    def _note_back(self) -> None:
        if self._refused is not None:
            logger.warning("the database takes connections again")
            self._refused = None

    def _probe(self) -> None:
        """The last attempt was refused: try one connection now. Raises PoolTimeout when it
        is refused again, or when another request is trying already."""
        reason = self._refused
        if not self._probing.acquire(blocking=False):
            raise PoolTimeout(f"the database refused a connection: {reason}")
        try:
            try:
                conn = self.connection_class.connect(self._probe_conninfo(), **self._probe_kwargs())
            except Exception as exc:
                self._note_refused(exc)
                raise PoolTimeout(f"the database refused a connection: {self._refused}") from None
            conn.close()
            self._note_back()
            # The pool grows again now (and drops what the outage left it), rather than when
            # its back-off schedules its next attempt.
            self.check()
        finally:
            self._probing.release()

    def _probe_conninfo(self) -> str:
        conninfo = self.conninfo
        return (conninfo() if callable(conninfo) else conninfo) or ""

    def _probe_kwargs(self) -> dict:
        kwargs = self.kwargs
        return {**((kwargs() if callable(kwargs) else kwargs) or {}), "connect_timeout": PROBE_CONNECT_SECONDS}

    # -- handing out connections -----------------------------------------------------------

    def getconn(self, timeout: float | None = None):
        """A working connection, as ``ConnectionPool.getconn``; raises ``PoolTimeout`` at
        once while the database refuses connections."""
        deadline = monotonic() + (self.timeout if timeout is None else timeout)
        # Each dropped connection is replaced in the background; at most every
        # connection the pool holds, and one more, can turn out closed.
        for _ in range(self.max_size + 1):
            if self._refused is not None:
                self._probe()
            conn = super().getconn(max(0.0, deadline - monotonic()))
            if connection_is_usable(conn):
                return conn
            logger.info("dropped a pooled connection the database had closed")
            conn.close()
            self.putconn(conn)  # closed: the pool discards it and opens another
        raise PoolTimeout("every pooled connection had been closed by the database")
