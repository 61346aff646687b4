"""End-to-end fixtures: the real ``manage.py serve`` as a subprocess on a free loopback
port, against its own database (a temp SQLite file, or a fresh PostgreSQL database when
DATABASE_URL points at PostgreSQL)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class HttpAnswer:
    status: int
    headers: dict
    body: object


@dataclass
class Server:
    """A running ``serve`` process and a tiny JSON client for it."""

    base: str
    process: subprocess.Popen
    env: dict
    log: Path
    extra: dict = field(default_factory=dict)

    def call(self, method: str, path: str, body: object = None, headers: dict | None = None) -> HttpAnswer:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return HttpAnswer(resp.status, dict(resp.headers), json.loads(resp.read() or b"null"))
        except urllib.error.HTTPError as err:
            return HttpAnswer(err.code, dict(err.headers), json.loads(err.read() or b"null"))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def wait_for(predicate, *, timeout: float, what: str, log: Path | None = None):
    """Call ``predicate()`` every 0.2 s until it answers something truthy, and return
    that. After ``timeout`` seconds fail the test naming ``what``, with the tail of
    ``log`` (a server's or a cluster's) when given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    detail = f"\n--- {log.name} ---\n{log.read_text()[-6000:]}" if log and log.exists() else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}{detail}")


def transcript(server: Server, mailbox_id: str) -> list[dict]:
    """Mailbox ``mailbox_id``'s durable transcript lines (``GET
    /api/mailboxes/{id}/transcript``, up to 1,000)."""
    answer = server.call("GET", f"/api/mailboxes/{mailbox_id}/transcript?limit=1000")
    assert answer.status == 200, answer.body
    return answer.body["lines"]


def session_items(server: Server, session_id: str, user_id: str = "") -> list[dict]:
    """A session's items (``GET /api/sessions/{id}/items``, up to 1,000), read as
    ``user_id`` (a private session, a coordinator conversation, answers only its owner)."""
    answer = server.call("GET", f"/api/sessions/{session_id}/items?limit=1000" + (f"&userId={user_id}" if user_id else ""))
    assert answer.status == 200, answer.body
    return answer.body["items"]


def session_requests(server: Server, session_id: str, action: str | None = None, user_id: str = "") -> list[dict]:
    """A session's requests with their outputs, only ``action``'s when given; none when
    the session does not exist yet. Read as ``user_id`` (see ``session_items``)."""
    answer = server.call(
        "GET", f"/api/sessions/{session_id}/requests?includeResultOutput=true" + (f"&userId={user_id}" if user_id else "")
    )
    if answer.status == 404:
        return []
    return [r for r in answer.body["requests"] if action is None or r["action"] == action]


def _pg_url() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    return url if url.startswith(("postgres://", "postgresql://")) else None


@pytest.fixture
def server_database(tmp_path):
    """Env vars giving a subprocess its own empty database; dropped afterwards."""
    url = _pg_url()
    if url is None:
        yield {"WORKFORCE_VAR_DIR": str(tmp_path / "var")}
        return
    import psycopg

    name = f"wf_e2e_{uuid.uuid4().hex[:10]}"
    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}")), "WORKFORCE_VAR_DIR": str(tmp_path / "var")}
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def start_server(server_database, tmp_path):
    """``start_server(root, *args, env=None) -> Server``: run serve until it answers."""
    servers: list[Server] = []

    def _start(root: Path, *args: str, env: dict | None = None, timeout: float = 60.0) -> Server:
        port = free_port()
        full_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
        full_env.update(server_database)
        # The API's throttles are off unless a test sets a rate (as in settings_test).
        for name in (
            "WORKFORCE_THROTTLE_USER",
            "WORKFORCE_THROTTLE_ORG",
            "WORKFORCE_THROTTLE_READ_USER",
            "WORKFORCE_THROTTLE_READ_ORG",
        ):
            full_env.setdefault(name, "")
        full_env.update(env or {})
        full_env["PYTHONUNBUFFERED"] = "1"
        log = tmp_path / f"serve-{port}.log"
        process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(root), *args],
            cwd=REPO,
            env=full_env,
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )
        server = Server(base=f"http://127.0.0.1:{port}", process=process, env=full_env, log=log)
        servers.append(server)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise AssertionError(f"serve exited with {process.returncode}:\n{log.read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    return server
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"serve did not listen within {timeout}s:\n{log.read_text()}")

    yield _start
    for server in servers:
        server.stop()
