"""A PostgreSQL connection whose prepared statements a schema change made stale heals
itself (``WORKFORCE_DB_PREPARED``; docs/nodes.md "The command each node runs", a rolling upgrade).

psycopg prepares a statement a connection sends twice (``prepare_threshold``). When
another process changes the type of a column such a statement returns (a node running a
migration whose ``AlterField`` changes ``max_length``), PostgreSQL refuses to run it:
``cached plan must not change result type`` (SQLSTATE 0A000). psycopg forgets the
statements it prepared (and deallocates them on the server) on a rollback, its own or to a
savepoint, so a statement that failed inside a transaction heals when that transaction is
rolled back; but a statement run in autocommit is rolled back by nothing, and it failed on
that connection, pooled or not, until the connection closed.

``on_connection_created`` gives each connection an execute wrapper
(``heal_stale_prepared``): on exactly that error, outside a transaction, it has psycopg
forget and deallocate what it prepared (an empty transaction it rolls back) and runs the
statement once more. Nothing else costs a statement.
"""

from __future__ import annotations

from typing import Any

# PostgreSQL refusing a prepared statement whose result columns changed type: SQLSTATE
# 0A000 (feature_not_supported), raised by plancache.c's RevalidateCachedQuery (its
# message, in English; the function's name is never translated).
STALE_PLAN_SQLSTATE = "0A000"
STALE_PLAN_MESSAGE = "cached plan must not change result type"
STALE_PLAN_FUNCTION = "RevalidateCachedQuery"


def is_stale_plan(exc: BaseException) -> bool:
    """Whether ``exc`` (Django's wrapped database error, or psycopg's own) is PostgreSQL
    refusing a prepared statement whose result columns changed type."""
    import psycopg  # here: a process on SQLite never loads it (and a database error loaded it)

    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    if not isinstance(cause, psycopg.Error) or cause.sqlstate != STALE_PLAN_SQLSTATE:
        return False
    return cause.diag.message_primary == STALE_PLAN_MESSAGE or cause.diag.source_function == STALE_PLAN_FUNCTION


def heal_stale_prepared(execute, sql, params, many, context) -> Any:
    """Django execute wrapper (``connection.execute_wrappers``): runs the statement; when it
    fails because a statement psycopg prepared on this connection went stale (``is_stale_plan``)
    and the connection is in no transaction (autocommit: the failed statement changed
    nothing), rolls back an empty transaction, which makes psycopg clear its prepared
    statements here and on the server (``DEALLOCATE ALL``), and runs the statement once
    more. Inside a transaction the error is raised as it is: the transaction is aborted,
    and its rollback clears them. Raises what the statement raises."""
    try:
        return execute(sql, params, many, context)
    except Exception as exc:
        if not is_stale_plan(exc):
            raise
        from psycopg.pq import TransactionStatus

        pg = context["connection"].connection
        if pg is None or pg.info.transaction_status != TransactionStatus.IDLE:
            raise
        with pg.transaction(force_rollback=True):
            pass
    return execute(sql, params, many, context)


def on_connection_created(sender, connection, **kwargs) -> None:
    """``connection_created`` receiver: a PostgreSQL connection that prepares statements
    (``OPTIONS["prepare_threshold"]``) gets ``heal_stale_prepared`` once (a pooled
    connection's Django wrapper is connected again for every request)."""
    if connection.vendor != "postgresql" or connection.settings_dict["OPTIONS"].get("prepare_threshold") is None:
        return
    if heal_stale_prepared not in connection.execute_wrappers:
        # First, the outermost: ``connection.execute_wrapper()`` pops the last on its exit.
        connection.execute_wrappers.insert(0, heal_stale_prepared)
