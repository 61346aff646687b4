"""The database refusing a connection, told apart from a query's error, answered as
``database-unavailable`` (503 with ``Retry-After``) by the middleware and DRF's handler."""

from __future__ import annotations

from django.db import OperationalError, connections

from workforce.refusals import Refusal

DATABASE_RETRY_AFTER_SECONDS = 2


def database_unavailable(exc: BaseException) -> Refusal | None:
    """``database-unavailable`` when ``exc`` is the database refusing a connection (too
    many clients, a role's connection limit, a pool with no free connection, the server
    down); None for anything else, ordinary query errors included.

    An ``OperationalError`` while no connection is open is the connect failing: a
    query's error always comes from an open connection."""
    if not isinstance(exc, OperationalError):
        return None
    if any(connections[alias].connection is not None for alias in connections):
        return None
    return Refusal("database-unavailable", "The database has no connection free for this request; retry shortly.")


def database_unavailable_headers() -> dict[str, str]:
    """The headers a ``database-unavailable`` answer carries."""
    return {"Retry-After": str(DATABASE_RETRY_AFTER_SECONDS)}
