"""ASGI entry point (``serve`` runs it under uvicorn).

Before a request takes a slot or a stream place, its whole body is read, in memory, and
size-checked (``WORKFORCE_MAX_BODY_BYTES``, ``WORKFORCE_BODY_TIMEOUT_SECONDS``), what
one client address holds is bounded (``WORKFORCE_ADDRESS_LIMIT``), and a stream's
credentials are checked: ``workforce_project.admission``. A slow or endless body, or a
stream without credentials, holds neither a web slot nor a stream place.

At most ``WORKFORCE_WEB_CONCURRENCY`` requests run at once; the rest wait. Each running
request holds a database connection, so a burst never exhausts PostgreSQL's.

A live stream (``GET /api/sessions/{id}/stream``, a page's
``/mailboxes|boards|sessions|projects/{id}/events``) is open for as long as its client
watches, and a waiting read (``GET /api/requests/{id}?wait=S``) up to 30 s, so neither
takes one of those slots: together they have their own bound, ``WORKFORCE_STREAM_LIMIT``,
and one more is refused at once with 503 ``too-many-streams`` (``Retry-After``). Neither
holds a database connection while it waits (``workforce.streams``,
``workforce.streams.release_connection``).

The MCP server's HTTP mount (``/mcp``, ``mail.mcp_http``: the SDK's Streamable HTTP
transport, serving the tools ``manage.py mcp`` serves) counts each call against
``WORKFORCE_STREAM_LIMIT`` too (``agent_chat`` waits for a turn), once its credentials
are admitted (``McpMount.admit``). It is made, and the SDK imported, by the first request
to ``/mcp``, whose session manager then runs in a task of the event loop until the
ASGI lifespan's shutdown (``serve`` runs uvicorn with it on) or the loop's end; Django
itself takes no lifespan, so nothing else changes for the rest of the app.

A short request runs Django's middleware and its view in one hop to a kept worker thread
(``OneHopHandler``); the long-lived ones keep Django's stock ASGI handler.

A process started some other way (``uvicorn workforce_project.asgi:application``) boots
itself on its first request: hires the tree's seats and wires the notify block, as
``serve`` does before it listens (``serve`` marks its process booted, so this is free).
"""

import asyncio
import contextvars
import io
import json
import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402
from django.core import signals  # noqa: E402
from django.core.exceptions import RequestAborted  # noqa: E402
from django.core.handlers.asgi import ASGIHandler, get_script_prefix  # noqa: E402
from django.core.handlers.base import BaseHandler  # noqa: E402
from django.db import connections  # noqa: E402
from django.http import FileResponse  # noqa: E402
from django.urls import set_script_prefix  # noqa: E402

from mail.mcp_http import McpMount, is_mcp_path  # noqa: E402  (the SDK itself loads on first use)
from mail.repair import index_unswept_vaults_once  # noqa: E402
from workforce.admission_threads import run_check  # noqa: E402
from workforce.asgi_body import replay  # noqa: E402
from workforce.refusals import Refusal  # noqa: E402
from workforce.runtime import ensure_booted, is_booted  # noqa: E402  (needs the app registry)
from workforce_project import admission  # noqa: E402

# The API's stream and the pages' (web.urls: a mailbox's, a board's, a conversation's,
# a project room's events).
STREAM_PATH = re.compile(r"^/api/sessions/[^/]+/stream$|^/(mailboxes|boards|sessions|projects)/[^/]+/events$")
REQUEST_PATH = re.compile(r"^/api/requests/[^/]+$")
STREAM_RETRY_AFTER_SECONDS = 5

logger = logging.getLogger(__name__)


class _Server:
    """This ASGI process's own state: the web slots, the open long-lived requests, the
    MCP mount. One event loop touches it, so it needs no lock."""

    slots: asyncio.Semaphore | None = None
    short_running = 0  # short requests holding a web slot now (read from other threads)
    open_streams = 0
    mcp: McpMount | None = None
    places = admission.AddressPlaces()


_server = _Server()


async def application(scope, receive, send):
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] != "http":
        await django_application(scope, receive, send)
        return
    mcp = is_mcp_path(scope.get("path", ""))
    long_lived = mcp or is_long_lived(scope)
    declared, has_body = admission.body_headers(scope)
    address = admission.client_address(scope)
    # A place of the client's address: held while the body arrives, and by a long-lived
    # request to its end; a short one gives it back before it waits for a slot.
    holding = long_lived or has_body
    try:
        if declared is not None and declared > settings.WORKFORCE_MAX_BODY_BYTES:
            raise admission.too_large()
        if holding:
            _server.places.take(address)
    except admission.Refused as refused:
        holding = False
        await admission.answer(send, refused, receive)
        return
    try:
        try:
            body = await admission.read_body(receive, declared)
        except admission.Refused as refused:
            await admission.answer(send, refused, receive)
            return
        except admission.ClientGone:
            return
        if long_lived:
            await _long_lived(scope, replay(body, receive), send, mcp)
            return
        if holding:
            _server.places.give_back(address)
            holding = False
        if _server.slots is None:
            _server.slots = asyncio.Semaphore(max(1, settings.WORKFORCE_WEB_CONCURRENCY))
        async with _server.slots:
            _server.short_running += 1
            try:
                if not is_booted():
                    await sync_to_async(ensure_booted, thread_sensitive=True)()
                await short_requests.respond(scope, body, send)
            finally:
                _server.short_running -= 1
    finally:
        if holding:
            _server.places.give_back(address)


def short_requests_running() -> int:
    """How many short requests hold a web slot now (safe from any thread: one int read)."""
    return _server.short_running


async def _long_lived(scope, receive, send, mcp: bool) -> None:
    """A stream, a waiting read, or an MCP call (``agent_chat`` waits for the agent's
    turn): each may wait long on the server's side, so it is counted against the stream
    limit and never holds one of the web slots short requests need. Its credentials are
    checked first: one without them takes no stream place."""
    if mcp:
        mount = mcp_mount()
        verdict = await mount.admit(scope)
        if isinstance(verdict, Refusal):
            await mount.refuse(send, verdict, scope)
            return

        async def run(scope, receive, send):
            await mount.serve(scope, receive, send, verdict)

    elif not await run_check(admission.has_credentials, scope):  # never on the default executor (its docstring)
        # Answered as before (401, the login page) by the stock handler, which ends it
        # if it streams after all and its client leaves, in a web slot: it is short.
        if _server.slots is None:
            _server.slots = asyncio.Semaphore(max(1, settings.WORKFORCE_WEB_CONCURRENCY))
        async with _server.slots:
            await django_application(scope, receive, send)
        return
    else:
        run = django_application
    if _server.open_streams >= max(1, settings.WORKFORCE_STREAM_LIMIT):
        await _refuse_stream(send)
        return
    _server.open_streams += 1
    try:
        if not is_booted():
            await sync_to_async(ensure_booted, thread_sensitive=True)()
        await run(scope, receive, send)
    finally:
        _server.open_streams -= 1


class OneHopHandler(ASGIHandler):
    """Django's ASGI handler for the short requests: its middleware chain built sync
    (as under WSGI) and run with the view in one worker thread per request, where the
    stock handler builds it async and so hops between the event loop and a thread for
    each sync part: every ``MiddlewareMixin`` method, the view, each signal; about 16
    hops and a new thread per request, most of a post's CPU in this process.

    Each request runs on a thread of its own among ``WORKFORCE_WEB_CONCURRENCY`` kept
    threads (the web slots bound how many run at once), each with its own database
    connection as before, and a thread keeps its context between the requests it runs,
    as a WSGI server's threads do. The request's thread also sends ``request_finished``
    (which hands its connection back): for an answer in one piece, before the bytes go
    out; for a streamed one (a static file), after its last chunk.

    Every view the API and the pages serve is sync; the long-lived requests (streams,
    waiting reads) keep the stock handler, whose per-request thread context their reads
    need (``workforce.streams``). docs/architecture.md "Apps" (``workforce_project``).
    """

    def __init__(self):
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self._idle: list[tuple[ThreadPoolExecutor, contextvars.Context]] = []

    async def __call__(self, scope, receive, send):
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        await self.respond(scope, body_file, send)

    async def respond(self, scope, body, send):
        """Answer the request of ``scope`` whose body was read already (``body``: bytes,
        or a file positioned at its start)."""
        body_file = io.BytesIO(body) if isinstance(body, bytes) else body
        worker = self._idle.pop() if self._idle else (ThreadPoolExecutor(1, "web"), contextvars.copy_context())
        executor, context = worker
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(executor, context.run, self._respond, scope, body_file)
            try:
                await self.send_response(response, send)
            finally:
                if response.streaming:
                    await loop.run_in_executor(executor, context.run, response.close)
        finally:
            body_file.close()
            # Back even when cancelled mid-request: its next request queues behind it.
            self._idle.append(worker)

    def _respond(self, scope, body_file):
        """On the request's thread: the started signal, the request, the middleware
        and the view; the finished signal too when the answer is in one piece."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        if response is None:  # create_request gives a request or its refusal
            raise RuntimeError("create_request gave neither a request nor a response")
        if not response.streaming:
            response.close()
        return response


short_requests = OneHopHandler()


def mcp_mount() -> McpMount:
    """This process's MCP mount (made on first use when no lifespan made it)."""
    if _server.mcp is None:
        _server.mcp = McpMount()
    return _server.mcp


async def _lifespan(receive, send) -> None:
    """The ASGI lifespan: the MCP mount's session manager runs between start-up and
    shutdown. A new mount each time, as a manager runs once (a process may run several
    servers one after another: tests)."""
    await receive()  # lifespan.startup
    await sync_to_async(_index_vaults, thread_sensitive=False)()
    # The MCP mount (and the SDK it imports, about 34 MiB) is made by the first request to
    # /mcp, which starts its session manager in a task of this loop (McpMount.serve); the
    # shutdown below stops it.
    _server.mcp = None
    await send({"type": "lifespan.startup.complete"})
    try:
        await receive()  # lifespan.shutdown
    except asyncio.CancelledError:
        # A forced stop (a second Ctrl-C) skips the shutdown event and cancels this task
        # with the loop: the manager's task goes with the loop, quietly.
        _server.mcp = None
        return
    mount, _server.mcp = _server.mcp, None
    if mount is not None:
        await mount.stop()
    await send({"type": "lifespan.shutdown.complete"})


def _index_vaults() -> None:
    """Before the first request: the vaults this database never read are indexed
    (``mail.repair.index_unswept_vaults_once``; ``serve`` did it already). A failure
    (the database down) is logged and left to the periodic sweep: the server starts."""
    try:
        index_unswept_vaults_once()
    except Exception:
        logger.exception("indexing the vaults at start failed; the mail sweep will index them")
    finally:
        connections.close_all()


def is_long_lived(scope) -> bool:
    """True for a request that waits on the server's side: a stream, or a read of a
    request with a ``wait`` other than 0."""
    # HEAD too: its answer is the stream's, streamed (the server drops the body), and
    # only the stock handler ends a stream when its client goes away.
    if scope.get("method") not in ("GET", "HEAD"):
        return False
    path = scope.get("path", "")
    if STREAM_PATH.match(path):
        return True
    if not REQUEST_PATH.match(path):
        return False
    waits = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("wait", [])
    return any(value.strip() not in {"", "0"} for value in waits)


def open_streams() -> int:
    """How many streams and waiting reads this process has open now."""
    return _server.open_streams


def address_places(address: str | None = None) -> int:
    """Places ``address`` holds now: bodies still arriving, streams open (every
    address's together when None); ``workforce_project.admission``."""
    return _server.places.holding(address)


async def _refuse_stream(send) -> None:
    refusal = Refusal(
        "too-many-streams", f"This server has {settings.WORKFORCE_STREAM_LIMIT} streams and waiting reads open; retry later."
    )
    body = json.dumps({"requestId": None, "status": "failed", "error": refusal.as_error()}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": refusal.http_status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(STREAM_RETRY_AFTER_SECONDS).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
