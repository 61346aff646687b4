"""Break-it: WORKFORCE_DB_PREPARED (on by default) and a migration from another process.

A statement psycopg prepared on a connection fails ``cached plan must not change result
type`` once another process changes the type of a column it returns; the connection heals
itself (``workforce_project.prepared``)."""

from __future__ import annotations

import psycopg
import pytest
from django.db import NotSupportedError, connection, transaction

from workforce_project.deployment import enable_web_pool
from workforce_project.prepared import heal_stale_prepared

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

SELECT = "SELECT id, name FROM bk3_prepared WHERE id = %s"


@pytest.fixture
def table():
    assert connection.settings_dict["OPTIONS"].get("prepare_threshold") == 2
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bk3_prepared (id integer, name varchar(10))")
        cursor.execute("INSERT INTO bk3_prepared VALUES (1, 'a')")
    yield
    connection.close()
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bk3_prepared")


def select() -> list:
    with connection.cursor() as cursor:
        cursor.execute(SELECT, [1])
        return cursor.fetchall()


def prepare_then_alter_elsewhere(length: int = 20) -> None:
    """Run the select until this connection has prepared it, then change the type of a
    column it returns from another connection (a migration elsewhere: AlterField max_length)."""
    for _ in range(3):  # prepared from the second on
        assert select() == [(1, "a")]
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold", "pool"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as other:
        other.execute(f"ALTER TABLE bk3_prepared ALTER COLUMN name TYPE varchar({length})")


def test_a_column_type_changed_by_another_process_does_not_break_a_prepared_statement(table):
    prepare_then_alter_elsewhere()
    pid = connection.connection.info.backend_pid
    assert select() == [(1, "a")]  # autocommit: healed and run again, on the same connection
    assert select() == [(1, "a")]
    assert connection.connection.info.backend_pid == pid


def test_in_a_transaction_the_statement_fails_and_the_rollback_heals_the_connection(table):
    prepare_then_alter_elsewhere()
    pid = connection.connection.info.backend_pid
    with pytest.raises(NotSupportedError, match="cached plan must not change result type"):
        with transaction.atomic():
            select()  # the transaction is aborted: nothing can run it again
    assert select() == [(1, "a")]
    prepare_then_alter_elsewhere(30)
    with transaction.atomic():
        with pytest.raises(NotSupportedError), transaction.atomic():
            select()
        assert select() == [(1, "a")]  # healed by the rollback to the savepoint
    assert connection.connection.info.backend_pid == pid


def test_a_pooled_web_connection_heals_and_stays_in_the_pool(table, settings):
    settings.WORKFORCE_WEB_CONCURRENCY = 1  # one pooled connection: every request gets it
    assert enable_web_pool()
    try:
        prepare_then_alter_elsewhere()
        pid = connection.connection.info.backend_pid
        connection.close()  # the request ends: back to the pool, its prepared statements with it
        assert select() == [(1, "a")]
        assert connection.connection.info.backend_pid == pid
        connection.close()
        assert select() == [(1, "a")]
        assert connection.execute_wrappers.count(heal_stale_prepared) == 1
    finally:
        connection.close()
        connection.close_pool()
        connection.settings_dict["OPTIONS"].pop("pool", None)
