"""Benchmarks run Django against a throwaway database of the configured engine: a temp
SQLite file by default, a fresh PostgreSQL database when DATABASE_URL names one."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

REPO = Path(__file__).resolve().parents[1]


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
