"""What a deployment is made of, said and checked at start-up: the database, the broker,
the address the web server binds, and the connections they need."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connections

if TYPE_CHECKING:  # the shape of a DATABASES entry, as settings builds it
    from dj_database_url import DBConfig

# The cluster's processes beside its workers, one connection each: django-q2's sentinel
# (which runs the scheduler too), its monitor and its pusher.
CLUSTER_PROCESS_CONNECTIONS = 3


@dataclass(frozen=True)
class ConnectionBudget:
    """The database connections one ``serve`` can hold, by who holds them
    (``connection_budget``)."""

    web: int  # the web process's pool, and its streams' LISTEN connection on PostgreSQL
    workers: int  # each cluster worker's own, and one per sweeper thread in it
    cluster: int  # the sentinel, the monitor, the pusher, the pusher's LISTEN (ORM broker on PostgreSQL), the cluster lock's (PostgreSQL)

    @property
    def total(self) -> int:
        return self.web + self.workers + self.cluster

    def describe(self) -> str:
        """``"<web> for the web server + <workers> for the cluster workers and their
        sweeper threads + <cluster> for the cluster's other processes"``."""
        return (
            f"{self.web} for the web server + {self.workers} for the cluster workers and their sweeper threads "
            f"+ {self.cluster} for the cluster's other processes"
        )


class BrokerUnreachable(Exception):
    """The task broker did not answer a ping; the message says which and why."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (``127.0.0.0/8``, ``::1``); any other
    name or address (``0.0.0.0`` included) is reachable from elsewhere."""
    if host.lower() in {"localhost", "localhost."}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def describe_database(conf: DBConfig | None = None) -> str:
    """``"postgresql wf on 127.0.0.1:5432 as postgres"`` or ``"sqlite3 /path/db"``: the
    engine and where it is, never the password. ``conf`` is a ``DATABASES`` entry
    (default: ``DATABASES["default"]``)."""
    db = settings.DATABASES["default"] if conf is None else conf
    engine = db["ENGINE"].rsplit(".", 1)[-1]
    if engine.startswith("sqlite"):
        return f"{engine} {db.get('NAME')}"
    where = db.get("HOST") or "local socket"
    if db.get("PORT"):
        where = f"{where}:{db['PORT']}"
    user = f" as {db['USER']}" if db.get("USER") else ""
    return f"{engine} {db.get('NAME')} on {where}{user}"


def describe_statements(conf: DBConfig | None = None) -> str | None:
    """How statements reach PostgreSQL, for the start-up lines: ``"prepared on the
    server (WORKFORCE_DB_PREPARED=false turns it off for a pooler that cannot carry
    them)"`` or ``"sent as text, nothing prepared (WORKFORCE_DB_PREPARED=false)"``;
    None on SQLite. ``conf`` as in ``describe_database``."""
    db = settings.DATABASES["default"] if conf is None else conf
    if not db["ENGINE"].endswith("postgresql"):
        return None
    if (db.get("OPTIONS") or {}).get("server_side_binding"):
        return "prepared on the server (WORKFORCE_DB_PREPARED=false turns it off for a pooler that cannot carry them)"
    return "sent as text, nothing prepared (WORKFORCE_DB_PREPARED=false)"


def _redis_url() -> str | None:
    redis = settings.Q_CLUSTER.get("redis")
    return redis if isinstance(redis, str) else None


def describe_broker() -> str:
    """``"redis 127.0.0.1:6379/2"`` (no password) or the ORM broker's sentence."""
    url = _redis_url()
    if url is None:
        return "django-q2 ORM broker (tasks are rows in the database above)"
    parts = urlsplit(url)
    host = parts.hostname or "localhost"
    port = parts.port or 6379
    return f"{parts.scheme} {host}:{port}{parts.path or '/0'}"


def ping_broker(timeout: float = 3.0) -> None:
    """Ping the Redis broker within ``timeout`` seconds; the ORM broker is the database,
    which ``migrate`` has just reached.

    Raises:
        BrokerUnreachable: no answer, naming the broker (no password) and the error.
    """
    url = _redis_url()
    if url is None:
        return
    import redis

    try:
        client = redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
        try:
            client.ping()
        finally:
            client.close()
    except redis.RedisError as exc:
        raise BrokerUnreachable(f"the task broker ({describe_broker()}) cannot be reached: {exc}") from None


def connection_budget(*, web_concurrency: int | None = None, cluster_workers: int | None = None) -> ConnectionBudget:
    """Database connections one ``serve`` can hold at most, by holder, for the configured
    database and broker:

    - the web process: its pool, ``WORKFORCE_WEB_CONCURRENCY`` (every request and open
      stream draws on it), and on PostgreSQL the streams' one ``LISTEN`` connection
      (``workforce.streams``);
    - each cluster worker: the connection its tasks use, and one per sweeper thread it
      runs (``workforce.sweepers.sweeper_threads``): the cluster keeps its connections
      (``workforce.broker.keep_connections``), so each thread holds one;
    - the cluster's other processes, ``CLUSTER_PROCESS_CONNECTIONS``, and with the ORM
      broker on PostgreSQL the pusher's ``LISTEN`` connection (``workforce.broker``), and on
      PostgreSQL the cluster lock's (``workforce_project.cluster_guard``, held by its main process).

    Args:
        web_concurrency, cluster_workers: override the settings' values.
    """
    from workforce.sweepers import sweeper_threads

    postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    web = int(settings.WORKFORCE_WEB_CONCURRENCY if web_concurrency is None else web_concurrency)
    workers = int(settings.Q_CLUSTER.get("workers", 1) if cluster_workers is None else cluster_workers)
    listening_pusher = postgres and "orm" in settings.Q_CLUSTER
    return ConnectionBudget(
        web=web + (1 if postgres else 0),
        workers=workers * (1 + sweeper_threads()),
        cluster=CLUSTER_PROCESS_CONNECTIONS + (1 if listening_pusher else 0) + (1 if postgres else 0),
    )


def postgres_connection_allowance(alias: str = "default") -> int | None:
    """Connections PostgreSQL lets this server open: ``max_connections`` minus
    ``superuser_reserved_connections`` (and the role's ``CONNECTION LIMIT`` when lower);
    None when the database is not PostgreSQL or cannot be reached."""
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int,"
                " (SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user)"
            )
            allowed, role_limit = cursor.fetchone()
    except Exception:  # noqa: BLE001  (no database: the check says nothing rather than crash)
        return None
    if role_limit is not None and role_limit >= 0:
        allowed = min(allowed, role_limit)
    return allowed


def web_pool_options() -> dict | None:
    """The PostgreSQL connection pool the web process uses (Django's ``OPTIONS["pool"]``):
    up to ``WORKFORCE_WEB_CONCURRENCY`` connections, kept open between requests; a request
    that finds none free waits ``timeout`` seconds, then answers 503
    ``database-unavailable`` (at once while the database refuses connections:
    ``workforce_project.db_pool``). A connection attempt the database refuses is retried
    in the background for ``reconnect_timeout`` seconds, then left to the next request.
    None when ``WORKFORCE_DB_POOL`` is off, the database is not PostgreSQL, or
    ``CONN_MAX_AGE`` keeps connections itself (the pool refuses that)."""
    conf = settings.DATABASES["default"]
    if not settings.WORKFORCE_DB_POOL or not conf["ENGINE"].endswith("postgresql") or conf.get("CONN_MAX_AGE"):
        return None
    size = max(1, int(settings.WORKFORCE_WEB_CONCURRENCY))
    return {"min_size": min(2, size), "max_size": size, "timeout": 10, "reconnect_timeout": 3}


def enable_web_pool() -> bool:
    """Switch this process's default database to the pooled connections of
    ``web_pool_options()``, in an ``OutageAwarePool`` (``workforce_project.db_pool``: no
    connection the database closed is handed out, and requests answer at once while it
    is down); connections this thread holds are closed first (the next query takes one
    from the pool). Only for the web server: the task cluster forks its workers, and a
    pool's threads do not survive a fork. Returns whether it did."""
    options = web_pool_options()
    if options is None:
        return False
    # Imported here: psycopg_pool imports psycopg, which a process on SQLite never loads.
    from workforce_project.db_pool import OutageAwarePool

    connections.close_all()
    wrapper = connections["default"]
    # The same dict object as every thread's connection settings (ConnectionHandler).
    wrapper.settings_dict.setdefault("OPTIONS", {})["pool"] = options
    # Built as Django builds its pool (DatabaseWrapper.pool), which then uses this one.
    # The ignores: PostgreSQL's DatabaseWrapper internals, private Django API the stubs
    # leave out (issue 23 item 3 is to use none).
    kwargs = {**wrapper.get_connection_params(), "autocommit": True}
    configure = wrapper._configure_connection  # type: ignore[attr-defined]
    pool = OutageAwarePool(kwargs=kwargs, open=False, configure=configure, check=None, **options)
    wrapper._connection_pools[wrapper.alias] = pool  # type: ignore[attr-defined]
    return True
