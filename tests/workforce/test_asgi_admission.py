"""What the web server checks before a request takes a web slot or a stream place
(``workforce_project.admission``, issue 22 items 1 and 3): a body still arriving holds
no slot and times out, a body past ``WORKFORCE_MAX_BODY_BYTES`` is refused 413 by its
``Content-Length`` or by the bytes read (before anything is spooled, on every path), one
client address holds a bounded number of places, and a stream without credentials
takes no stream place. The same on a real ``serve``: ``tests/e2e/test_admission.py``."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import SyncToAsync
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client, override_settings
from rest_framework.authtoken.models import Token

from tests.conftest import MEMBER
from workforce.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)  # the requests run on other threads

STREAM = "/api/sessions/eng.standup/stream"
WAIT = 10  # generous: a liveness guard, not a speed claim


class Call:
    """One request to the ASGI app, run as a task. Its body is ``chunks``, one message
    each; with ``endless`` the body never ends (the last message says more is coming).
    Once the body is handed over, ``receive`` waits until ``leave()``, then tells of the
    disconnect, as uvicorn does."""

    def __init__(
        self,
        path: str,
        *,
        method: str = "GET",
        chunks: tuple[bytes, ...] = (b"",),
        endless: bool = False,
        headers: tuple = (),
        length: int | None = None,
        client: str = "127.0.0.1",
    ):
        from workforce_project.asgi import application

        path, _, query = path.partition("?")
        declared = [] if length is None else [(b"content-length", str(length).encode())]
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8000"), *declared, *headers],
            "client": (client, 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        self.chunks, self.endless = list(chunks), endless
        self.received = 0
        self.received_before_answer: int | None = None  # messages of the body taken when the answer started
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = b""
        self.started = asyncio.Event()
        self.gone = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(application(self.scope, self.receive, self.send))

    async def receive(self):
        if self.received < len(self.chunks):
            self.received += 1
            more = self.endless or self.received < len(self.chunks)
            return {"type": "http.request", "body": self.chunks[self.received - 1], "more_body": more}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message):
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.received_before_answer = self.received
            self.headers = {k.decode().lower(): v.decode() for k, v in message["headers"]}
            self.started.set()
        else:
            self.body += message.get("body", b"")

    def leave(self) -> None:
        self.gone.set()

    async def answer(self, timeout: float = WAIT) -> tuple[int, dict]:
        """The whole answer (status, JSON body) of a request that ends by itself."""
        await asyncio.wait_for(asyncio.shield(self.task), timeout)
        return self.status, json.loads(self.body)

    async def end(self) -> None:
        self.leave()
        try:
            await asyncio.wait_for(self.task, WAIT)
        except (TimeoutError, asyncio.CancelledError):
            self.task.cancel()


@pytest.fixture
def server(monkeypatch, settings):
    """A fresh web server state (slots, stream count, places) for the test."""
    from workforce_project import admission, asgi

    settings.WORKFORCE_WEB_CONCURRENCY = 1
    monkeypatch.setattr(asgi._server, "slots", None)
    monkeypatch.setattr(asgi._server, "open_streams", 0)
    monkeypatch.setattr(asgi._server, "places", admission.AddressPlaces())
    monkeypatch.setattr(admission, "DRAIN_SECONDS", 0.3)  # a 413 drains an endless body no longer
    yield asgi
    close_kept_threads(asgi)


def close_kept_threads(asgi) -> None:
    """Hand back the database connections the short requests' kept threads hold (the
    test database is dropped at the end, which an open connection would stop)."""
    for executor, context in asgi.short_requests._idle:
        executor.submit(context.run, connections.close_all).result()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()  # where ensure_booted ran


def run(coro):
    return asyncio.run(coro)


def test_bodies_still_arriving_hold_no_web_slot(open_tree, server):
    """Issue 22 item 1: with one web slot, three POSTs that sent one byte of 100,000 held
    it (the slot was taken before the body was read) and every other request waited."""
    open_tree()

    async def go():
        slow = [
            Call("/api/mail", method="POST", length=100_000, chunks=(b"{",), endless=True, client="10.0.0.9") for _ in range(3)
        ]
        await asyncio.sleep(0.1)
        status, data = await Call("/api/mailboxes").answer()
        assert server.address_places("10.0.0.9") == 3
        for call in slow:
            await call.end()
        return status, data

    status, data = run(go())
    assert status == 200 and "mailboxes" in data
    assert server.address_places() == 0


def test_a_body_that_does_not_arrive_in_time_is_408_and_closes_the_connection(open_tree, server, settings):
    open_tree()
    settings.WORKFORCE_BODY_TIMEOUT_SECONDS = 0.3

    async def go():
        call = Call("/api/mail", method="POST", length=100_000, chunks=(b"{",), endless=True)
        return (*await call.answer(), call.headers)

    status, data, headers = run(go())
    assert status == 408 and data["status"] == "failed" and data["requestId"] is None
    assert data["error"]["reason"] == "request-timeout"
    assert data["error"]["message"].startswith("request-timeout: ")
    assert headers["connection"] == "close"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/mail"),
        ("POST", "/api/flows/mailbox/eng.standup/actions/post"),
        ("GET", STREAM),
        ("GET", "/projects/launch/events"),
        ("POST", "/mcp?userId=ann"),
        ("POST", "/accounts/login/"),
    ],
)
def test_a_declared_body_past_the_cap_is_413_before_a_byte_is_read(open_tree, server, settings, method, path):
    """Issue 22 item 3: a 300 MB POST was spooled to a temp file, then answered 401."""
    open_tree()
    settings.WORKFORCE_MAX_BODY_BYTES = 1000

    async def go():
        call = Call(path, method=method, length=300_000_000, chunks=(b"x" * 1000,), endless=True)
        return (*await call.answer(), call.headers, call.received_before_answer)

    status, data, headers, received = run(go())
    assert (status, data["error"]["reason"]) == (413, "payload-too-large")
    assert data["error"]["message"].startswith("payload-too-large: ") and "WORKFORCE_MAX_BODY_BYTES" in data["error"]["message"]
    assert received == 0  # not one message of the body was taken before the answer (then drained, bounded)
    assert headers["connection"] == "close" and headers["content-type"] == "application/json"


@pytest.mark.parametrize(("method", "path"), [("POST", "/api/mail"), ("GET", STREAM), ("POST", "/mcp?userId=ann")])
def test_a_body_read_past_the_cap_is_413_and_read_no_further(open_tree, server, settings, method, path):
    """Chunked (no ``Content-Length``): the bytes read decide, and reading stops there."""
    open_tree()
    settings.WORKFORCE_MAX_BODY_BYTES = 100_000
    chunk = b"x" * 16_384

    async def go():
        call = Call(path, method=method, chunks=(chunk,) * 40, headers=((b"transfer-encoding", b"chunked"),))
        return (*await call.answer(), call.received_before_answer, call.received)

    status, data, received, drained = run(go())
    assert (status, data["error"]["reason"]) == (413, "payload-too-large")
    assert received == 7  # 6 chunks are 98,304 bytes; the 7th crosses the cap
    assert drained == 40  # the rest was read and discarded after the answer (a client still sending reads it)


def test_the_body_a_413_drains_is_bounded(open_tree, server, settings, monkeypatch):
    """After its answer a 413 reads and discards the body (a client still sending it
    reads the 413, not a reset), but no more than ``DRAIN_BYTES``."""
    from workforce_project import admission

    open_tree()
    settings.WORKFORCE_MAX_BODY_BYTES = 1000
    monkeypatch.setattr(admission, "DRAIN_BYTES", 4 * 1024 * 1024)
    chunk = b"x" * (1024 * 1024)

    async def go():
        call = Call("/api/mail", method="POST", length=300_000_000, chunks=(chunk,) * 40)
        return (*await call.answer(), call.received_before_answer, call.received)

    status, data, before, drained = run(go())
    assert (status, data["error"]["reason"], before) == (413, "payload-too-large", 0)
    assert drained == 5  # 4 MiB and the chunk past it, then the connection closes


def test_a_body_within_the_cap_reaches_the_view_whole(open_tree, server, settings):
    open_tree()
    settings.WORKFORCE_MAX_BODY_BYTES = 100_000
    body = json.dumps({"userId": MEMBER, "input": {"body": "y" * 30_000}}).encode()

    async def go():
        parts = tuple(body[i : i + 7_000] for i in range(0, len(body), 7_000))
        call = Call(
            "/api/flows/mailbox/eng.standup/actions/post",
            method="POST",
            chunks=parts,
            headers=((b"content-type", b"application/json"),),
            length=len(body),
        )
        return await call.answer()

    status, data = run(go())
    assert status == 202 and data["output"]["body"] == "y" * 30_000


def test_one_address_holds_at_most_its_limit_of_bodies_and_streams(open_tree, server, settings):
    open_tree()
    settings.WORKFORCE_ADDRESS_LIMIT = 3
    settings.WORKFORCE_STREAM_LIMIT = 10

    async def go():
        stream = Call(STREAM, client="10.0.0.1")
        await asyncio.wait_for(stream.started.wait(), WAIT)
        slow = [Call("/api/mail", method="POST", length=100, chunks=(b"{",), endless=True, client="10.0.0.1") for _ in range(2)]
        await asyncio.sleep(0.1)
        over_body = await Call("/api/mail", method="POST", length=100, chunks=(b"{",), endless=True, client="10.0.0.1").answer()
        over_stream = Call(STREAM, client="10.0.0.1")
        over_stream_answer = (*await over_stream.answer(), over_stream.headers)
        # Another address is not held back; a request without a body holds no place.
        elsewhere = Call(STREAM, client="10.0.0.2")
        await asyncio.wait_for(elsewhere.started.wait(), WAIT)
        plain = await Call("/api/mailboxes", client="10.0.0.1").answer()
        held = server.address_places("10.0.0.1")
        await slow[0].end()  # a place comes back: one more stream opens
        again = Call(STREAM, client="10.0.0.1")
        await asyncio.wait_for(again.started.wait(), WAIT)
        for call in (stream, slow[1], elsewhere, again):
            await call.end()
        return over_body, over_stream_answer, plain, held, elsewhere.status, again.status

    over_body, (status, data, headers), plain, held, elsewhere, again = run(go())
    assert (over_body[0], over_body[1]["error"]["reason"]) == (429, "too-many-connections")
    assert (status, data["error"]["reason"]) == (429, "too-many-connections") and headers["retry-after"] == "5"
    assert plain[0] == 200 and held == 3
    assert elsewhere == 200 and again == 200
    assert server.address_places() == 0 and server.open_streams() == 0


def test_a_stream_whose_body_never_comes_takes_no_stream_place(open_tree, server, settings):
    """Issue 22 item 1: a hundred such streams filled WORKFORCE_STREAM_LIMIT."""
    open_tree()
    settings.WORKFORCE_STREAM_LIMIT = 1

    async def go():
        stalled = Call(STREAM, length=100_000, endless=True, chunks=(), client="10.0.0.7")
        await asyncio.sleep(0.1)
        real = Call(STREAM)
        await asyncio.wait_for(real.started.wait(), WAIT)
        for call in (stalled, real):
            await call.end()
        return real.status

    assert run(go()) == 200


@override_settings(WORKFORCE_AUTH="token")
@pytest.mark.parametrize("headers", [(), ((b"authorization", b"Token not-a-token"),)])
def test_a_stream_without_credentials_takes_no_stream_place(open_tree, server, settings, headers):
    """With every stream place taken, a stream (or a waiting read, or an MCP call) with
    no valid credentials is answered 401 as before, not 503: it never counted."""
    open_tree()
    settings.WORKFORCE_STREAM_LIMIT = 1
    server._server.open_streams = 1

    async def go():
        answers = []
        for path, method in ((STREAM, "GET"), ("/api/requests/req_x?wait=30", "GET"), ("/mcp", "POST")):
            answers.append(await Call(path, method=method, headers=headers).answer())
        return answers

    answers = run(go())
    assert [(status, data["error"]["reason"]) for status, data in answers] == [(401, "not-authenticated")] * 3


@override_settings(WORKFORCE_AUTH="token")
def test_refused_streams_are_answered_while_credential_checks_wait(open_tree, server, monkeypatch):
    """A CI run on PostgreSQL: of a hundred streams with a bad token sent at once, none was
    answered in 30 s. A check waits for a connection of the web pool; the refused streams in
    the web slots held every one until answered, and Django logs each 401 on the event
    loop's default executor, whose threads the waiting checks had filled. Here every check
    after the first (a stream's, an MCP call's) waits, as for the pool, until the first
    refusal is answered; the loop's default executor has two threads."""
    from mail import mcp_http
    from workforce_project import admission

    open_tree()
    first_answered = threading.Event()
    checks = 0

    def waiting(check):
        def run(*args):
            nonlocal checks
            checks += 1
            if checks > 1:
                first_answered.wait(WAIT + 5)  # the pool connection the first refusal holds
            return check(*args)

        return run

    monkeypatch.setattr(admission, "has_credentials", waiting(admission.has_credentials))
    monkeypatch.setattr(mcp_http, "_verified_caller", waiting(mcp_http._verified_caller))
    bad = ((b"authorization", b"Token not-a-token"),)

    async def go():
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(2))
        first = Call(STREAM, headers=bad, client="10.0.0.1")
        others = [Call(STREAM, headers=bad, client="10.0.0.2"), Call("/mcp", method="POST", headers=bad, client="10.0.0.3")]
        try:
            answers = [await first.answer()]
        finally:
            first_answered.set()
        return answers + [await call.answer() for call in others]

    answers = run(go())
    assert [(status, data["error"]["reason"]) for status, data in answers] == [(401, "not-authenticated")] * 3
    assert checks == 3


@override_settings(WORKFORCE_AUTH="token")
def test_has_credentials_checks_as_the_views_do(org):
    from workforce_project.admission import has_credentials

    user = User.objects.create_user("bob")
    Membership.objects.create(user=user, organization=org)
    key = Token.objects.create(user=user).key
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()

    def scope(path, *headers):
        return {"type": "http", "method": "GET", "path": path, "query_string": b"", "headers": list(headers)}

    assert has_credentials(scope(STREAM, (b"authorization", f"Token {key}".encode())))
    assert has_credentials(scope(STREAM, (b"authorization", f"Bearer {key}".encode())))  # as the views take it
    assert not has_credentials(scope(STREAM, (b"authorization", b"Token nope")))
    assert not has_credentials(scope(STREAM, (b"authorization", b"Bearer nope")))
    assert not has_credentials(scope(STREAM, (b"authorization", b"Token nope"), (b"cookie", cookie)))  # DRF's order
    assert has_credentials(scope(STREAM, (b"cookie", cookie)))
    assert has_credentials(scope("/projects/launch/events", (b"cookie", cookie)))
    assert not has_credentials(scope("/projects/launch/events", (b"authorization", f"Token {key}".encode())))
    assert not has_credentials(scope(STREAM))
    user.is_active = False
    user.save()
    assert not has_credentials(scope(STREAM, (b"authorization", f"Token {key}".encode())))
    assert not has_credentials(scope(STREAM, (b"cookie", cookie)))


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKFORCE_MAX_BODY_BYTES", 0),
        ("WORKFORCE_ADDRESS_LIMIT", -1),
        ("WORKFORCE_ADDRESS_LIMIT", 2.5),
        ("WORKFORCE_BODY_TIMEOUT_SECONDS", 0),
    ],
)
def test_the_limits_are_checked(settings, name, value):
    from workforce_project.checks import check_web_limits

    assert check_web_limits() == []
    setattr(settings, name, value)
    (error,) = check_web_limits()
    assert error.id == "workforce_project.E020" and name in error.msg
