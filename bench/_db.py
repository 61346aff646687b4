"""Benchmarks run Django against a throwaway database of the configured engine: a temp
SQLite file by default, a fresh PostgreSQL database when DATABASE_URL names one."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]

# The API's throttles (workforce.api.throttles): a load bench measures the server, not its
# rate limits, so they are off unless the environment sets them.
THROTTLE_SETTINGS = (
    "WORKFORCE_THROTTLE_USER",
    "WORKFORCE_THROTTLE_ORG",
    "WORKFORCE_THROTTLE_READ_USER",
    "WORKFORCE_THROTTLE_READ_ORG",
)


def no_throttles(env=None):
    """Turn the API's throttles off in ``env`` (default ``os.environ``) where it sets no
    rate of its own, and the backlog bound (``WORKFORCE_BACKLOG_LIMIT``: a flood bench
    measures what piles up); returns ``env``. ``bench/saturation.py`` keeps the bound."""
    env = os.environ if env is None else env
    for name in THROTTLE_SETTINGS:
        env.setdefault(name, "")
    env.setdefault("WORKFORCE_BACKLOG_LIMIT", "0")
    return env


@contextlib.contextmanager
def scratch_postgres(url: str):
    """Create an empty PostgreSQL database on the server ``url`` names (any database on
    it: the admin connection goes to ``postgres``), yield its URL, and drop it (also on
    Ctrl-C; ``WITH (FORCE)`` ends connections still open to it)."""
    import psycopg

    name = f"wf_bench_{uuid.uuid4().hex[:8]}"
    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def throwaway_database():
    """Point Django at an empty database, migrate it, yield, and drop it."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings_test")
    url = os.environ.get("DATABASE_URL", "")
    with contextlib.ExitStack() as stack:
        if url.startswith(("postgres://", "postgresql://")):
            os.environ["DATABASE_URL"] = stack.enter_context(scratch_postgres(url))
        else:
            os.environ["WORKFORCE_VAR_DIR"] = tempfile.mkdtemp(prefix="wf_bench_")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", interactive=False, verbosity=0)
        try:
            yield connection
        finally:
            connection.close()


class ServerDatabase:
    """A server process's own database, read from the bench with plain SQL (``%s``
    placeholders): a SQLite file under ``tmp/var``, or a fresh PostgreSQL database on
    the loopback server ``pg_base`` names, dropped by ``drop``.

    Args:
        kind: ``"sqlite"`` or ``"postgres"``.
        tmp: the bench's scratch folder; the server's ``WORKFORCE_VAR_DIR`` is ``tmp/var``.
        pg_base: a ``postgres://`` URL on loopback (any database: the admin connection
            goes to ``postgres``).
        prefix: the PostgreSQL database name's prefix (``wf_breakit``).

    ``env`` is what the server's environment needs to use it.

    Raises:
        SystemExit: ``pg_base`` is not on loopback.
    """

    def __init__(self, kind: str, tmp: Path, pg_base: str, *, prefix: str = "wf_bench"):
        self.kind = kind
        self.admin = self.url = None
        var = tmp / "var"
        if kind == "sqlite":
            self.path = var / "workforce.sqlite3"
            self.env = {"WORKFORCE_VAR_DIR": str(var)}
            return
        import psycopg

        parts = urlsplit(pg_base)
        if parts.hostname not in ("127.0.0.1", "::1", "localhost"):
            raise SystemExit(f"--pg-url must be on loopback, not {parts.hostname}")
        self.name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        self.admin = urlunsplit(parts._replace(path="/postgres"))
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.name}"')
        self.url = urlunsplit(parts._replace(path=f"/{self.name}"))
        self.env = {"DATABASE_URL": self.url, "WORKFORCE_VAR_DIR": str(var)}

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows ``sql`` selects (none while the SQLite file does not exist yet)."""
        if self.kind == "sqlite":
            if not self.path.exists():
                return []
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                return conn.execute(sql.replace("%s", "?"), params).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.url) as conn:
            return conn.execute(sql, params).fetchall()

    def drop(self) -> None:
        """Drop the PostgreSQL database (``WITH (FORCE)``); once; nothing for SQLite."""
        if self.admin:
            import psycopg

            with psycopg.connect(self.admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
            self.admin = None


def start_cluster(env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """Start ``manage.py qcluster`` in its own process group (so a bench can kill the
    whole cluster), logging to a temp file. Returns the process and the log's path."""
    log = Path(tempfile.mkdtemp(prefix="wf_bench_log_")) / "cluster.log"
    cluster = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "qcluster"],
        cwd=REPO,
        env=dict(env if env is not None else os.environ),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return cluster, log


def _proc_stat(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()  # fields from the state (3rd) on


def cluster_cpu(pid: int, workers: int) -> dict[str, float]:
    """CPU seconds so far (user + system, from ``/proc``) of a running ``qcluster`` whose
    main process is ``pid``, by role: ``main``, ``sentinel``, ``workers`` (their sum),
    ``monitor``, ``pusher``. django-q2's sentinel forks its ``workers`` workers first,
    then the monitor, then the pusher, so its children are told apart by start time (a
    worker reincarnated later would be counted as the pusher: the benches' clusters
    recycle none). Processes not found count 0."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[tuple[int, int]]] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        rest = _proc_stat(int(entry))
        if rest is None:
            continue
        children.setdefault(int(rest[1]), []).append((int(rest[19]), int(entry)))  # (starttime, pid)
        cpu[int(entry)] = (int(rest[11]) + int(rest[12])) / tick  # utime + stime
    roles = {"main": cpu.get(pid, 0.0), "sentinel": 0.0, "workers": 0.0, "monitor": 0.0, "pusher": 0.0}
    sentinels = sorted(children.get(pid, []))
    if not sentinels:
        return roles
    sentinel = sentinels[0][1]
    roles["sentinel"] = cpu.get(sentinel, 0.0)
    kids = [p for _, p in sorted(children.get(sentinel, []))]
    roles["workers"] = sum(cpu.get(p, 0.0) for p in kids[:workers])
    # A worker's sweeper threads are part of the worker process: counted there.
    if len(kids) > workers:
        roles["monitor"] = cpu.get(kids[workers], 0.0)
    if len(kids) > workers + 1:
        roles["pusher"] = cpu.get(kids[workers + 1], 0.0)
    return roles


def pg_sessions(url: str) -> int | None:
    """Sessions (connections) PostgreSQL has established to the database ``url`` names
    so far (``pg_stat_database.sessions``, PostgreSQL 14+), counting the one this asks
    with; None when it cannot say. A backend reports its session to the statistics
    within about a second: read twice with a pause between to count a phase."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()").fetchone()
    except Exception:  # noqa: BLE001  (an older server, or no such column: no figure)
        return None
    return int(row[0]) if row else None
