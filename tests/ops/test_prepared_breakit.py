"""Break-it: WORKFORCE_DB_PREPARED (on by default) and a migration from another process."""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.xfail(
    strict=True,
    reason="break-it: a prepared statement whose result column changed type (a migration by another node "
    "or process) fails 'cached plan must not change result type' on that connection until it is closed",
)
def test_a_column_type_changed_by_another_process_does_not_break_a_prepared_statement():
    assert connection.settings_dict["OPTIONS"].get("prepare_threshold") == 2
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE bk3_prepared (id integer, name varchar(10))")
        cursor.execute("INSERT INTO bk3_prepared VALUES (1, 'a')")
    try:
        for _ in range(3):  # prepared from the second on
            with connection.cursor() as cursor:
                cursor.execute("SELECT id, name FROM bk3_prepared WHERE id = %s", [1])
                assert cursor.fetchall() == [(1, "a")]
        params = connection.get_connection_params()
        params.pop("cursor_factory", None), params.pop("context", None), params.pop("prepare_threshold", None)
        with psycopg.connect(**params, autocommit=True) as other:  # a migration elsewhere (AlterField max_length)
            other.execute("ALTER TABLE bk3_prepared ALTER COLUMN name TYPE varchar(20)")
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, name FROM bk3_prepared WHERE id = %s", [1])
            assert cursor.fetchall() == [(1, "a")]
    finally:
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bk3_prepared")
