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

What a server sends is read bounded, only so that an enormous or endless message is not
read whole into memory: during a call, one message longer than ``answer_limit()`` (at
least 16 MiB; a stdio server's line, an HTTP response's JSON body or one event of its
stream) is read no further, and the call fails ``tool-result-too-large``; a stdio
server's session ends with it (the rest of its output is discarded as the server is
stopped; its next use starts it again), an HTTP server's session stays open. The
handshake and the list of tools are read to the same bound; past it the server is
``tool-server-unavailable``. Whether an answer is kept is decided once it is read, on
what is kept of it (``seats.tool_servers``: ``WORKFORCE_TOOL_RESULT_CHARS``).
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
    """A tool server could not be reached, died, passed the call's time limit, or sent
    a message longer than ``answer_limit()``. ``code`` is the refusal's code:
    ``tool-server-unavailable``, ``tool-timeout`` or ``tool-result-too-large``."""

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


# One character of an answer is at most this many on the wire: an astral character
# written as a JSON escape of its surrogate pair (``\ud83d\ude00``).
WIRE_CHARS_PER_CHAR = 12
# Room for the JSON-RPC envelope around the result.
ENVELOPE_CHARS = 64 * 1024
# The least a message is read to, whatever ``WORKFORCE_TOOL_RESULT_CHARS``: what is not
# kept (an image's base64, the envelope of many small blocks) counts on the wire too, so
# the bound is generous; it only keeps an enormous or endless message out of memory.
ANSWER_FLOOR_CHARS = 16 * 1024 * 1024


def answer_limit() -> int:
    """The most characters (bytes, over HTTP) one message of a tool server is read to:
    ``ANSWER_FLOOR_CHARS`` (16 MiB), or ``WIRE_CHARS_PER_CHAR`` times
    ``WORKFORCE_TOOL_RESULT_CHARS`` plus ``ENVELOPE_CHARS`` when that is more (so no answer
    within ``WORKFORCE_TOOL_RESULT_CHARS``, measured once read as JSON, is ever cut). An
    answer whose wire form passes it is read no further and refused
    ``tool-result-too-large``, even one whose kept text would be within the limit (16,777,216
    with the default of 100,000)."""
    return max(ANSWER_FLOOR_CHARS, WIRE_CHARS_PER_CHAR * int(settings.WORKFORCE_TOOL_RESULT_CHARS) + ENVELOPE_CHARS)


def _unit(server: ToolServer) -> str:
    """What a read bound counts: a stdio server's characters, an HTTP server's bytes."""
    return "characters" if server.command else "bytes"


@dataclass
class _ReadLimit:
    """A session's read bound (``answer_limit``, taken again as each call starts) and
    whether a message passed it since then (``exceeded``)."""

    most: int
    exceeded: bool = False


@dataclass
class _Connection:
    server: ToolServer
    session: Any = None
    tools: list[ServerTool] | None = None
    task: asyncio.Task | None = None
    limit: _ReadLimit = field(default_factory=lambda: _ReadLimit(answer_limit()))
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    error: BaseException | None = None


@contextlib.asynccontextmanager
async def _transport(server: ToolServer, limit: _ReadLimit) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    if server.command:
        command = sys.executable if server.command == "python" else server.command
        env = {name: os.environ[name] for name in server.env if name in os.environ}
        command, args = _dying_with_us(command, list(server.args), server.cwd)
        params = StdioServerParameters(command=command, args=args, env=env, cwd=server.cwd or None)
        async with _bounded_stdio_client(params, limit) as streams:
            yield streams[0], streams[1]
    else:
        assert server.url is not None
        missing = [variable for _, variable in server.headers if variable not in os.environ]
        if missing:
            raise ToolServerError("tool-server-unavailable", f"the variable {', '.join(missing)} for its headers is not set")
        headers = {header: os.environ[variable] for header, variable in server.headers}
        async with _bounded_http_client(headers, limit) as client:
            # The SDK's own bound on one event of a stream, just past ours (which trips first).
            async with streamable_http_client(server.url, http_client=client, max_sse_event_size=limit.most + 1) as streams:
                yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def _bounded_stdio_client(params: Any, limit: _ReadLimit) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``mcp.client.stdio.stdio_client`` (the same process start and shutdown,
    through its helpers), but reading the server's stdout bounded: a line longer than
    ``limit.most`` characters sets ``limit.exceeded`` and ends the read (the rest of the
    output is discarded unkept), so the session ends and its pending call fails. The
    SDK's own reader keeps a line whole however long it grows. The process's start and
    stop are the SDK's own helpers (``mcp.client.stdio``'s, private to it: a new ``mcp``
    that moves them fails every stdio test of tests/seats/test_tool_servers.py)."""
    import anyio
    import anyio.lowlevel
    from anyio.streams.text import TextReceiveStream
    from mcp.client import stdio as sdk
    from mcp.shared.message import SessionMessage

    process = await sdk._create_platform_compatible_process(
        command=await sdk._get_executable_command(params.command),
        args=params.args,
        env=sdk.get_default_environment() | (params.env or {}),
        errlog=sys.stderr,
        cwd=params.cwd,
    )
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout is not None
        stdout = TextReceiveStream(process.stdout, encoding=params.encoding, errors=params.encoding_error_handler)
        try:
            # The session sees its stream end (a pending call fails) before the rest is drained.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
                async with read_stream_writer:
                    # The line read so far, in pieces (joined once it ends: a long line is not
                    # copied again with each chunk), and its length.
                    pending: list[str] = []
                    size = 0
                    async for chunk in stdout:
                        *ends, rest = chunk.split("\n")
                        for end in ends:
                            if size + len(end) > limit.most:
                                limit.exceeded = True
                                return
                            line = "".join([*pending, end])
                            pending, size = [], 0
                            await read_stream_writer.send(sdk._parse_line(line))
                        pending.append(rest)
                        size += len(rest)
                        if size > limit.most:  # no line end within the bound: read no more
                            limit.exceeded = True
                            return
        finally:
            await sdk._drain_stdout(process)  # discarded as it comes, so a server writing on is not blocked

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_stream_reader:
                async for message in write_stream_reader:
                    json = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((json + "\n").encode(params.encoding, errors=params.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(sdk._WRITER_FLUSH_TIMEOUT):
                    await writer_done.wait()
                await sdk._stop_server_process(process)
                await sdk._aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()


def _bounded_http_client(headers: dict[str, str], limit: _ReadLimit) -> Any:
    """The SDK's HTTP client (``create_mcp_http_client``'s timeouts and ``headers``) whose
    responses to a POST are read bounded: a JSON body longer than ``limit.most`` bytes, or
    one event of an event stream, sets ``limit.exceeded`` and fails the read there (the
    SDK answers the pending call with an error)."""
    import httpx2
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class TooLong(httpx2.StreamError):
        pass

    class Bounded(httpx2.AsyncByteStream):
        def __init__(self, stream: Any, events: bool) -> None:
            self.stream, self.events = stream, events

        async def __aiter__(self) -> AsyncIterator[bytes]:
            size, tail = 0, b""
            async for chunk in self.stream:
                if self.events:  # the bytes since the last blank line (an event's end)
                    seen = tail + chunk
                    ends = [seen.rfind(mark) for mark in (b"\n\n", b"\r\n\r\n", b"\r\r")]
                    end = max(ends)
                    if end >= 0:
                        size = len(seen) - end
                    else:
                        size += len(chunk)
                    tail = seen[-3:]
                else:
                    size += len(chunk)
                if size > limit.most:
                    limit.exceeded = True
                    raise TooLong(f"the answer passed {limit.most} bytes")
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    class Transport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self.inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner.handle_async_request(request)
            if request.method == "POST":
                events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
                response.stream = Bounded(response.stream, events)
            return response

        async def aclose(self) -> None:
            await self.inner.aclose()

    timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    return httpx2.AsyncClient(headers=headers, timeout=timeout, transport=Transport())


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
            async with _transport(conn.server, conn.limit) as (read, write):
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
            conn.limit.most, conn.limit.exceeded = answer_limit(), False
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
                if conn.limit.exceeded:
                    detail = f"its list of tools is longer than {conn.limit.most} {_unit(server)}"
                    raise ToolServerError("tool-server-unavailable", f"the tool server {server.name} failed ({detail})") from exc
                raise ToolServerError("tool-server-unavailable", f"the tool server {server.name} failed ({exc})") from exc
            conn.tools = tools
        return conn.tools

    async def _call(self, server: ToolServer, tool: str, arguments: dict) -> CallOutcome:
        conn = await self._connection(server)
        conn.limit.most, conn.limit.exceeded = answer_limit(), False
        try:
            result = await conn.session.call_tool(tool, arguments)
        except asyncio.CancelledError:
            self._drop(conn)  # the time limit passed: a server that hangs is started again
            raise
        except Exception as exc:
            if conn.limit.exceeded:
                conn.limit.exceeded = False
                if server.command:  # its reader stopped mid-line: the session is over
                    self._drop(conn)
                raise ToolServerError(
                    "tool-result-too-large",
                    f"the tool server {server.name} answered more than {conn.limit.most} {_unit(server)}, "
                    "and its answer was read no further",
                ) from exc
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

    async def _listed(self, server: ToolServer) -> list[ServerTool] | None:
        conn = self._connections.get(server)
        if conn is None or conn.session is None or conn.stop.is_set():
            return None
        return conn.tools

    def listed_tools(self, server: ToolServer) -> list[ServerTool] | None:
        """The tools ``server`` listed on the session this process holds open, without
        starting or asking it; None when no session of it is open or it has not listed."""
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                return None
        return self.run(self._listed(server), 5.0)

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
                (``tool-server-unavailable``; it is started again at its next use),
                passed the time limit (``tool-timeout``) or sent an answer longer than
                ``answer_limit()`` (``tool-result-too-large``; read no further).
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
