"""System checks for how the server is deployed: its secret key and its database
connections."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from workforce_project.deployment import connection_budget, postgres_connection_allowance
from workforce_project.secret_key import REPOSITORY_KEY


@checks.register("workforce")
def check_secret_key(app_configs=None, **kwargs):
    """The key the repository once shipped is public: tasks signed with it can be forged
    by anyone who can write to the broker, so it is refused outright."""
    if settings.SECRET_KEY == REPOSITORY_KEY:
        return [
            checks.Error(
                "SECRET_KEY is the key published in the repository: anyone who can write to the broker can run code in the cluster.",
                hint="Unset DJANGO_SECRET_KEY (each installation then makes its own in WORKFORCE_VAR_DIR/secret_key) or set a random one.",
                id="workforce_project.E001",
            )
        ]
    return []


@checks.register("workforce")
def check_database_vendor(app_configs=None, **kwargs):
    """The server's hand-written statements (``workforce.rows``, ``mailboxes.lines``,
    the claims) speak PostgreSQL and SQLite only, and have no ORM fallback: any other
    database is refused before it serves."""
    from django.db import connections

    vendor = connections["default"].vendor
    if vendor not in ("postgresql", "sqlite"):
        return [
            checks.Error(
                f"The default database is {vendor}; the server runs on PostgreSQL or SQLite only.",
                hint="Set DATABASE_URL to a postgres:// URL, or unset it for the embedded SQLite.",
                id="workforce_project.E010",
            )
        ]
    return []


@checks.register("workforce")
def check_stop_seconds(app_configs=None, **kwargs):
    """``WORKFORCE_STOP_SECONDS`` bounds how long ``serve`` takes to stop: a positive
    number of seconds."""
    value = settings.WORKFORCE_STOP_SECONDS
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return [
            checks.Error(
                f"WORKFORCE_STOP_SECONDS ({value!r}) must be a positive number of seconds.",
                hint="It is how long serve waits for the web server and the task cluster to stop before killing them.",
                id="workforce_project.E002",
            )
        ]
    return []


@checks.register("workforce")
def check_web_limits(app_configs=None, **kwargs):
    """The web server's admission limits (``workforce_project.admission``):
    ``WORKFORCE_MAX_BODY_BYTES`` and ``WORKFORCE_ADDRESS_LIMIT`` whole numbers of at least 1,
    ``WORKFORCE_BODY_TIMEOUT_SECONDS`` a positive number (0 would refuse every body)."""
    errors = []
    for name in ("WORKFORCE_MAX_BODY_BYTES", "WORKFORCE_ADDRESS_LIMIT", "WORKFORCE_BODY_TIMEOUT_SECONDS"):
        value = getattr(settings, name)
        whole = name != "WORKFORCE_BODY_TIMEOUT_SECONDS"
        if isinstance(value, bool) or not isinstance(value, int if whole else int | float) or not value > 0:
            kind = "whole number of at least 1" if whole else "positive number of seconds"
            errors.append(
                checks.Error(
                    f"{name} ({value!r}) must be a {kind}.",
                    hint='docs/api.md "Limits of the web server".',
                    id="workforce_project.E020",
                )
            )
    return errors


@checks.register("workforce")
def check_database_connections(app_configs=None, **kwargs):
    """On PostgreSQL, the connections ``serve`` can hold (``connection_budget``: the web
    pool and its LISTEN, the cluster workers and their sweeper threads, the cluster's
    other processes) must fit in what the server allows
    (``max_connections`` minus ``superuser_reserved_connections``, or the role's limit),
    or requests fail with 503 ``database-unavailable`` under load. Says nothing when the
    database is not PostgreSQL or cannot be reached."""
    allowed = postgres_connection_allowance()
    if allowed is None:
        return []
    budget = connection_budget()
    if budget.total <= allowed:
        return []
    return [
        checks.Warning(
            f"serve can hold {budget.total} database connections ({budget.describe()}; WORKFORCE_WEB_CONCURRENCY "
            f"{settings.WORKFORCE_WEB_CONCURRENCY}, {settings.Q_CLUSTER.get('workers')} cluster workers) "
            f"but PostgreSQL allows this role {allowed}.",
            hint="Lower WORKFORCE_WEB_CONCURRENCY or WORKFORCE_Q_WORKERS, or raise max_connections; "
            "past the limit requests answer 503 database-unavailable.",
            id="workforce_project.W001",
        )
    ]
