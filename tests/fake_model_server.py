"""A fake OpenAI-compatible chat-completions server on loopback, for tests only.

``FakeModelServer`` is a real HTTP server (``ThreadingHTTPServer`` in a daemon thread)
reached through the official ``openai`` client or any HTTP client, so a test in this
process and a real ``serve`` in another can both use it (``base_url`` is what
``OPENAI_BASE_URL`` takes). It behaves as the real servers do where they are unkind:

- **failures on a schedule** (``Failure``): 429 with ``Retry-After`` (or
  ``retry-after-ms``), Ollama's 503 when its queue is full, 500, a hang, a connection
  dropped before the answer or in the middle of a stream; error bodies shaped as
  OpenAI's (``{"error": {"message", "type", "param", "code"}}``);
- **OpenAI's request validation**: a tool name (offered, or in an assistant message's
  ``tool_calls``) over 64 characters or outside ``^[a-zA-Z0-9_-]+$``, a ``tool``
  message whose ``tool_call_id`` is not a string or answers no earlier tool call, are
  refused with 400 and OpenAI's own messages (``strict=False`` turns this off);
- **streaming** (``"stream": true``): any answer is sent as server-sent events of
  ``chat.completion.chunk`` objects shaped as ``openai.types.chat.ChatCompletionChunk``
  (a first chunk with the role, text in pieces, each tool call's id/type/name in its
  first delta and its arguments in pieces, ``finish_reason`` on the last choice chunk,
  a usage chunk with ``choices: []`` when ``stream_options.include_usage``), then
  ``data: [DONE]``.

What a call that does not fail is answered comes from ``reply(request) -> (status,
JSON)`` (given to the constructor or overridden by a subclass); by default the server
echoes the last user message. ``scripted()`` answers from lists of replies per model
name (a seat's model) and ``chat_completion()`` / ``tool_call()`` build answers,
including a ``finish_reason: "length"`` one and tool calls without an ``id``.

Every call, failed or not, is recorded in ``requests`` as ``{"n", "path", "auth",
"headers", "body", "at", "outcome"}`` (``at``: ``time.monotonic()`` when it came;
``outcome``: the status answered, ``"drop"``, ``"hang"`` or ``"drop-mid-stream"``).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_NAME = 64

# Error bodies as the servers send them (type/code as OpenAI's; 503's message is Ollama's
# when its queue is full).
ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("Bad request.", "invalid_request_error", None),
    408: ("Request timed out.", "timeout_error", None),
    429: (
        "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 1s.",
        "requests",
        "rate_limit_exceeded",
    ),
    500: ("The server had an error while processing your request. Sorry about that!", "server_error", None),
    502: ("Bad gateway.", "server_error", None),
    503: ("server busy, please try again.  maximum pending requests exceeded", "api_error", None),
}


def error_body(status: int, message: str | None = None, *, param: str | None = None, code: str | None = None) -> dict:
    """An error answer as OpenAI shapes it: ``{"error": {"message", "type", "param",
    "code"}}`` (defaults per status from ``ERRORS``)."""
    default_message, kind, default_code = ERRORS.get(status, ("Error.", "api_error", None))
    return {
        "error": {
            "message": message or default_message,
            "type": kind,
            "param": param,
            "code": code if code is not None else default_code,
        }
    }


@dataclass
class Failure:
    """A failure the server answers on some calls instead of its reply.

    Args:
        kind: an HTTP status (429, 503, 500, ...) answered with ``error_body(kind)``;
            ``"drop"`` (the connection is closed without an answer), ``"hang"`` (no
            answer for ``hang_seconds``, then the connection is closed), or
            ``"drop-mid-stream"`` (the answer starts, half of it is sent, then the
            connection is closed).
        every: fails the calls whose number (1-based, counting every call the server
            got) is a multiple of ``every`` (``every=3``: one call in three).
        first: fails the first ``first`` calls (``first=2``: two failures, then answers).
        retry_after: seconds sent as ``Retry-After`` (as given: ``1`` -> ``"1"``).
        retry_after_ms: milliseconds sent as ``retry-after-ms``.
        headers: other headers to send (``{"x-should-retry": "false"}``).
        hang_seconds: how long a ``"hang"`` holds the connection.

    With neither ``every`` nor ``first``, every call fails. The first listed Failure
    that matches a call wins.
    """

    kind: int | str
    every: int | None = None
    first: int | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    headers: dict | None = None
    hang_seconds: float = 30.0

    def matches(self, n: int) -> bool:
        """Whether call number ``n`` (1-based) fails."""
        if self.first is not None:
            return n <= self.first
        if self.every is not None:
            return n % self.every == 0
        return True

    def response_headers(self) -> dict[str, str]:
        headers = dict(self.headers or {})
        if self.retry_after is not None:
            headers["Retry-After"] = f"{self.retry_after:g}"
        if self.retry_after_ms is not None:
            headers["retry-after-ms"] = f"{self.retry_after_ms:g}"
        return headers


def tool_call(name: str, arguments: dict | str, *, id: str | None = "call_1") -> dict:
    """One ``tool_calls`` entry of an assistant message; ``id=None`` leaves the id out
    (as some servers do)."""
    call: dict = {
        "type": "function",
        "function": {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)},
    }
    if id is not None:
        call = {"id": id, **call}
    return call


def chat_completion(
    message: str | dict,
    *,
    model: str,
    id: str = "chatcmpl-1",
    created: int | None = None,
    finish_reason: str = "stop",
    usage: dict | None = None,
) -> dict:
    """A chat-completions answer with one choice.

    Args:
        message: the assistant's text, or the whole message (``{"role": "assistant",
            "content": ..., "tool_calls": [...]}``).
        model: the model name it answers as; id, created (default now), finish_reason
            (``"stop"``, ``"tool_calls"``, ``"length"``) and usage: the answer's own
            fields (usage left out when None).
    """
    if isinstance(message, str):
        message = {"role": "assistant", "content": message}
    answer = {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


def last_user_text(body: dict) -> str:
    """The content of the last ``user`` message in a request body ("" when none)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def echo(request: dict) -> tuple[int, dict]:
    """The default reply: the last user message, back as the answer's text."""
    body = request["body"]
    return 200, chat_completion(f"echo: {last_user_text(body)}", model=body.get("model", ""))


def scripted(
    replies: dict[str, list], *, key: Callable[[dict], str] = lambda body: body.get("model", "")
) -> Callable[[dict], tuple[int, dict]]:
    """A reply function answering each key's calls from its list, in order.

    Args:
        replies: ``{key: [answer, ...]}``; an answer is a text, an assistant message
            dict, a whole chat completion (has ``"choices"``), or ``(status, JSON)``.
            A key's last answer repeats once its list is used up; a key with no list
            is echoed.
        key: the key of a request body; default its model name (a seat's
            ``openai/<name>``).
    """
    lock = threading.Lock()
    taken: dict[str, int] = {}

    def reply(request: dict) -> tuple[int, dict]:
        body = request["body"]
        k = key(body)
        answers = replies.get(k)
        if not answers:
            return echo(request)
        with lock:
            i = taken.get(k, 0)
            taken[k] = i + 1
        answer = answers[min(i, len(answers) - 1)]
        if isinstance(answer, tuple):
            return answer
        if isinstance(answer, dict) and "choices" in answer:
            return 200, answer
        finish = "tool_calls" if isinstance(answer, dict) and answer.get("tool_calls") else "stop"
        return 200, chat_completion(answer, model=body.get("model", ""), finish_reason=finish)

    return reply


def validate(body: dict, *, max_name: int = MAX_NAME) -> tuple[int, dict] | None:
    """OpenAI's refusal of ``body`` (``(400, error)``), or None when it would take it:
    tool names (offered and in assistant ``tool_calls``) of 1..``max_name`` characters
    from ``[a-zA-Z0-9_-]``, and ``tool`` messages whose ``tool_call_id`` is a string
    naming an earlier assistant tool call."""

    def bad_name(name: object, param: str) -> tuple[int, dict] | None:
        if not isinstance(name, str):
            return 400, error_body(
                400,
                f"Invalid type for '{param}': expected a string, but got {_json_type(name)} instead.",
                param=param,
                code="invalid_type",
            )
        if len(name) > max_name:
            message = (
                f"Invalid '{param}': string too long. Expected a string with maximum length {max_name}, "
                f"but got a string with length {len(name)} instead."
            )
            return 400, error_body(400, message, param=param, code="string_above_max_length")
        if not NAME_PATTERN.match(name):
            message = f"Invalid '{param}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            return 400, error_body(400, message, param=param, code="invalid_value")
        return None

    for i, tool in enumerate(body.get("tools") or []):
        problem = bad_name((tool.get("function") or {}).get("name"), f"tools[{i}].function.name")
        if problem:
            return problem
    called: set[str] = set()
    for i, message in enumerate(body.get("messages") or []):
        for j, call in enumerate(message.get("tool_calls") or []):
            problem = bad_name((call.get("function") or {}).get("name"), f"messages[{i}].tool_calls[{j}].function.name")
            if problem:
                return problem
            if not isinstance(call.get("id"), str):
                param = f"messages[{i}].tool_calls[{j}].id"
                message_text = f"Invalid type for '{param}': expected a string, but got {_json_type(call.get('id'))} instead."
                return 400, error_body(400, message_text, param=param, code="invalid_type")
            called.add(call["id"])
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str):
                param = f"messages[{i}].tool_call_id"
                message_text = f"Invalid type for '{param}': expected a string, but got {_json_type(call_id)} instead."
                return 400, error_body(400, message_text, param=param, code="invalid_type")
            if call_id not in called:
                message_text = (
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
                )
                return 400, error_body(400, message_text, param=f"messages.[{i}].role", code=None)
    return None


def _drop(handler: BaseHTTPRequestHandler) -> None:
    """Close the call's connection now, without (the rest of) an answer."""
    handler.close_connection = True
    try:
        handler.wfile.flush()
        handler.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a decimal", dict: "an object", list: "an array"}.get(
        type(value), "a value"
    )


def stream_chunks(answer: dict, *, include_usage: bool = False, piece: int = 4) -> list[dict]:
    """``answer`` (a chat completion) as the ``chat.completion.chunk`` objects a server
    streams for it, in order: text in pieces of ``piece`` characters, each tool call's
    id/type/name first and its arguments in pieces, finish_reason last (then a usage
    chunk with ``choices: []`` when ``include_usage``)."""
    base = {k: answer[k] for k in ("id", "created", "model") if k in answer}
    base["object"] = "chat.completion.chunk"
    chunks: list[dict] = []

    def chunk(delta: dict, finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunks.append({**base, "choices": [choice]})

    choice = answer["choices"][0]
    message = choice["message"]
    chunk({"role": "assistant", "content": "", "refusal": None})
    text = message.get("content") or ""
    for start in range(0, len(text), piece):
        chunk({"content": text[start : start + piece]})
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        first: dict = {"index": index}
        if call.get("id") is not None:
            first["id"] = call["id"]
        first["type"] = call.get("type", "function")
        first["function"] = {"name": function.get("name"), "arguments": ""}
        chunk({"tool_calls": [first]})
        arguments = function.get("arguments") or ""
        for start in range(0, len(arguments), piece * 4):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": arguments[start : start + piece * 4]}}]})
    chunk({}, choice.get("finish_reason") or "stop")
    if include_usage:
        usage = answer.get("usage") or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


class FakeModelServer:
    """A chat-completions endpoint on ``127.0.0.1`` at a free port.

    Args:
        reply: ``(request) -> (status, answer)`` for each call that does not fail,
            ``request`` being the recorded dict (see the module); default ``echo``. A
            subclass may override ``reply`` instead.
        failures: ``Failure`` entries, checked in order on every call before it is
            validated or answered.
        strict: refuse what OpenAI refuses (``validate``) with its 400.
        piece: characters per streamed text delta.

    Use it as a context manager (serves inside the block, shuts down after), or call
    ``start()`` and ``close()``. ``base_url`` is what ``OPENAI_BASE_URL`` takes.
    """

    def __init__(
        self,
        reply: Callable[[dict], tuple[int, dict]] | None = None,
        *,
        failures: Iterable[Failure] = (),
        strict: bool = True,
        piece: int = 4,
    ):
        self.requests: list[dict] = []
        self._reply = reply
        self.failures = list(failures)
        self.strict = strict
        self.piece = piece
        self._lock = threading.Lock()
        self._closing = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 as the real servers speak it: kept-alive connections, and a
            # stream in chunked encoding, so a stream cut off is an error to the client.
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode(errors="replace")}
                with fake._lock:
                    n = len(fake.requests) + 1
                    request = {
                        "n": n,
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                        "at": time.monotonic(),
                        "outcome": None,
                    }
                    fake.requests.append(request)
                fake._handle(self, request)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ------------------------------------------------------------------ answering

    def reply(self, request: dict) -> tuple[int, dict]:
        """What a call that does not fail is answered: ``(HTTP status, JSON body)``."""
        return (self._reply or echo)(request)

    def _handle(self, handler: BaseHTTPRequestHandler, request: dict) -> None:
        failure = next((f for f in self.failures if f.matches(request["n"])), None)
        try:
            if failure is not None and failure.kind in ("drop", "hang"):
                request["outcome"] = failure.kind
                if failure.kind == "hang":
                    self._closing.wait(failure.hang_seconds)
                _drop(handler)
                return
            if failure is not None and failure.kind != "drop-mid-stream":
                status = int(failure.kind)
                request["outcome"] = status
                self._send_json(handler, status, error_body(status), failure.response_headers())
                return
            refusal = validate(request["body"]) if self.strict else None
            status, answer = refusal or self.reply(request)
            request["outcome"] = status
            body = request["body"]
            if status == 200 and body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                chunks = stream_chunks(answer, include_usage=include_usage, piece=self.piece)
                if failure is not None:  # drop-mid-stream
                    request["outcome"] = "drop-mid-stream"
                    self._send_stream(handler, chunks[: max(len(chunks) // 2, 1)], done=False)
                    _drop(handler)
                    return
                self._send_stream(handler, chunks, done=True)
                return
            if failure is not None:  # drop-mid-stream on a plain answer: half the body
                request["outcome"] = "drop-mid-stream"
                data = json.dumps(answer).encode()
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(data)))
                handler.end_headers()
                handler.wfile.write(data[: len(data) // 2])
                handler.wfile.flush()
                _drop(handler)
                return
            self._send_json(handler, status, answer, {})
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up (a timeout under test)

    @staticmethod
    def _send_json(handler: BaseHTTPRequestHandler, status: int, answer: dict, headers: dict[str, str]) -> None:
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _send_stream(handler: BaseHTTPRequestHandler, chunks: list[dict], *, done: bool) -> None:
        def write(data: bytes) -> None:
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()

        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream; charset=utf-8")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for chunk in chunks:
            write(f"data: {json.dumps(chunk)}\n\n".encode())
        if done:
            write(b"data: [DONE]\n\n")
            handler.wfile.write(b"0\r\n\r\n")  # the last chunk: the answer is whole
            handler.wfile.flush()

    # ------------------------------------------------------------------ looking at it

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def bodies(self) -> list[dict]:
        """The JSON body of every call, in the order they came."""
        return [request["body"] for request in self.requests]

    def outcomes(self) -> list[int | str | None]:
        """What each call was answered (status, ``"drop"``, ...), in order."""
        return [request["outcome"] for request in self.requests]

    def failed(self) -> int:
        """How many calls were not answered 200."""
        return sum(1 for outcome in self.outcomes() if outcome != 200)

    def start(self) -> FakeModelServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self._closing.set()  # hung calls let go
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
