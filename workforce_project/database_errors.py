"""One line instead of a traceback when a command meets a database it cannot use: a
PostgreSQL database that does not exist, a server that does not answer, or a database
that has not been migrated (docs/running.md "The database").

``manage.py`` sends every command's uncaught exception through ``explain_database_error``;
``serve`` uses it for the database errors it catches itself."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from workforce_project.deployment import describe_database

MIGRATE = "python manage.py migrate"
# The commands that apply the migrations at start-up (``serve`` and ``work``, as
# ``serve.Command._start_up`` does): the hint names the one running, else ``serve``.
SELF_MIGRATING = ("serve", "work")

# The messages each backend gives (psycopg 3 and sqlite3), when the SQLSTATE is missing
# (a failed connection carries none).
_NO_DATABASE = re.compile(r'database "(?P<name>[^"]+)" does not exist')
_NO_TABLE = re.compile(r"no such table: \S+|relation \"[^\"]+\" does not exist")
_UNREACHABLE = re.compile(
    r"connection refused|could not connect|connection failed|timeout expired|unable to open database file", re.I
)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)


def create_database_hint(conf: dict) -> str:
    """How to create the PostgreSQL database ``conf`` (a ``DATABASES`` entry) names:
    a ``createdb`` command line with its host, port and user."""
    parts = ["createdb"]
    if conf.get("HOST"):
        parts += ["-h", str(conf["HOST"])]
    if conf.get("PORT"):
        parts += ["-p", str(conf["PORT"])]
    if conf.get("USER"):
        parts += ["-U", str(conf["USER"])]
    parts.append(str(conf.get("NAME")))
    return " ".join(parts)


def unapplied_migrations(alias: str = DEFAULT_DB_ALIAS) -> tuple[int, int]:
    """``(unapplied, total)``: how many of the project's migrations the database
    ``alias`` has not applied, of how many. Raises ``DatabaseError`` when it cannot be
    reached."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[alias])
    targets = executor.loader.graph.leaf_nodes()
    plan = executor.migration_plan(targets)
    return len(plan), len(executor.loader.graph.nodes)


def _migrates_itself(command: str | None) -> str:
    """``"(work migrates it itself)"``: the command that would have migrated the database
    by itself, ``command`` when it is one of ``SELF_MIGRATING``, else ``serve``."""
    return f"({command if command in SELF_MIGRATING else 'serve'} migrates it itself)"


def explain_database_error(exc: BaseException, *, alias: str = DEFAULT_DB_ALIAS, command: str | None = None) -> str | None:
    """One line saying what is wrong with the database and what to do, for ``exc`` (or an
    exception it was raised from) when it is one of:

    - a PostgreSQL database that does not exist: names it, where, and the ``createdb``
      line that makes it;
    - a database server that cannot be reached: names it and the driver's first line;
    - a missing table while migrations are unapplied: names the database, how many
      migrations it lacks, and ``python manage.py migrate``.

    ``command`` is the ``manage.py`` command that met it (``"work"``): the advice to migrate
    names it when it migrates by itself (``serve``, ``work``), else ``serve``.

    None for anything else (a missing table on a fully migrated database is a bug, and
    keeps its traceback).
    """
    chain = _chain(exc)
    if not any(isinstance(e, DatabaseError) or type(e).__module__.startswith(("psycopg", "sqlite3")) for e in chain):
        return None
    conf = settings.DATABASES[alias]
    where = describe_database(conf)
    text = "\n".join(str(e) for e in chain)
    missing = _NO_DATABASE.search(text)
    if missing or any(getattr(e, "sqlstate", None) == "3D000" for e in chain):
        name = missing.group("name") if missing else conf.get("NAME")
        return (
            f'the PostgreSQL database "{name}" does not exist ({where}): create it with '
            f"`{create_database_hint({**conf, 'NAME': name})}`, then run `{MIGRATE}` {_migrates_itself(command)}"
        )
    if _UNREACHABLE.search(text) and not _NO_TABLE.search(text):
        return f"cannot reach the database ({where}): {_first_line(chain[-1])}"
    if _NO_TABLE.search(text) or any(getattr(e, "sqlstate", None) == "42P01" for e in chain):
        try:
            connections[alias].close()  # a failed transaction on PostgreSQL would refuse the next query
            unapplied, total = unapplied_migrations(alias)
        except DatabaseError:
            return None
        if unapplied:
            return (
                f"the database ({where}) is not migrated ({unapplied} of {total} migrations not applied): "
                f"run `{MIGRATE}` first {_migrates_itself(command)}"
            )
    return None
