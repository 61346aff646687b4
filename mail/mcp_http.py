"""The MCP server over HTTP: the SDK's Streamable HTTP transport, mounted at ``/mcp`` in
the ASGI app ``serve`` runs (``workforce_project.asgi``), serving the same tool table as
``manage.py mcp`` (``mail.mcp_server.tool_server``).

Each HTTP request is authenticated before the SDK sees it, by the REST API's rule
(``mail.mcp_server.http_caller``): with ``WORKFORCE_AUTH=token`` an ``Authorization:
Bearer <key>`` (or ``Token <key>``) header carrying a user's DRF token; in development
a ``userId`` query parameter (``/mcp?userId=ann``). A request that fails answers the REST
API's error body with the refusal's status (401 ``not-authenticated`` with a
``WWW-Authenticate`` challenge; 403 ``principal-mismatch``/``not-a-member``; 400
``invalid-input``), and the SDK never runs it. A request whose ``Host`` is not in
Django's ``ALLOWED_HOSTS`` answers 400, as a Django view would (the SDK's own DNS
rebinding check is replaced by that one rule). A request with an ``Origin`` header (a
browser's) is served only when that origin is the server's own (its scheme-less host and
port are the ``Host``) or one of Django's ``CSRF_TRUSTED_ORIGINS`` (``https://*.example.org``
wildcards too); any other, ``null`` included, answers 403 ``forbidden`` before the
credentials are read (the MCP transport spec: servers must validate ``Origin``, or a web
page could drive the server through its visitor's browser). A client that is no browser
sends no ``Origin`` and is not affected.

The transport runs stateless with JSON answers: each POST is one JSON-RPC exchange with
no session kept between requests, so nothing is held in memory per client and any web
process can answer any request. A ``tools/call`` that carries a ``progressToken`` is
answered as an event stream instead (a second, streaming session manager): its progress
notifications (``agent_chat`` waiting for the agent), then its result. The SDK's session manager needs its ``run()`` context
for the life of the process: ``running()`` enters it from the ASGI lifespan; a process
served without a lifespan starts it on the first request instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from django.conf import settings
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

from workforce.admission_threads import run_check
from workforce.api.outages import database_unavailable, database_unavailable_headers
from workforce.asgi_body import replay
from workforce.refusals import Refusal

# The MCP SDK (about 34 MiB in a process) is imported by the first request to the mount,
# not by the web server's start: a server nobody calls over MCP never loads it.
if TYPE_CHECKING:  # pragma: no cover
    from mcp.server.mcpserver import MCPServer

    from .mcp_server import McpCaller

MOUNT_PATH = "/mcp"
# RFC 9728's well-known path, and its form for the resource at MOUNT_PATH (the path
# inserted after it), where MCP clients look for the mount's metadata.
METADATA_PATH = "/.well-known/oauth-protected-resource"
TOKEN_CHALLENGE = b'Token realm="workforce"'
# What the 401 says (RFC 6750 error_description: no quotes or backslashes in it).
NO_SIGN_IN = (
    "This server signs no one in (no OAuth authorization server): send your API token as "
    "Authorization: Bearer <token>; python manage.py drf_create_token <username> makes one."
)


def is_mcp_path(path: str) -> bool:
    """True for the mount's own path, ``/mcp`` or ``/mcp/``."""
    return path in (MOUNT_PATH, MOUNT_PATH + "/")


def origin_allowed(origin: str | None, host: str) -> bool:
    """True when a request from ``origin`` (its ``Origin`` header; None when absent)
    to ``host`` (its ``Host`` header) may be served: no Origin, the server's own, or one
    of ``CSRF_TRUSTED_ORIGINS`` (matched as Django's CSRF check matches them)."""
    if origin is None:
        return True
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False  # "null" (a sandboxed page, a file), or no origin at all
    if parts.netloc.lower() == host.lower():
        return True
    trusted = getattr(settings, "CSRF_TRUSTED_ORIGINS", [])
    if origin in trusted:
        return True
    for allowed in trusted:
        if "*" in allowed:
            pattern = urlsplit(allowed)
            if pattern.scheme == parts.scheme and is_same_domain(parts.netloc, pattern.netloc.lstrip("*")):
                return True
    return False


def _verified_caller(authorization: str | None, user_id: str | None) -> McpCaller:
    from .mcp_server import http_caller

    try:
        return http_caller(authorization, user_id)
    except Exception as exc:
        # The database unreachable while the caller is checked: the API's 503, not a 500.
        unavailable = database_unavailable(exc)
        if unavailable is None:
            raise
        raise unavailable from exc
    finally:
        # Run on an admission thread (run_check below): its connections end with the call.
        connections.close_all()


class McpMount:
    """The ASGI app of the HTTP mount (see the module docstring). One per process."""

    def __init__(self, server: MCPServer | None = None):
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        from .mcp_server import http_server

        self.server = server or http_server()
        # Builds the SDK's session manager (server.session_manager); its Starlette app is
        # not used: this mount hands each request to the manager itself.
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
        self.server.streamable_http_app(
            streamable_http_path=MOUNT_PATH,
            stateless_http=True,
            json_response=True,
            transport_security=security,
        )
        # A call that asks for progress (a progressToken) is answered as an event stream,
        # its progress notifications then its result: a JSON answer has no room for them.
        self.streaming = StreamableHTTPSessionManager(
            app=self.server._lowlevel_server, json_response=False, stateless=True, security_settings=security
        )
        self._running = False
        self._starting = asyncio.Lock()
        self._task: asyncio.Task | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The session manager's ``run()`` context: enter it once, for the life of the
        process (the ASGI lifespan)."""
        async with self.server.session_manager.run(), self.streaming.run():
            self._running = True
            try:
                yield
            finally:
                self._running = False

    async def _start_without_lifespan(self) -> None:
        # Started by the first request (the web server's start does not import the SDK):
        # hold the manager's run() context in a task of this event loop, until the
        # lifespan's shutdown (stop) or the loop's end.
        async with self._starting:
            if self._running:
                return
            started = asyncio.Event()

            async def hold() -> None:
                try:
                    async with self.running():
                        started.set()
                        await asyncio.Event().wait()
                finally:
                    started.set()  # it failed to start: the wait below ends too

            self._task = asyncio.get_running_loop().create_task(hold())
            await started.wait()
            if not self._running:
                raise RuntimeError("the MCP session manager did not start")

    async def stop(self) -> None:
        """End the session manager's task that ``serve`` started (the ASGI lifespan's
        shutdown); nothing when it was started by ``running()`` or not at all."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def __call__(self, scope, receive, send) -> None:
        verdict = await self.admit(scope)
        if isinstance(verdict, Refusal):
            await self.refuse(send, verdict, scope)
            return
        await self.serve(scope, receive, send, verdict)

    async def admit(self, scope) -> McpCaller | Refusal:
        """Who calls, or why the request is refused before the SDK sees it: the ``Host``,
        the method, then the credentials (a database read, in a worker thread). The web
        server (``workforce_project.asgi``) calls it before the request takes a stream
        place, so a request without credentials never holds one."""
        headers = _scope_headers(scope)
        domain, _port = split_domain_port(headers.get("host", ""))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            return Refusal("invalid-input", "Invalid Host header: add it to DJANGO_ALLOWED_HOSTS.")
        if not origin_allowed(headers.get("origin"), headers.get("host", "")):
            return Refusal("forbidden", "Origin is not this server's nor in CSRF_TRUSTED_ORIGINS.")
        if scope.get("method") != "POST":
            # Stateless, JSON answers: every call is one POST. A GET would open the SDK's
            # standalone event stream, which this mount never writes to and which would
            # hold a web slot until the client left (the MCP transport lets a server
            # answer 405 to it); a DELETE ends a session this mount never keeps.
            return Refusal("method-not-allowed", "The MCP mount takes POST only (stateless, JSON answers).")
        user_ids = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("userId")
        try:
            # On the admission threads, not the default executor (workforce.admission_threads).
            return await run_check(
                _verified_caller,
                # The last one, as Django's QueryDict reads a repeated parameter.
                headers.get("authorization"),
                user_ids[-1] if user_ids else None,
            )
        except Refusal as refusal:
            return refusal

    async def refuse(self, send, refusal: Refusal, scope: dict[str, Any] | None = None) -> None:
        """Answer a refusal of ``admit`` for the request ``scope`` (a 405 with ``Allow:
        POST``; a 401 with the challenges ``bearer_challenge`` makes of ``scope``)."""
        challenges = None
        if refusal.http_status == 401:
            challenges = [bearer_challenge(scope or {}), TOKEN_CHALLENGE]
        await _answer(send, refusal, allow=b"POST" if refusal.reason == "method-not-allowed" else None, challenges=challenges)

    async def serve(self, scope, receive, send, caller: McpCaller) -> None:
        """Hand an admitted request (``admit`` answered ``caller``) to the SDK."""
        if not self._running:
            await self._start_without_lifespan()
        from .mcp_server import CALLER_SCOPE_KEY

        scope = {**scope, CALLER_SCOPE_KEY: caller}
        body = await _read_body(receive)
        manager = self.streaming if asks_progress(body) else self.server.session_manager
        await manager.handle_request(scope, replay(body, receive), send)


def asks_progress(body: bytes) -> bool:
    """True for a JSON-RPC ``tools/call`` whose ``params._meta`` carries a
    ``progressToken`` (the client wants progress notifications while it waits)."""
    try:
        message = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and meta.get("progressToken") is not None


async def _read_body(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _scope_headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def resource_url(scheme: str, host: str) -> str:
    """The mount's own URL as a client dials it (``http://host:port/mcp``): the
    ``resource`` of its metadata (RFC 9728)."""
    return f"{scheme}://{host}{MOUNT_PATH}"


def metadata_url(scheme: str, host: str) -> str:
    """Where the mount's protected resource metadata is (RFC 9728 section 3.1: the
    well-known path, then the resource's path)."""
    return f"{scheme}://{host}{METADATA_PATH}{MOUNT_PATH}"


def bearer_challenge(scope: dict[str, Any]) -> bytes:
    """The ``WWW-Authenticate`` challenge of a 401 (RFC 6750, RFC 9728 section 5.1):
    ``Bearer`` with ``resource_metadata`` (the document an MCP client reads to learn how
    to sign in), ``error="invalid_token"`` when a credential was sent and refused, and
    ``error_description`` saying that a token, not a sign-in, is what the server takes."""
    headers = _scope_headers(scope)
    host = headers.get("host", "")
    params = [b'Bearer realm="workforce"']
    if host:
        params.append(f'resource_metadata="{metadata_url(scope.get("scheme", "http"), host)}"'.encode("latin-1"))
    if headers.get("authorization", "").strip():
        params.append(b'error="invalid_token"')
    params.append(f'error_description="{NO_SIGN_IN}"'.encode())
    return b", ".join(params)


def protected_resource_metadata(request: HttpRequest) -> HttpResponse:
    """``GET /.well-known/oauth-protected-resource[/mcp]``: the mount's protected resource
    metadata (RFC 9728) with ``WORKFORCE_AUTH=token``, which says what is true: the
    resource, a bearer token in the ``Authorization`` header, and no authorization
    server (the member is left out: no OAuth sign-in is offered; an MCP client that can
    only sign in by OAuth cannot configure itself here and is given a token by hand,
    docs/mcp.md). 404 in development, where the mount takes no token."""
    if settings.WORKFORCE_AUTH == "none":
        return JsonResponse(
            {"error": {"reason": "not-found", "message": "In development the MCP mount takes no token (?userId=)."}},
            status=404,
        )
    host = request.get_host()
    return JsonResponse(
        {
            "resource": resource_url(request.scheme or "http", host),
            "bearer_methods_supported": ["header"],
            "resource_name": "workforce MCP server",
            "workforce_sign_in": NO_SIGN_IN,
        }
    )


async def _answer(send, refusal: Refusal, *, allow: bytes | None = None, challenges: list[bytes] | None = None) -> None:
    """The REST API's error body for a request the mount refuses before the SDK sees it
    (``allow``: the ``Allow`` header of a 405; ``challenges``: a 401's
    ``WWW-Authenticate`` headers, one each)."""
    body = json.dumps({"requestId": None, "status": "failed", "error": refusal.as_error()}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    for challenge in challenges or ():
        headers.append((b"www-authenticate", challenge))
    if allow is not None:
        headers.append((b"allow", allow))
    if refusal.reason == "database-unavailable":
        headers += [(k.lower().encode(), v.encode()) for k, v in database_unavailable_headers().items()]
    await send({"type": "http.response.start", "status": refusal.http_status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
