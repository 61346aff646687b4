"""The database unreachable, told apart from a query's error, answered as
``database-unavailable`` (503 with ``Retry-After``) by the middleware, DRF's handler and
the 500 handler: every request during an outage answers that, never a 500."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError, connections

from workforce.refusals import Refusal

DATABASE_RETRY_AFTER_SECONDS = 2

# SQLSTATEs of a server that ended or refused the session: class 08 (connection
# exception), admin/crash shutdown, "cannot connect now" (starting or stopping), too many
# connections; and 55000 as PostgreSQL sends it for a database that takes no connections.
_LOST_STATES = {"57P01", "57P02", "57P03", "53300", "55000"}


def _lost_connection(exc: BaseException) -> bool:
    """Whether ``exc`` ended (or met) a connection the database closed: the driver's
    error says so by its SQLSTATE, or an open connection of this thread is closed or
    broken now (psycopg's ``closed`` / ``broken``)."""
    cause: BaseException | None = exc
    while cause is not None:
        state = getattr(cause, "sqlstate", None) or ""
        if state.startswith("08") or state in _LOST_STATES:
            return True
        cause = cause.__cause__
    for alias in connections:
        raw = connections[alias].connection
        if raw is not None and (getattr(raw, "closed", False) or getattr(raw, "broken", False)):
            return True
    return False


def database_unavailable(exc: BaseException) -> Refusal | None:
    """``database-unavailable`` when ``exc`` is the database unreachable: refusing a
    connection (too many clients, a role's connection limit, a pool with no free
    connection, the server down or not taking connections), or a connection it closed
    under the request (a restart, ``pg_terminate_backend``); None for anything else,
    ordinary query errors on a working connection included (a statement timeout).

    An ``OperationalError`` while no connection is open is the connect failing: a
    query's error always comes from an open connection."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    if any(connections[alias].connection is not None for alias in connections) and not _lost_connection(exc):
        return None
    return Refusal("database-unavailable", "The database did not answer this request (it is busy or restarting); retry shortly.")


def database_unavailable_headers() -> dict[str, str]:
    """The headers a ``database-unavailable`` answer carries."""
    return {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
