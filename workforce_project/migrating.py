"""The first migrate of an empty database, fast (docs/running.md "The first start").

Django applies migrations one by one, rebuilding its model state after every operation:
about 4 s of CPU for this project's 66 on an idle machine, 16 to 27 s on a busy one,
which was most of a first start. An empty database needs none of that history: its
tables are created straight from the migrations' final state, rendered once (as
``migrate --run-syncdb`` creates an app's tables from its models), and every migration
is recorded as applied (``migrate --fake``), in one transaction: about a tenth of the
time.

This is sound only when the migrations would build the same schema and do nothing else.
``tests/workforce_project/test_first_migrate.py`` checks the first on both databases;
``code_migrations`` checks the second: a plan that runs code (a ``RunPython`` or
``RunSQL`` not marked ``elidable``, other than the known no-ops on an empty database in
``EMPTY_DATABASE_NOOPS``) is migrated the usual way."""

from __future__ import annotations

from django.core.management import call_command
from django.core.management.sql import emit_post_migrate_signal
from django.db import DEFAULT_DB_ALIAS, connections, router, transaction
from django.db.migrations import Migration
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations import RunPython, RunSQL, SeparateDatabaseAndState
from django.db.migrations.operations.base import Operation

# Code that changes nothing in an empty database: auth's rewrites the permissions of
# proxy models that already exist (there are none yet).
EMPTY_DATABASE_NOOPS = frozenset({("auth", "0011_update_proxy_permissions")})


def _runs_code(operation: Operation) -> bool:
    if isinstance(operation, SeparateDatabaseAndState):
        return any(_runs_code(inner) for inner in operation.database_operations)
    if isinstance(operation, RunPython):
        return not operation.elidable and operation.code is not RunPython.noop
    if isinstance(operation, RunSQL):
        return not operation.elidable and operation.sql != RunSQL.noop
    return False


def code_migrations(plan: list[tuple[Migration, bool]]) -> list[str]:
    """The ``app.name`` of each migration in ``plan`` (a ``MigrationExecutor`` plan) that
    runs code the schema alone does not stand for (see the module's docstring)."""
    return [
        f"{migration.app_label}.{migration.name}"
        for migration, _backwards in plan
        if (migration.app_label, migration.name) not in EMPTY_DATABASE_NOOPS
        and any(_runs_code(operation) for operation in migration.operations)
    ]


def can_migrate_fast(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """True when the database ``alias`` has no table at all and its whole migration plan
    is schema (``code_migrations`` is empty). Raises ``DatabaseError`` when it cannot be
    reached."""
    connection = connections[alias]
    if connection.introspection.table_names():
        return False
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    return not code_migrations(plan)


def migrate_empty_database(alias: str = DEFAULT_DB_ALIAS) -> None:
    """Create every table of an empty database from the models of the migrations'
    final state (what the migrations would leave, to the column type: an auto-created
    many-to-many table's id is what they made it, not what the app's model says today),
    record every migration as applied, all or nothing (one transaction: both databases
    roll DDL back). Call only when ``can_migrate_fast(alias)``.

    Raises:
        DatabaseError: the database refused; nothing is left behind.
    """
    connection = connections[alias]
    state_apps = MigrationLoader(connection).project_state().apps  # rendered once
    # SQLite cannot turn its foreign-key checks off inside a transaction; the schema
    # editor needs them off, so they go off first and come back on after.
    checks_were_disabled = connection.disable_constraint_checking()
    try:
        with transaction.atomic(using=alias):
            with connection.schema_editor() as editor:
                for model in state_apps.get_models(include_auto_created=False):
                    if model._meta.can_migrate(connection) and router.allow_migrate_model(alias, model):
                        editor.create_model(model)  # and its many-to-many tables
            # Recorded as applied. A faked migration leaves the migrate command's project
            # state where it was (empty here), so the post_migrate it sends finds no model:
            # send it again with the final state's, or no content type and no permission
            # (``mail.send``) would exist.
            call_command("migrate", database=alias, fake=True, interactive=False, verbosity=0)
            emit_post_migrate_signal(0, False, alias, apps=state_apps)
    finally:
        if checks_were_disabled:
            connection.enable_constraint_checking()


def migrate(alias: str = DEFAULT_DB_ALIAS) -> bool:
    """Migrate the database ``alias``: an empty one the fast way
    (``migrate_empty_database``), any other with ``manage.py migrate``. Returns True
    when it took the fast way."""
    if can_migrate_fast(alias):
        migrate_empty_database(alias)
        return True
    call_command("migrate", database=alias, interactive=False, verbosity=0)
    return False
