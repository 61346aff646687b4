"""An answer's text as the model writes it (docs/api.md "Watching a session live",
``partial-text``): never stored as an item or a line, carried from the process that runs
the turn to the streams of the web process.

A turn (``seats.turns.run_turn``) hands each model call ``TextPreview.writer()`` as its
``on_text``. The text so far is published at most every ``INTERVAL`` seconds, counted from
the call's start, so a text written whole within that (an embedded model's) is never
published: its line follows at once. Pieces in between are coalesced: each preview
carries the whole text so far, and a missed one loses nothing. It goes to the turn's
session and to its parent session (where the run shows as busy: a mailbox, a coordinator
conversation, a talk session), unless the turn's session is private on its own
(``workforce.privacy``: the parent's readers would not read it):

- on PostgreSQL as a note on the streams' channel, ``t<session pk>:<preview JSON>``
  (a ``pg_notify`` outside any transaction, delivered at once; the text is cut to its
  end to stay under NOTIFY's 8000 bytes, ``start`` saying where it begins);
- on SQLite, whose streams poll, as a file ``<WORKFORCE_VAR_DIR>/previews/<session
  pk>/<request id>.json`` (replaced whole; SQLite's web server and cluster share a
  machine and that directory).

``TextPreview.end()``, called by ``TurnResult.finish`` inside the transaction that writes
the turn's end, sends a ``done`` note that PostgreSQL delivers with that commit (dropped
with a rollback) and removes the files. A stream ends a preview it shows when its done
note arrives, or when it finds the turn's request no longer running (on SQLite at each
poll; on PostgreSQL at its safety read), after sending the items stored with it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connections

from .facets import PRIVATE_SESSION, PRIVATE_SESSIONS
from .streams import CHANNEL, NOTE_PREFIX, previews_dir

logger = logging.getLogger(__name__)

# Seconds between two previews of one turn: at most about ten events a second per turn.
INTERVAL = 0.1
# NOTIFY payloads are limited to 8000 bytes: the note's JSON stays under this.
NOTE_BYTES = 7900


def _postgres() -> bool:
    return connections["default"].vendor == "postgresql"


class TextPreview:
    """The published text of one turn's answer while it is written.

    Args:
        request: the turn's ``Request`` (its ``request_id`` names the preview).
        session: the ``Session`` the turn is recorded in; its parent's streams get the
            preview too.
        agent_name: who is answering (the reply's ``agentName``: the seat's id).
        interval: seconds between two previews (default ``INTERVAL``).
    """

    def __init__(
        self,
        *,
        request: Any,
        session: Any,
        agent_name: str,
        interval: float | None = None,
        to_parent: Callable[[], bool] | None = None,
    ):
        self.request_id = request.request_id
        # The parent's readers read this session too, unless it is private on its own
        # (workforce.privacy): then its text stays on its own streams.
        parent = getattr(session, "parent_id", None)
        self.targets = [session.pk] + ([parent] if parent and not _private_itself(session) else [])
        # Whether the text being written can still land on the parent (``to_parent()``):
        # a woken seat's text lands in its mailbox only as a routed post's answer not yet
        # handed over by a tool; once it cannot, the parent's preview ends.
        self.to_parent = to_parent
        self.base = {"requestId": request.request_id, "sessionId": session.session_id, "agentName": agent_name}
        self.interval = INTERVAL if interval is None else interval
        self.text = ""
        self.sent_at = time.monotonic()
        self.published = False
        self._thread = threading.get_ident()

    def writer(self):
        """``on_text`` for one model call: that call's pieces, from an empty text (the
        answer is the last call's text). The call's start counts as a preview sent: an
        answer written whole within ``interval`` (an embedded model's) publishes nothing
        and costs the turn no statement; a streaming model's first piece, coming later,
        is published at once."""
        self.text = ""
        self.sent_at = time.monotonic()
        return self.add

    def add(self, piece: str) -> None:
        """One piece of the answer (``ModelCall.on_text``): published when ``interval``
        has passed since the last preview. Never raises."""
        try:
            self.text += piece
            now = time.monotonic()
            if now - self.sent_at >= self.interval and self.text.strip():
                self.sent_at = now
                self._leave_parent_unless_it_shows()
                self._publish({**self.base, "text": self.text, "start": 0, "done": False})
        except Exception:  # noqa: BLE001  (a preview must never take the turn down)
            logger.debug("a preview of %s was not published", self.base["requestId"], exc_info=True)

    def end(self) -> None:
        """The turn ended (call inside the transaction that writes its end): on
        PostgreSQL a ``done`` note delivered with the commit; the files removed. Nothing
        when no preview was published. Raises what the database raises."""
        if not self.published:
            return
        if _postgres():
            self._notify({**self.base, "text": "", "start": 0, "done": True})
            return
        for pk in self.targets:
            try:
                (previews_dir() / str(pk) / f"{self.request_id}.json").unlink(missing_ok=True)
            except OSError:
                logger.debug("a preview file of %s stayed", self.base["requestId"], exc_info=True)

    def _leave_parent_unless_it_shows(self) -> None:
        """Drop the parent from the targets once ``to_parent()`` says the text cannot land
        there, ending a preview the parent already shows (a ``done`` note to it alone on
        PostgreSQL, its file removed on SQLite)."""
        if len(self.targets) < 2 or self.to_parent is None or self.to_parent():
            return
        parent = self.targets.pop()
        if not self.published:
            return
        if _postgres():
            self._notify({**self.base, "text": "", "start": 0, "done": True}, targets=[parent])
        else:
            (previews_dir() / str(parent) / f"{self.request_id}.json").unlink(missing_ok=True)

    def _publish(self, data: dict) -> None:
        self.published = True
        if _postgres():
            self._notify(data)
            return
        body = json.dumps(data, ensure_ascii=False)
        for pk in self.targets:
            folder = previews_dir() / str(pk)
            folder.mkdir(parents=True, exist_ok=True)
            temp = folder / f".{self.request_id}.{os.getpid()}.{threading.get_ident()}"
            temp.write_text(body, encoding="utf-8")
            os.replace(temp, folder / f"{self.request_id}.json")

    def _notify(self, data: dict, targets: list[int] | None = None) -> None:
        targets = self.targets if targets is None else targets
        body = note_body(data)
        conn = connections["default"]
        notes = ", ".join(["pg_notify(%s, %s)"] * len(targets))  # one statement for every stream told
        params = [value for pk in targets for value in (CHANNEL, f"{NOTE_PREFIX}{pk}:{body}")]
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"SELECT {notes}", params)
        finally:
            if threading.get_ident() != self._thread and not conn.in_atomic_block:
                conn.close()  # a model's own thread: keep no connection there


def _private_itself(session: Any) -> bool:
    """True when ``session`` is private by its own kind, not only by its parent's."""
    if PRIVATE_SESSIONS.of(session.flow_kind):
        return True
    rule = PRIVATE_SESSION.of(session.flow_kind)
    return bool(rule is not None and rule(session))


def note_body(data: dict) -> str:
    """``data`` as a note's JSON, its ``text`` cut to its end (``start`` moved on by the
    characters cut) so the whole note stays under ``NOTE_BYTES``: the longest end of the
    text that fits (a character's cost in the note varies: UTF-8, JSON escapes)."""
    limit = NOTE_BYTES - 24  # room for the prefix and the session pk

    def encoded(cut: int) -> str:
        return json.dumps(
            {**data, "text": data["text"][cut:], "start": data["start"] + cut}, ensure_ascii=False, separators=(",", ":")
        )

    body = encoded(0)
    if len(body.encode()) <= limit:
        return body
    low, high = 1, len(data["text"])  # the fewest characters to cut: cutting them all fits
    while low < high:
        middle = (low + high) // 2
        if len(encoded(middle).encode()) <= limit:
            high = middle
        else:
            low = middle + 1
    return encoded(low)
