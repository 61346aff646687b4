"""The first ten minutes (issue 25 items 11 and 12): a command on a database it cannot
use says so in one line (not migrated: run ``manage.py migrate``; a PostgreSQL database
that does not exist: its name and how to create it), and ``serve``'s first migrate of an
empty database makes the same schema as ``manage.py migrate``, the fast way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import OperationalError, connection

from workforce_project.database_errors import create_database_hint, explain_database_error
from workforce_project.migrating import code_migrations

REPO = Path(__file__).resolve().parents[2]


def _pg_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "manage.py"), *args], cwd=REPO, env=_env(env), capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def empty_database(tmp_path) -> Iterator:
    """``empty_database(tag) -> env``: env vars giving a subprocess an empty database of
    the engine under test (a new SQLite file, or a new PostgreSQL database dropped
    afterwards)."""
    made: list[str] = []
    url = _pg_url()
    admin = urlunsplit(urlsplit(url)._replace(path="/postgres")) if url else ""

    def make(tag: str) -> dict[str, str]:
        env = {"WORKFORCE_VAR_DIR": str(tmp_path / f"var_{tag}")}
        if url is None:
            return env
        import psycopg

        name = f"wf_first_{tag}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return {**env, "DATABASE_URL": urlunsplit(urlsplit(url)._replace(path=f"/{name}"))}

    yield make
    if made:
        import psycopg

        with psycopg.connect(admin, autocommit=True) as conn:
            for name in made:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def one_line(done: subprocess.CompletedProcess) -> str:
    """The command's whole stderr, checked to be one line (no traceback)."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def migration_count() -> int:
    from django.db.migrations.loader import MigrationLoader

    return len(MigrationLoader(None, ignore_no_migrations=True).graph.nodes)


@pytest.mark.parametrize("command", [["open_mailboxes"], ["sweep"], ["add_member", "u_1", "--create"]])
def test_a_command_on_an_unmigrated_database_says_to_migrate_in_one_line(empty_database, command):
    env = empty_database("unmigrated")
    done = manage(env, *command)
    assert done.returncode == 1
    line = one_line(done)
    total = migration_count()
    assert f"is not migrated ({total} of {total} migrations not applied): run `python manage.py migrate` first" in line, line
    where = "sqlite3 " if _pg_url() is None else "postgresql wf_first_unmigrated_"
    assert f"the database ({where}" in line


def test_a_postgresql_database_that_does_not_exist_is_one_line_naming_it(tmp_path):
    url = _pg_url()
    if url is None:
        pytest.skip("needs a PostgreSQL server (DATABASE_URL)")
    name = f"wf_first_missing_{uuid.uuid4().hex[:8]}"
    env = {"WORKFORCE_VAR_DIR": str(tmp_path / "var"), "DATABASE_URL": urlunsplit(urlsplit(url)._replace(path=f"/{name}"))}
    for command, itself in (
        (["open_mailboxes"], "serve"),
        (["migrate"], "serve"),
        (["serve", "--addr", "127.0.0.1:0"], "serve"),
        (["serve", "--addr", "127.0.0.1:0", "--no-cluster"], "serve"),
        (["work"], "work"),  # a worker node migrates by itself too: the advice names it
    ):
        done = manage(env, *command)
        assert done.returncode == 1, done.stdout + done.stderr
        line = one_line(done)
        parts = urlsplit(url)
        assert line.removeprefix("CommandError: ") == (
            f'the PostgreSQL database "{name}" does not exist (postgresql {name} on {parts.hostname}:{parts.port} as {parts.username}): '
            f"create it with `createdb -h {parts.hostname} -p {parts.port} -U {parts.username} {name}`, "
            f"then run `python manage.py migrate` ({itself} migrates it itself)"
        ), command


@pytest.mark.parametrize(
    ("command", "itself"), [("work", "work"), ("serve", "serve"), ("open_mailboxes", "serve"), (None, "serve")]
)
def test_the_advice_to_migrate_names_the_running_command_when_it_migrates_by_itself(command, itself, monkeypatch):
    """``serve`` and ``work`` migrate at start-up: each names itself; any other command
    names ``serve``."""
    from django.conf import settings

    from workforce_project.deployment import describe_database

    conf = settings.DATABASES["default"]
    where = describe_database(conf)
    missing = OperationalError('connection failed: FATAL:  database "wf_gone" does not exist')
    assert explain_database_error(missing, command=command) == (
        f'the PostgreSQL database "wf_gone" does not exist ({where}): create it with '
        f"`{create_database_hint({**conf, 'NAME': 'wf_gone'})}`, then run `python manage.py migrate` ({itself} migrates it itself)"
    )
    monkeypatch.setattr("workforce_project.database_errors.unapplied_migrations", lambda alias: (3, 74))
    unmigrated = OperationalError("no such table: workforce_session")
    assert explain_database_error(unmigrated, command=command) == (
        f"the database ({where}) is not migrated (3 of 74 migrations not applied): "
        f"run `python manage.py migrate` first ({itself} migrates it itself)"
    )


def test_the_createdb_hint_names_only_what_is_set():
    assert create_database_hint({"NAME": "wf"}) == "createdb wf"
    assert create_database_hint({"NAME": "wf", "HOST": "db", "PORT": 5433, "USER": "app", "PASSWORD": "x"}) == (
        "createdb -h db -p 5433 -U app wf"
    )


@pytest.mark.django_db
def test_a_missing_table_on_a_migrated_database_keeps_its_traceback():
    """Only an unmigrated database is explained: on a migrated one a missing table is a
    bug, not a step the person skipped."""
    with pytest.raises(OperationalError if connection.vendor == "sqlite" else Exception) as failed:
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_here")
    assert explain_database_error(failed.value) is None
    assert explain_database_error(ValueError("no such table: x")) is None  # not a database error


def test_the_migrations_run_no_code_an_empty_database_needs():
    """The fast first migrate (workforce_project.migrating) skips every migration's code:
    sound only while none runs any. A new data migration must be marked elidable (it
    does nothing on an empty database) or the fast way is not taken."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    plan = [(loader.graph.nodes[key], False) for key in loader.graph.leaf_nodes() for key in loader.graph.forwards_plan(key)]
    assert code_migrations(plan) == []


DUMP = r"""
import json, os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
import django
django.setup()
from django.db import connection
schema = {}
with connection.cursor() as cursor:
    for table in sorted(connection.introspection.table_names(cursor)):
        columns = sorted(
            (c.name, c.type_code if connection.vendor == "postgresql" else str(c.type_code), c.null_ok, str(c.default))
            for c in connection.introspection.get_table_description(cursor, table)
        )
        constraints = sorted(
            json.dumps({k: v for k, v in info.items()}, sort_keys=True, default=str)
            for name, info in connection.introspection.get_constraints(cursor, table).items()
        )
        schema[table] = {"columns": columns, "constraints": constraints}
    if connection.vendor == "sqlite":
        cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
    else:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname")
    schema["<indexes>"] = cursor.fetchall()
    if connection.vendor == "postgresql":
        cursor.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
        )
        schema["<constraints>"] = cursor.fetchall()
    cursor.execute("SELECT app, name FROM django_migrations ORDER BY app, name")
    schema["<applied>"] = cursor.fetchall()
    # What post_migrate writes: the content types and the permissions (mail.send).
    cursor.execute("SELECT app_label, model FROM django_content_type ORDER BY 1, 2")
    schema["<content types>"] = cursor.fetchall()
    cursor.execute(
        "SELECT c.app_label, p.codename FROM auth_permission p JOIN django_content_type c ON c.id = p.content_type_id "
        "ORDER BY 1, 2"
    )
    schema["<permissions>"] = cursor.fetchall()
print(json.dumps(schema, default=str))
"""

FAST = r"""
import os
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
import django
django.setup()
from workforce_project.migrating import can_migrate_fast, migrate
assert can_migrate_fast()
assert migrate() is True
assert not can_migrate_fast()
"""


def _python(env: dict[str, str], code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(env), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_fast_first_migrate_makes_the_schema_migrate_makes(empty_database):
    """Every table, column (type, null, default), constraint and index, and every
    migration recorded as applied: the same after ``manage.py migrate`` as after the
    fast way, on the engine under test."""
    slow, fast = empty_database("slow"), empty_database("fast")
    done = manage(slow, "migrate", "-v0")
    assert done.returncode == 0, done.stderr
    _python(fast, FAST)
    by_migrate, by_fast = json.loads(_python(slow, DUMP)), json.loads(_python(fast, DUMP))
    assert len(by_migrate["<applied>"]) == migration_count() and "mailboxes_line" in by_migrate
    assert ["mail", "send"] in by_migrate["<permissions>"]
    assert sorted(by_fast) == sorted(by_migrate)
    for table in by_migrate:
        assert by_fast[table] == by_migrate[table], table
    # And the database it made is one migrate considers up to date.
    done = manage(fast, "migrate", "--check")
    assert done.returncode == 0, done.stdout + done.stderr
