"""The web process's pool during a database outage (issue 22, item 12;
``workforce_project.db_pool``): a pooled connection the database ended is never handed
out (psycopg's pool, as Django builds it, handed it out and the request answered 500), and
while the database refuses connections a request is refused at once, not after the pool's
10 s timeout."""

from __future__ import annotations

import socket
import time

import psycopg
import pytest
from django.db import connection
from psycopg_pool import ConnectionPool, PoolTimeout

from tests.conftest import on_postgres
from workforce_project.db_pool import OutageAwarePool

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def params():
    if not on_postgres():
        pytest.skip("needs PostgreSQL")
    found = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        found.pop(key, None)
    return {**found, "autocommit": True}


def end_backend(params, pid: int) -> None:
    with psycopg.connect(**params) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for _ in range(100):  # gone from the server's list once it has ended
            if not other.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                return
            time.sleep(0.05)


def pooled_then_ended(pool_class, params):
    """A pool of one connection, which the database then ends; returns the pool and the
    connection it hands out next."""
    pool = pool_class(kwargs=params, min_size=1, max_size=1, timeout=10, reconnect_timeout=3, open=True)
    pool.wait()
    conn = pool.getconn()
    pid = conn.info.backend_pid
    pool.putconn(conn)
    end_backend(params, pid)
    return pool, pool.getconn(), pid


def test_a_pooled_connection_the_database_ended_is_never_handed_out(params):
    pool, conn, ended = pooled_then_ended(OutageAwarePool, params)
    try:
        assert conn.info.backend_pid != ended
        assert conn.execute("SELECT 1").fetchone() == (1,)
        pool.putconn(conn)
    finally:
        pool.close()


def test_control_the_stock_pool_hands_out_the_ended_connection(params):
    pool, conn, ended = pooled_then_ended(ConnectionPool, params)
    try:
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
        pool.putconn(conn)
    finally:
        pool.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_while_the_database_refuses_connections_a_request_is_refused_at_once(params):
    pool = OutageAwarePool(
        kwargs={**params, "port": closed_port()}, min_size=1, max_size=2, timeout=10, reconnect_timeout=3, open=True
    )
    try:
        for _ in range(3):  # how soon: bench/timeouts.py ("pool refusal", not the pool's 10 s)
            with pytest.raises(PoolTimeout):
                pool.getconn()
    finally:
        pool.close()
