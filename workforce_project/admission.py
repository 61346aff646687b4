"""What the web server (``workforce_project.asgi``) checks before a request takes one of
its ``WORKFORCE_WEB_CONCURRENCY`` slots or a ``WORKFORCE_STREAM_LIMIT`` place, so that
no client can hold either without having sent its whole request (docs/api.md "Limits of the
web server"):

- the body: refused with 413 ``payload-too-large`` by its ``Content-Length`` before a
  byte is read, or by the bytes read, past ``WORKFORCE_MAX_BODY_BYTES``; read whole, in
  memory (never spooled to disk), within ``WORKFORCE_BODY_TIMEOUT_SECONDS`` of the
  request's start, or refused with 408 ``request-timeout``;
- one client address (``scope["client"]``: uvicorn takes it from ``X-Forwarded-For``
  only from the proxies ``FORWARDED_ALLOW_IPS`` trusts, by default 127.0.0.1) holds at
  most ``WORKFORCE_ADDRESS_LIMIT`` places at once: a request whose body is still
  arriving, and a stream, waiting read or MCP call from start to end, hold one each;
  one more is refused with 429 ``too-many-connections`` (``Retry-After``);
- a stream's credentials (``has_credentials``) before it takes a stream place.

Refusals are the API's JSON error body. One that leaves a body unread closes the
connection (``Connection: close``): the client cannot send another request after it. A
413 first reads and discards the rest of the body (at most ``DRAIN_BYTES`` within
``DRAIN_SECONDS``, after its answer is sent): a connection closed with a body unread is
reset by the kernel, and a client still sending it would get that reset, not the 413.
The state lives on the server's event loop, which is one thread: it needs no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user
from django.core.handlers.asgi import ASGIRequest
from django.db import connections
from rest_framework.exceptions import AuthenticationFailed

from workforce.api.authentication import TOKEN_AUTHENTICATION
from workforce.refusals import Refusal

RETRY_AFTER_SECONDS = 5
# What a 413 reads and discards of the refused body after its answer, at most (bytes,
# seconds), so that a client still sending it reads the answer (see ``answer``).
DRAIN_BYTES = 16 * 1024 * 1024
DRAIN_SECONDS = 5.0


class Refused(Exception):
    """A request refused before it ran: ``refusal``, with ``Retry-After`` when
    ``retry_after``, closing the connection when ``close`` (its body is left unread, or
    with ``drain`` read and discarded, bounded, after the answer: ``answer``)."""

    def __init__(self, refusal: Refusal, *, close: bool = False, retry_after: bool = False, drain: bool = False):
        super().__init__(refusal.message)
        self.refusal = refusal
        self.close = close
        self.retry_after = retry_after
        self.drain = drain


class ClientGone(Exception):
    """The client went away before its body arrived: nothing is answered."""


def body_headers(scope) -> tuple[int | None, bool]:
    """``(Content-Length or None, whether the request has a body at all)``: a body is
    declared by a ``Content-Length`` above 0 or a ``Transfer-Encoding`` (chunked)."""
    length, chunked = None, False
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:  # the server's HTTP parser refuses these before us
                length = None
        elif name == b"transfer-encoding":
            chunked = True
    return length, chunked or bool(length)


def too_large(what: str = "The body") -> Refused:
    cap = settings.WORKFORCE_MAX_BODY_BYTES
    return Refused(
        Refusal("payload-too-large", f"{what} is larger than this server takes ({cap} bytes, WORKFORCE_MAX_BODY_BYTES)."),
        close=True,
        drain=True,
    )


async def read_body(receive, declared: int | None) -> bytes:
    """The request's whole body, read in memory.

    Args:
        receive: the ASGI ``receive`` of the request.
        declared: its ``Content-Length`` (None: not given).

    Raises:
        Refused: 413 ``payload-too-large`` (declared or read past
            ``WORKFORCE_MAX_BODY_BYTES``), 408 ``request-timeout`` (not whole within
            ``WORKFORCE_BODY_TIMEOUT_SECONDS``).
        ClientGone: the client disconnected first.
    """
    cap = settings.WORKFORCE_MAX_BODY_BYTES
    if declared is not None and declared > cap:
        raise too_large()
    seconds = float(settings.WORKFORCE_BODY_TIMEOUT_SECONDS)
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(seconds):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone()
                chunk = message.get("body", b"")
                if chunk:
                    size += len(chunk)
                    if size > cap:
                        raise too_large()
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    break
    except TimeoutError:
        raise Refused(
            Refusal(
                "request-timeout",
                f"The body did not arrive within {seconds:g} s (WORKFORCE_BODY_TIMEOUT_SECONDS); send it whole.",
            ),
            close=True,
        ) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class AddressPlaces:
    """The places each client address holds now (``WORKFORCE_ADDRESS_LIMIT`` at most)."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def take(self, address: str) -> None:
        """One more place for ``address``.

        Raises:
            Refused: 429 ``too-many-connections``: it holds the limit already.
        """
        held = self.held.get(address, 0)
        limit = max(1, int(settings.WORKFORCE_ADDRESS_LIMIT))
        if held >= limit:
            raise Refused(
                Refusal(
                    "too-many-connections",
                    f"This address has {limit} requests whose bodies are still arriving and streams open "
                    "(WORKFORCE_ADDRESS_LIMIT); retry later.",
                ),
                retry_after=True,
            )
        self.held[address] = held + 1

    def give_back(self, address: str) -> None:
        held = self.held.get(address, 0) - 1
        if held > 0:
            self.held[address] = held
        else:
            self.held.pop(address, None)

    def holding(self, address: str | None = None) -> int:
        """Places ``address`` holds now (every address's together when None)."""
        return sum(self.held.values()) if address is None else self.held.get(address, 0)


def client_address(scope) -> str:
    """The client's address (empty when the server does not say: a unix socket)."""
    client = scope.get("client")
    return str(client[0]) if client else ""


def has_credentials(scope) -> bool:
    """Whether a stream, a waiting read or a page stream carries credentials the view will
    take, checked as the view checks them, before it takes a stream place: with
    ``WORKFORCE_AUTH=token`` an API path's ``Authorization: Token <key>`` (or ``Bearer <key>``) of an active
    user, else (and on the pages) a logged-in session. Development (``none``) has no
    credentials to check: True. Blocking (a database read, waiting for a pooled
    connection): run it on an admission thread (``workforce.admission_threads.run_check``),
    never the event loop's default executor; its connection is handed back at the end. A request refused here runs as a short
    request, which answers it as before (401, or the login page)."""
    if settings.WORKFORCE_AUTH != "token":
        return True
    try:
        request = ASGIRequest(scope, io.BytesIO())
        if request.path.startswith("/api/"):
            try:
                # The ignore: the DRF stubs ask for DRF's Request; authenticate reads only
                # the Authorization header (request.META), which a Django request has.
                if any(scheme().authenticate(request) is not None for scheme in TOKEN_AUTHENTICATION):  # type: ignore[arg-type]
                    return True
            except AuthenticationFailed:
                return False  # a bad token is refused even with a session (DRF's order)
        engine = import_module(settings.SESSION_ENGINE)
        request.session = engine.SessionStore(request.COOKIES.get(settings.SESSION_COOKIE_NAME))
        return bool(get_user(request).is_authenticated)
    except Exception:  # noqa: BLE001  (a database outage, a malformed header: the view answers it)
        return False
    finally:
        connections.close_all()


async def answer(send, refused: Refused, receive=None) -> None:
    """Send ``refused`` as the API's JSON error body.

    With ``refused.drain`` and ``receive`` (the request's ASGI ``receive``), the whole
    answer is written first (its ``Content-Length`` tells the client it is complete), then
    the rest of the request's body is read and discarded (``drain``) before the response
    ends and the server closes the connection."""
    refusal = refused.refusal
    body = json.dumps({"requestId": None, "status": "failed", "error": refusal.as_error()}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refused.retry_after:
        headers.append((b"retry-after", str(RETRY_AFTER_SECONDS).encode()))
    if refused.close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": refusal.http_status, "headers": headers})
    if not (refused.drain and receive is not None):
        await send({"type": "http.response.body", "body": body})
        return
    await send({"type": "http.response.body", "body": body, "more_body": True})
    try:
        await drain(receive)
    finally:
        await send({"type": "http.response.body", "body": b""})


async def drain(receive) -> int:
    """Read and discard the request's body until it ends, the client leaves, or
    ``DRAIN_BYTES`` bytes or ``DRAIN_SECONDS`` seconds pass: the bytes read. A
    connection closed with its body unread is reset (TCP RST), and a client still sending
    the body gets that reset instead of the answer already sent; one that sends more than
    that still does."""
    size = 0
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(DRAIN_SECONDS):
            while size <= DRAIN_BYTES:
                message = await receive()
                if message["type"] != "http.request":
                    break
                size += len(message.get("body", b""))
                if not message.get("more_body", False):
                    break
    return size
