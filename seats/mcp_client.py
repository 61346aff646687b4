"""The MCP client a seat's tool-server calls go through (docs/tools.md), on the official
``mcp`` SDK (``mcp.ClientSession`` over ``stdio_client`` or ``streamable_http_client``).

The cluster's workers are synchronous processes and the SDK is async: each process keeps
one event loop on a daemon thread, which holds one open session per tool server, reused
by every call. A synchronous caller hands it a coroutine (``run_coroutine_threadsafe``)
and waits at most the call's time limit (``WORKFORCE_TOOL_CALL_TIMEOUT`` seconds). A
call that fails on the connection (the server died, the time limit passed) closes that
session, so the next use starts the server again; the failed call raises
``ToolServerError``, which the tool hands the model as a refusal. A forked process
starts its own loop (a loop thread does not survive a fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import threading
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds a server has to start and answer the handshake (counted in the call's limit too).
CONNECT_TIMEOUT = 20.0


@dataclass(frozen=True)
class ToolServer:
    """One declared tool server.

    ``name`` is its name in the file; a stdio server has ``command`` (and ``args``, run in
    ``cwd``, the tree's root), an HTTP one ``url``. ``env`` names the environment variables
    passed to a stdio server; ``headers`` pairs a header with the variable holding its value.
    """

    name: str
    description: str = ""
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    cwd: str = ""

    @property
    def transport(self) -> str:
        """``stdio`` or ``http``."""
        return "stdio" if self.command else "http"


class ToolServerError(Exception):
    """A tool server could not be reached, died, or passed the call's time limit.
    ``code`` is the refusal's code: ``tool-server-unavailable`` or ``tool-timeout``."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


@dataclass(frozen=True)
class ServerTool:
    """One tool a server lists: ``name``, ``description`` and ``input_schema`` (JSON schema)."""

    name: str
    description: str
    input_schema: dict


@dataclass
class CallOutcome:
    """What a tool call answered: ``text`` (its text content, joined), ``structured``
    (its structured content, when it has one) and ``is_error`` (the server's ``isError``)."""

    text: str
    structured: dict | None = None
    is_error: bool = False


def call_timeout() -> float:
    """Seconds one tool-server call may take (``WORKFORCE_TOOL_CALL_TIMEOUT``, default 30)."""
    return float(settings.WORKFORCE_TOOL_CALL_TIMEOUT)


@dataclass
class _Connection:
    server: ToolServer
    session: Any = None
    tools: list[ServerTool] | None = None
    task: asyncio.Task | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    error: BaseException | None = None


@contextlib.asynccontextmanager
async def _transport(server: ToolServer) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if server.command:
        command = sys.executable if server.command == "python" else server.command
        env = {name: os.environ[name] for name in server.env if name in os.environ}
        command, args = _dying_with_us(command, list(server.args), server.cwd)
        params = StdioServerParameters(command=command, args=args, env=env, cwd=server.cwd or None)
        async with stdio_client(params) as streams:
            yield streams[0], streams[1]
    else:
        assert server.url is not None
        missing = [variable for _, variable in server.headers if variable not in os.environ]
        if missing:
            raise ToolServerError("tool-server-unavailable", f"the variable {', '.join(missing)} for its headers is not set")
        headers = {header: os.environ[variable] for header, variable in server.headers}
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(server.url, http_client=client) as streams:
                yield streams[0], streams[1]


# Run before a stdio server's own program (Linux): the kernel kills the server when the
# thread that started it ends (PR_SET_PDEATHSIG, kept across exec), so a worker process
# killed outright (kill -9, the cluster's timeout) leaves no server behind; the SDK's own
# shutdown only covers a client that closes its session. argv: the starter's pid, then
# the program and its arguments.
_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(1)  # the starter died before the signal was set\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _dying_with_us(command: str, args: list[str], cwd: str) -> tuple[str, list[str]]:
    """``(command, args)`` run through ``_LAUNCHER`` on Linux (see it), as they are
    elsewhere; a command that cannot be found (on the PATH, or from ``cwd`` for one with a
    ``/``) is left as it is, for the SDK to say so."""
    found = os.access(os.path.join(cwd, command), os.X_OK) if os.sep in command else shutil.which(command) is not None
    if not sys.platform.startswith("linux") or not found:
        return command, args
    return sys.executable, ["-c", _LAUNCHER, str(os.getpid()), command, *args]


def _first_cause(error: BaseException | None) -> BaseException | None:
    """The first leaf of an exception group (a task group's failure), else ``error``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class ToolServerPool:
    """This process's sessions, one per tool server, on one event loop thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid = 0
        self._connections: dict[ToolServer, _Connection] = {}
        self._starting: dict[ToolServer, asyncio.Lock] = {}

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="tool-servers", daemon=True).start()
                self._loop, self._pid = loop, os.getpid()
                self._connections, self._starting = {}, {}
            return self._loop

    def run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait for it, at most ``timeout`` seconds.

        Raises:
            ToolServerError: ``tool-timeout`` when the time passed (the coroutine is
                cancelled), or what ``coro`` raised.
        """
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), loop)
        try:
            return future.result(timeout + 5)
        except TimeoutError:  # concurrent.futures' and asyncio's are this one
            future.cancel()
            raise ToolServerError("tool-timeout", f"the call passed its time limit of {timeout:g} seconds") from None

    async def _connection(self, server: ToolServer) -> _Connection:
        lock = self._starting.setdefault(server, asyncio.Lock())
        async with lock:
            conn = self._connections.get(server)
            if conn is not None and conn.session is not None and not conn.stop.is_set():
                return conn
            conn = _Connection(server)
            conn.task = asyncio.get_running_loop().create_task(self._hold(conn))
            try:
                await conn.ready.wait()
            except asyncio.CancelledError:  # the call's time limit passed while it started
                conn.stop.set()  # so a server that starts late is closed, not left running
                raise
            if conn.session is None:
                error = _first_cause(conn.error)
                detail = f"{type(error).__name__}: {error}" if error is not None else "it closed"
                if isinstance(error, ToolServerError):
                    detail = str(error)
                raise ToolServerError("tool-server-unavailable", f"the tool server {server.name} did not start ({detail})")
            self._connections[server] = conn
            return conn

    async def _hold(self, conn: _Connection) -> None:
        """Open the server's session and keep it open until ``conn.stop`` (one task
        enters and leaves the SDK's context managers, as anyio requires)."""
        from mcp import ClientSession

        try:
            async with _transport(conn.server) as (read, write):
                async with ClientSession(read, write) as session:
                    await asyncio.wait_for(session.initialize(), CONNECT_TIMEOUT)
                    conn.session = session
                    conn.ready.set()
                    await conn.stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller, logged
            conn.error = exc
            if not isinstance(exc, asyncio.CancelledError):
                logger.warning("tool server %s closed: %s", conn.server.name, _first_cause(exc))
        finally:
            conn.stop.set()
            conn.ready.set()
            if self._connections.get(conn.server) is conn:
                del self._connections[conn.server]

    def _drop(self, conn: _Connection) -> None:
        conn.stop.set()
        if self._connections.get(conn.server) is conn:
            del self._connections[conn.server]

    async def _list(self, server: ToolServer) -> list[ServerTool]:
        from mcp import types

        conn = await self._connection(server)
        if conn.tools is None:
            try:
                tools: list[ServerTool] = []
                cursor = None
                while True:
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await conn.session.list_tools(params=params)
                    tools.extend(ServerTool(t.name, t.description or "", dict(t.input_schema or {})) for t in page.tools)
                    cursor = getattr(page, "next_cursor", None)
                    if not cursor:
                        break
            except Exception as exc:
                self._drop(conn)
                raise ToolServerError("tool-server-unavailable", f"the tool server {server.name} failed ({exc})") from exc
            conn.tools = tools
        return conn.tools

    async def _call(self, server: ToolServer, tool: str, arguments: dict) -> CallOutcome:
        conn = await self._connection(server)
        try:
            result = await conn.session.call_tool(tool, arguments)
        except asyncio.CancelledError:
            self._drop(conn)  # the time limit passed: a server that hangs is started again
            raise
        except Exception as exc:
            self._drop(conn)
            cause = _first_cause(exc)
            raise ToolServerError(
                "tool-server-unavailable", f"the tool server {server.name} failed during the call ({cause})"
            ) from exc
        texts = []
        for part in result.content or ():
            text = getattr(part, "text", None)
            texts.append(text if isinstance(text, str) else f"[{getattr(part, 'type', 'content')} content left out]")
        structured = result.structured_content
        return CallOutcome("\n".join(texts), structured if isinstance(structured, dict) else None, bool(result.is_error))

    def list_tools(self, server: ToolServer, timeout: float | None = None) -> list[ServerTool]:
        """The tools ``server`` lists (kept for the life of its session).

        Raises:
            ToolServerError: it could not be started or reached in time.
        """
        return self.run(self._list(server), call_timeout() if timeout is None else timeout)

    def call_tool(self, server: ToolServer, tool: str, arguments: dict, timeout: float | None = None) -> CallOutcome:
        """Call ``tool`` on ``server`` with ``arguments`` (a JSON object), within
        ``timeout`` seconds (default ``call_timeout()``).

        Returns:
            CallOutcome; ``is_error`` when the server answered with ``isError``.

        Raises:
            ToolServerError: the server could not be reached, died during the call
                (``tool-server-unavailable``; it is started again at its next use) or
                passed the time limit (``tool-timeout``).
        """
        return self.run(self._call(server, tool, arguments), call_timeout() if timeout is None else timeout)

    def close(self) -> None:
        """Close every session (their stdio servers end) and stop the loop."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None or self._pid != os.getpid():
            return

        async def _close_all() -> None:
            conns = list(self._connections.values())
            for conn in conns:
                conn.stop.set()
            tasks = [c.task for c in conns if c.task is not None]
            if tasks:
                await asyncio.wait(tasks, timeout=5)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_close_all(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)


_pool = ToolServerPool()


def pool() -> ToolServerPool:
    """This process's ``ToolServerPool``."""
    return _pool


def list_server_tools(server: ToolServer) -> list[ServerTool]:
    """``pool().list_tools(server)``."""
    return _pool.list_tools(server)
