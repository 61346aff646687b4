"""``serve`` at start-up: no open bind without auth unless --insecure; a broker that
cannot be reached stops it; it says which database and broker it uses."""

from __future__ import annotations

import re
import socket
from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from workforce_project.deployment import describe_broker, describe_database, describe_statements, is_loopback, web_pool_options


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.mark.parametrize("addr", ["0.0.0.0:8000", "192.0.2.7:8000", "[::]:8000", "example.org:80"])
def test_without_auth_a_non_loopback_address_is_refused(addr, settings):
    settings.WORKFORCE_AUTH = "none"
    with pytest.raises(CommandError) as refused:
        call_command("serve", addr=addr, stdout=StringIO())
    message = str(refused.value)
    assert f"refusing to serve {addr} with WORKFORCE_AUTH=none" in message  # an IPv6 host in brackets
    assert "WORKFORCE_AUTH=token" in message and "--insecure" in message


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"])
def test_loopback_counts_as_loopback(host):
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.1", "example.org", ""])
def test_anything_else_is_not_loopback(host):
    assert not is_loopback(host)


def test_insecure_or_token_auth_gets_past_the_bind_check(settings, monkeypatch):
    # Past the bind check serve pings the broker: an unreachable one stops it right there.
    monkeypatch.setitem(settings.Q_CLUSTER, "redis", f"redis://127.0.0.1:{closed_port()}/2")
    for auth, extra in (("none", {"insecure": True}), ("token", {})):
        settings.WORKFORCE_AUTH = auth
        with pytest.raises(CommandError, match="task broker"):
            call_command("serve", addr="0.0.0.0:8000", stdout=StringIO(), **extra)


def test_an_unreachable_broker_stops_serve_naming_it(settings, monkeypatch):
    port = closed_port()
    monkeypatch.setitem(settings.Q_CLUSTER, "redis", f"redis://:hunter2@127.0.0.1:{port}/2?socket_connect_timeout=5")
    out = StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("serve", addr="127.0.0.1:8000", stdout=out)
    message = str(refused.value)
    assert f"the task broker (redis 127.0.0.1:{port}/2) cannot be reached" in message
    assert message.endswith(". Start it, or unset WORKFORCE_BROKER_URL to use the ORM broker.") and ".." not in message
    assert "hunter2" not in message and "hunter2" not in out.getvalue()
    assert f"broker: redis 127.0.0.1:{port}/2\n" in out.getvalue()
    assert f"database: {describe_database()}\n" in out.getvalue()


def test_the_database_and_broker_are_named_without_passwords(settings, monkeypatch):
    conf = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "wf",
        "HOST": "db.internal",
        "PORT": 5433,
        "USER": "app",
        "PASSWORD": "s3cret",
    }
    assert describe_database(conf) == "postgresql wf on db.internal:5433 as app"
    monkeypatch.delitem(settings.Q_CLUSTER, "redis", raising=False)
    monkeypatch.setitem(settings.Q_CLUSTER, "orm", "default")
    assert describe_broker() == "django-q2 ORM broker (tasks are rows in the database above)"


def test_start_up_says_whether_statements_are_prepared_on_postgresql():
    pg = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "wf",
        "OPTIONS": {"server_side_binding": True, "prepare_threshold": 2},
    }
    assert describe_statements(pg) == (
        "prepared on the server (WORKFORCE_DB_PREPARED=false turns it off for a pooler that cannot carry them)"
    )
    assert describe_statements({**pg, "OPTIONS": {}}) == "sent as text, nothing prepared (WORKFORCE_DB_PREPARED=false)"
    assert describe_statements({"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}) is None


def test_the_web_pool_is_sized_from_web_concurrency(monkeypatch):
    conf = {"ENGINE": "django.db.backends.postgresql", "CONN_MAX_AGE": 0}
    fake = SimpleNamespace(DATABASES={"default": conf}, WORKFORCE_WEB_CONCURRENCY=12, WORKFORCE_DB_POOL=True)
    monkeypatch.setattr("workforce_project.deployment.settings", fake)
    assert web_pool_options() == {"min_size": 2, "max_size": 12, "timeout": 10, "reconnect_timeout": 3}
    fake.WORKFORCE_DB_POOL = False
    assert web_pool_options() is None
    fake.WORKFORCE_DB_POOL = True
    conf["CONN_MAX_AGE"] = 60  # persistent connections: Django's pool refuses them
    assert web_pool_options() is None
    conf.update(ENGINE="django.db.backends.sqlite3", CONN_MAX_AGE=0)
    assert web_pool_options() is None


def test_serve_listens_as_asyncio_would_so_its_connections_get_tcp_nodelay():
    """The sockets serve binds before it starts anything are made as asyncio's own
    ``create_server(host=, port=)`` makes them; on one made with protocol 0 asyncio
    leaves Nagle on, and a keep-alive client waited about 40 ms a request on delayed
    ACKs. The control: such a socket's connection has no TCP_NODELAY."""
    import asyncio

    from workforce_project.management.commands.serve import _bind, _listen

    async def nodelay_of_a_connection(listener: socket.socket) -> int:
        seen = asyncio.get_running_loop().create_future()

        def accepted(reader, writer):
            seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(accepted, sock=listener)
        try:
            _, writer = await asyncio.open_connection(*listener.getsockname()[:2])
            value = await asyncio.wait_for(seen, 5)
            writer.close()
            return value
        finally:
            server.close()

    listeners = _bind("127.0.0.1", 0)
    _listen(listeners, "127.0.0.1", 0)
    assert [s.proto for s in listeners] == [socket.IPPROTO_TCP]
    assert asyncio.run(nodelay_of_a_connection(listeners[0])) != 0
    control = socket.create_server(("127.0.0.1", 0))  # protocol 0
    assert asyncio.run(nodelay_of_a_connection(control)) == 0


def test_serve_on_an_address_it_cannot_bind_says_which_and_why():
    from workforce_project.management.commands.serve import _bind

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match=rf"^cannot listen on 127\.0\.0\.1:{port}: Address already in use$"):
            _bind("127.0.0.1", port)
    with pytest.raises(CommandError, match=r"^cannot listen on 192\.0\.2\.7:8000: "):
        _bind("192.0.2.7", 8000)  # not this machine's (TEST-NET-1)


def test_a_bound_port_refuses_connections_until_serve_listens():
    """Bound during the start, listening only once the server runs: a client that comes
    early is refused (it retries) instead of waiting on a start that may fail."""
    from workforce_project.management.commands.serve import _bind, _listen

    (sock,) = _bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        _listen([sock], "127.0.0.1", port)
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        sock.close()


@pytest.mark.parametrize("addr", ["127.0.0.1:65536", "127.0.0.1:70000", "127.0.0.1:-1"])
def test_a_port_outside_the_range_is_refused_not_wrapped(addr):
    from workforce_project.management.commands.serve import parse_addr

    with pytest.raises(CommandError, match=r"^--addr's port must be 0-65535 \(0: any free port\), not -?\d+$"):
        parse_addr(addr)


@pytest.mark.parametrize("addr", ["http://127.0.0.1:8000", "127.0.0.1", "127.0.0.1:http"])
def test_what_is_not_host_port_is_refused_as_such(addr):
    from workforce_project.management.commands.serve import parse_addr

    with pytest.raises(CommandError, match=rf"^--addr must be HOST:PORT, not '{re.escape(addr)}'$"):
        parse_addr(addr)


def test_addresses_parse_and_print_as_urls_write_them():
    from workforce_project.management.commands.serve import host_port, parse_addr

    assert parse_addr("[::1]:8000") == ("::1", 8000)
    assert parse_addr("8000") == parse_addr(":8000") == ("127.0.0.1", 8000)
    assert parse_addr("localhost:0") == ("localhost", 0)
    assert host_port("::1", 8000) == "[::1]:8000"
    assert host_port("127.0.0.1", 8000) == "127.0.0.1:8000"
