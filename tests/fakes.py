"""Fakes shared by the tests: an OpenAI-compatible chat-completions server on loopback.

``FakeOpenAIServer`` is a real HTTP server in a thread, reached through the official
``openai`` client (not a mock object). Every call is recorded in ``requests`` as
``{"path", "auth", "body"}`` before it is answered; what it answers is ``reply(request)
-> (status, JSON)``, given to the constructor or overridden by a subclass.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAIServer:
    """A chat-completions endpoint on ``127.0.0.1`` at a free port.

    Args:
        reply: ``(request) -> (status, answer)`` for each call, ``request`` being
            ``{"path", "auth", "body"}``; a subclass may override ``reply`` instead.

    Use it as a context manager (serves inside the block, shuts down after), or call
    ``start()`` and ``close()``. ``base_url`` is what ``OPENAI_BASE_URL`` takes.
    """

    def __init__(self, reply: Callable[[dict], tuple[int, dict]] | None = None):
        self.requests: list[dict] = []
        self._reply = reply
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                fake.requests.append(request)
                status, answer = fake.reply(request)
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, request: dict) -> tuple[int, dict]:
        """What a call is answered: ``(HTTP status, JSON body)``."""
        if self._reply is None:
            raise NotImplementedError("give FakeOpenAIServer a reply, or override reply()")
        return self._reply(request)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def bodies(self) -> list[dict]:
        """The JSON body of every call, in the order they came."""
        return [request["body"] for request in self.requests]

    def start(self) -> FakeOpenAIServer:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


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
            and usage: the answer's own fields (usage left out when None).
    """
    if isinstance(message, str):
        message = {"role": "assistant", "content": message}
    answer = {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()) if created is None else created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer
