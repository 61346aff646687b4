"""One deployment on several machines (docs/nodes.md): what ``WORKFORCE_MULTI_NODE``
declares, the setups refused under it, and the lock that lets several nodes start at once.

A node is a ``serve --no-cluster`` (a web node), a ``manage.py work`` (a worker node), or a
``serve`` (both on one machine). Nothing in a node's own settings shows that other
machines run beside it (a single machine may use PostgreSQL and Redis too), so the
deployment says so: ``WORKFORCE_MULTI_NODE=true`` on every node. Without it the defaults
hold (one machine, one cluster per database: ``workforce_project.cluster_guard``), and a
second cluster started on the same database from anywhere waits, then is refused, naming
this setting. With it, every node refuses at start what cannot be shared across machines
(``multi_node_problems``), each problem one line naming its fix.
"""

from __future__ import annotations

import fcntl
import os
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

EMBEDDED_MAIL_STORE = "mail.vault.embedded_store"
FIX = "(docs/nodes.md)"


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def _on_sqlite() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("sqlite3")


def _sqlite_lock_path() -> Path:
    return Path(f"{settings.DATABASES['default']['NAME']}.startup-lock")


def multi_node_problems() -> list[str]:
    """What makes this node's settings unable to work beside nodes on other machines, one
    line each naming the fix; empty when nothing does, or when ``WORKFORCE_MULTI_NODE`` is
    off (one machine: anything goes). Looks at the settings and the file system only
    (never the network):

    - SQLite: a file on one machine;
    - the ORM broker: a starting cluster hands itself every task another cluster has taken
      (``workforce.broker.ListeningORM.hand_back_taken``: one cluster per database);
    - no ``DJANGO_SECRET_KEY``: each node would make its own in its ``WORKFORCE_VAR_DIR``,
      and a task signed on one node is refused by another's workers;
    - the embedded mail vaults in a folder of this node's own (``WORKFORCE_VAULT_DIR``
      inside ``WORKFORCE_VAR_DIR``, its default) or in one that does not exist (a shared
      mount that is missing would be filled with mail no other node reads).
    """
    if not settings.WORKFORCE_MULTI_NODE:
        return []
    problems = []
    if _on_sqlite():
        problems.append(
            "WORKFORCE_MULTI_NODE=true needs PostgreSQL, not SQLite (a file on one machine): "
            f"set DATABASE_URL=postgres://USER@HOST:5432/DB on every node {FIX}"
        )
    if not isinstance(settings.Q_CLUSTER.get("redis"), str):
        problems.append(
            "WORKFORCE_MULTI_NODE=true needs the Redis broker, not the ORM broker (a starting cluster takes back "
            f"the tasks every other cluster holds): set WORKFORCE_BROKER_URL=redis://HOST:6379/0 on every node {FIX}"
        )
    if not os.environ.get("DJANGO_SECRET_KEY"):
        problems.append(
            "WORKFORCE_MULTI_NODE=true needs DJANGO_SECRET_KEY, the same on every node (each node would make its "
            f"own in its WORKFORCE_VAR_DIR, and refuse the tasks the others sign): set it on every node {FIX}"
        )
    if settings.WORKFORCE_MAIL_STORE == EMBEDDED_MAIL_STORE:
        vaults, var = Path(settings.WORKFORCE_VAULT_DIR), Path(settings.VAR_DIR)
        if _inside(vaults, var):
            problems.append(
                f"WORKFORCE_MULTI_NODE=true with the embedded mail vaults needs WORKFORCE_VAULT_DIR on a directory "
                f"every node mounts, outside this node's WORKFORCE_VAR_DIR ({vaults} is inside {var}): set it, or "
                f"keep mail on a forge with WORKFORCE_MAIL_STORE=mail.forgejo.forgejo_store {FIX}"
            )
        elif vaults.exists() and not vaults.is_dir():
            problems.append(f"WORKFORCE_VAULT_DIR ({vaults}) is not a directory: name the directory every node shares {FIX}")
        elif not vaults.is_dir():
            problems.append(
                f"WORKFORCE_VAULT_DIR ({vaults}) does not exist: mount the directory every node shares there, "
                f"or create it on the shared file system {FIX}"
            )
    return problems


def multi_node_warnings() -> list[str]:
    """What still works across machines but less well, one line each (``serve`` and
    ``work`` print them as ``warning:``); empty when ``WORKFORCE_MULTI_NODE`` is off."""
    if not settings.WORKFORCE_MULTI_NODE:
        return []
    warnings = []
    backend = settings.CACHES.get("default", {}).get("BACKEND", "")
    if backend.endswith("LocMemCache"):
        warnings.append(
            "the API's throttles and the login limits count on each web node apart (each node's own memory): "
            "set WORKFORCE_CACHE_URL=redis://HOST:6379/1 on every node to count them together"
        )
    return warnings


def _lock_key() -> int:
    return zlib.crc32(b"workforce start-up (migrate, open the tree)") & 0x7FFFFFFF


@contextmanager
def startup_lock(*, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the database's start-up lock for the block: nodes starting at once migrate and
    open the tree one after the other (Django's ``migrate`` is not safe to run twice at
    once; the second finds nothing left to do). On PostgreSQL a session advisory lock on
    a connection of its own; on SQLite an ``flock`` on ``<database file>.startup-lock``.
    ``on_wait()`` is called once when another node holds it."""
    conf = settings.DATABASES["default"]
    if conf["ENGINE"].endswith("postgresql"):
        import psycopg
        from django.db import connections

        params = connections["default"].get_connection_params()
        for key in ("cursor_factory", "context", "prepare_threshold"):
            params.pop(key, None)
        with psycopg.connect(**params, autocommit=True, application_name="workforce start-up lock") as conn:
            lock = _lock_key()
            tried = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
            if not (tried and tried[0]):
                if on_wait is not None:
                    on_wait()
                conn.execute("SELECT pg_advisory_lock(%s)", (lock,))
            try:
                yield
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
        return
    path = _sqlite_lock_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
