"""A small server-sent events client for the tests and the benchmark: reads a stream on
a thread and hands its events over a queue."""

from __future__ import annotations

import http.client
import json
import queue
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class Event:
    id: str | None
    data: dict | None
    comment: str | None = None
    received_at: float = 0.0  # time.time() when its blank line arrived
    event: str | None = None  # the ``event:`` name (None: an unnamed, ``message``, event)


class SseStream:
    """``GET path`` on ``base`` as an event stream, read on a daemon thread.

    ``status`` and ``headers`` are set once the answer started; ``body`` holds a
    non-200 answer's JSON. ``next_event`` / ``events`` take what arrived; ``closed`` is
    set when the server ended the stream.
    """

    def __init__(self, base: str, path: str, *, headers: dict | None = None, timeout: float = 30.0):
        parts = urlsplit(base)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        self.conn.request("GET", path, headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self.conn.getresponse()
        self.status = self.response.status
        self.headers = self.response.msg  # case-insensitive
        self.body = None
        self.queue: queue.Queue[Event] = queue.Queue()
        self.closed = threading.Event()
        if self.status != 200:
            self.body = json.loads(self.response.read() or b"null")
            self.closed.set()
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        event_id, comment, name = None, None, None
        data: list[str] = []
        try:
            while True:
                raw = self.response.fp.readline()
                if not raw:
                    break
                line = raw.decode().rstrip("\n")
                if line == "":
                    if data or comment is not None:
                        parsed = json.loads("\n".join(data)) if data else None
                        self.queue.put(Event(event_id, parsed, comment, time.time(), name))
                    event_id, data, comment, name = None, [], None, None
                elif line.startswith(":"):
                    comment = line[1:].strip()
                elif line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("id:"):
                    event_id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
        except (OSError, ValueError):
            pass
        finally:
            self.closed.set()

    def next_event(self, timeout: float = 15.0, *, comments: bool = False) -> Event:
        """The next event (skipping heartbeat comments unless ``comments``); fails after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no event within {timeout}s")
            try:
                event = self.queue.get(timeout=left)
            except queue.Empty:
                raise AssertionError(f"no event within {timeout}s") from None
            if comments or event.comment is None:
                return event

    def events(self, n: int, timeout: float = 15.0) -> list[Event]:
        """The next ``n`` events."""
        return [self.next_event(timeout) for _ in range(n)]

    def quiet_for(self, seconds: float) -> list[Event]:
        """The events (not comments) that arrive within ``seconds``."""
        got: list[Event] = []
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                event = self.queue.get(timeout=left)
            except queue.Empty:
                break
            if event.comment is None:
                got.append(event)
        return got

    def close(self) -> None:
        try:
            self.conn.sock and self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.conn.close()
