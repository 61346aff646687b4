"""Out of database connections: a JSON 503 ``database-unavailable`` with Retry-After,
never an HTML 500; an ordinary query error is still a 500. The connection check warns
when serve can hold more connections than PostgreSQL allows."""

from __future__ import annotations

import socket

import psycopg
import pytest
from django.core import checks
from django.db import OperationalError, connection
from rest_framework.test import APIClient

from tests.conftest import MEMBER, on_postgres
from workforce_project.checks import check_database_connections
from workforce_project.deployment import postgres_connection_allowance

LIMITED_ROLE = "wf_ops_limited"
POST_URL = "/api/flows/mailbox/eng.standup/actions/post"


@pytest.fixture
def limited_role():
    """A PostgreSQL role allowed one connection, and that one connection held open:
    whoever connects next as it is refused ("too many connections for role")."""
    if not on_postgres():
        pytest.skip("needs PostgreSQL")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP ROLE IF EXISTS {LIMITED_ROLE}")
        cursor.execute(f"CREATE ROLE {LIMITED_ROLE} LOGIN CONNECTION LIMIT 1")
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    params.pop("prepare_threshold", None)
    held = psycopg.connect(**{**params, "user": LIMITED_ROLE})
    try:
        yield LIMITED_ROLE
    finally:
        held.close()
        connection.close()
        with connection.cursor() as cursor:
            cursor.execute(f"DROP ROLE IF EXISTS {LIMITED_ROLE}")


@pytest.fixture
def connect_as(monkeypatch):
    """``connect_as(**settings)``: this thread's next connection uses those settings
    (``USER``, ``PORT``...); the old ones are back after the test."""

    def _switch(**overrides):
        connection.close()
        for key, value in overrides.items():
            monkeypatch.setitem(connection.settings_dict, key, value)

    yield _switch
    connection.close()
    monkeypatch.undo()


def assert_database_unavailable(response):
    assert response.status_code == 503, response.content
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"] == "2"
    body = response.json()
    assert body["requestId"] is None and body["status"] == "failed"
    assert body["error"]["reason"] == "database-unavailable"
    assert body["error"]["message"].startswith("database-unavailable: ")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_refused_connection_answers_json_503_with_retry_after(open_tree, limited_role, connect_as):
    open_tree()
    connect_as(USER=limited_role)
    client = APIClient()
    assert_database_unavailable(client.post(POST_URL, {"userId": MEMBER, "input": {"body": "hi"}}, format="json"))
    assert_database_unavailable(client.get("/api/mailboxes/eng.standup/transcript"))


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_database_that_is_down_answers_json_503(open_tree, connect_as):
    if not on_postgres():
        pytest.skip("needs PostgreSQL (the SQLite test database lives in memory)")
    open_tree()
    connect_as(HOST="127.0.0.1", PORT=closed_port())
    assert_database_unavailable(APIClient().post(POST_URL, {"userId": MEMBER, "input": {"body": "hi"}}, format="json"))


@pytest.mark.django_db(transaction=True)
def test_an_error_on_an_open_connection_is_not_a_503(open_tree, monkeypatch):
    open_tree()

    def fail(**kwargs):
        connection.ensure_connection()
        raise OperationalError("canceling statement due to statement timeout")

    monkeypatch.setattr("workforce.api.views.do_run_action", fail)
    client = APIClient(raise_request_exception=False)
    response = client.post(POST_URL, {"userId": MEMBER, "input": {"body": "hi"}}, format="json")
    assert response.status_code == 500


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_connection_check_warns_when_serve_can_hold_more_than_postgres_allows(settings):
    if not on_postgres():
        pytest.skip("needs PostgreSQL")
    allowed = postgres_connection_allowance()
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int")
        assert allowed == cursor.fetchone()[0]
    from workforce.sweepers import sweeper_threads

    settings.Q_CLUSTER = {**settings.Q_CLUSTER, "workers": 4, "orm": "default"}
    threads = sweeper_threads()
    assert threads >= 2  # the plain sweeps' thread and the round deadlines' timer
    # The web pool and its streams' LISTEN; each worker's own and its sweeper threads';
    # the sentinel, the monitor, the pusher and the pusher's LISTEN; the cluster lock's.
    others = 1 + 4 * (1 + threads) + 3 + 1 + 1
    settings.WORKFORCE_WEB_CONCURRENCY = allowed - others  # exactly what it allows
    assert check_database_connections() == []
    settings.WORKFORCE_WEB_CONCURRENCY = allowed - others + 1
    (warning,) = check_database_connections()
    assert isinstance(warning, checks.Warning) and warning.id == "workforce_project.W001"
    assert warning.msg == (
        f"serve can hold {allowed + 1} database connections ({allowed - others + 2} for the web server + "
        f"{4 * (1 + threads)} for the cluster workers and their sweeper threads + 5 for the cluster's other "
        f"processes; WORKFORCE_WEB_CONCURRENCY {allowed - others + 1}, 4 cluster workers) "
        f"but PostgreSQL allows this role {allowed}."
    )


@pytest.mark.django_db
def test_the_connection_check_says_nothing_on_sqlite(settings):
    if on_postgres():
        pytest.skip("the SQLite case")
    settings.WORKFORCE_WEB_CONCURRENCY = 100_000
    assert check_database_connections() == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_connection_check_does_not_crash_without_a_database(settings, connect_as):
    if not on_postgres():
        pytest.skip("needs PostgreSQL")
    connect_as(HOST="127.0.0.1", PORT=closed_port())
    settings.WORKFORCE_WEB_CONCURRENCY = 100_000
    assert check_database_connections() == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_connection_the_database_ended_under_the_request_answers_503_not_500(open_tree, monkeypatch):
    """What a PostgreSQL restart does to a request holding a connection (issue 22, item 12):
    its next query fails on a connection the server closed. It answered 500 ``internal-error``."""
    if not on_postgres():
        pytest.skip("needs PostgreSQL")
    open_tree()
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)

    def ended_under_it(**kwargs):
        connection.ensure_connection()
        pid = connection.connection.info.backend_pid
        with psycopg.connect(**params, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    monkeypatch.setattr("workforce.api.views.do_run_action", ended_under_it)
    client = APIClient(raise_request_exception=False)
    try:
        assert_database_unavailable(client.post(POST_URL, {"userId": MEMBER, "input": {"body": "hi"}}, format="json"))
    finally:
        connection.close()  # the ended one: the test's teardown opens another
