"""Helpers for the ``postedBy`` tests (docs/architecture.md "Who said what"): the two
authentication modes, the two people, acting as one of them over the API and on the
pages, and reading the first events of a stream."""

from __future__ import annotations

import asyncio
import json
import re

from django.contrib.auth.models import User

from web.views import SESSION_USER
from workforce.models import Membership, Organization

ALICE = "alice"
BOB = "bob"
MODES = ("none", "token")


def people(org: Organization) -> dict[str, User]:
    """The Django users ``alice`` and ``bob``, members of ``org`` (what token mode
    authenticates; without authentication they are only the ``userId`` a caller names)."""
    users = {}
    for name in (ALICE, BOB):
        users[name] = User.objects.create_user(name)
        Membership.objects.create(user=users[name], organization=org)
    return users


def user(name: str, mode: str) -> dict:
    """The ``postedBy`` a line by person ``name`` carries in auth mode ``mode``."""
    return {"kind": "user", "id": name, "verified": mode == "token"}


def seat(seat_id: str) -> dict:
    """The ``postedBy`` a line by seat ``seat_id`` carries."""
    return {"kind": "seat", "id": seat_id, "verified": True}


class Acting:
    """Calls the API and the pages as one person, in one auth mode: with ``token``, DRF's
    forced authentication (the API) and a login session (the pages); without, the
    ``userId`` the caller names (the API) and the ``/who`` choice (the pages)."""

    def __init__(self, client, users: dict[str, User], mode: str):
        self.client, self.users, self.mode = client, users, mode
        self.name: str | None = None

    def be(self, name: str) -> Acting:
        """Act as ``name`` from now on (the API and the pages)."""
        self.name = name
        if self.mode == "token":
            self.client.force_authenticate(self.users[name])
            self.client.force_login(self.users[name])
        else:
            session = self.client.session
            session[SESSION_USER] = name
            session.save()
        return self

    def body(self, input: dict, **extra) -> dict:
        """An action call's body: ``userId`` only without authentication."""
        return {**({"userId": self.name} if self.mode == "none" else {}), "input": input, **extra}

    def query(self) -> str:
        """A read's query string naming the reader without authentication."""
        return f"?userId={self.name}" if self.mode == "none" else ""

    def act(self, kind: str, session_id: str, action: str, input: dict, **extra):
        """``POST /api/flows/{kind}/{session_id}/actions/{action}``; the response."""
        return self.client.post(f"/api/flows/{kind}/{session_id}/actions/{action}", self.body(input, **extra), format="json")


def stream_events(client, path: str, count: int, *, timeout: float = 10.0) -> list[str]:
    """The ``data:`` payloads of the first ``count`` events of the server-sent stream at
    ``path`` (the stream is closed after them). Needs a transactional test: the stream
    reads in a thread of its own."""
    response = client.get(path, HTTP_ACCEPT="text/event-stream")
    assert response.status_code == 200, response
    content = response.streaming_content

    async def read() -> list[str]:
        got: list[str] = []
        text = ""
        try:
            while len(got) < count:
                chunk = await asyncio.wait_for(anext(content), timeout)
                text += chunk.decode() if isinstance(chunk, bytes) else chunk
                events = text.split("\n\n")
                text = events.pop()
                for event in events:
                    data = [line[len("data: ") :] for line in event.splitlines() if line.startswith("data: ")]
                    if data:
                        got.append("\n".join(data))
        finally:
            await content.aclose()
        return got

    return asyncio.run(read())


def stream_items(client, path: str, count: int) -> list[dict]:
    """``stream_events`` of a session's item stream, each parsed as its item's JSON."""
    return [json.loads(data) for data in stream_events(client, path, count)]


_LINE = re.compile(r'<li class="line[^"]*"[^>]*>\s*<span class="from">([^<]*)</span>(<span class="posted-by"[^>]*>[^<]*</span>)?')
_ATTR = re.compile(r'data-(kind|id|verified)="([^"]*)"')


def page_writers(html: str) -> list[tuple[str, dict | None]]:
    """Each line on a page (a transcript line, a room line, a conversation message; not a
    route note), in order: ``(the writer shown, its postedBy as the page marks
    it, or None)``."""
    found = []
    for match in _LINE.finditer(html):
        marked = None
        if match.group(2):
            attrs = dict(_ATTR.findall(match.group(2)))
            marked = {"kind": attrs["kind"], "id": attrs["id"], "verified": attrs["verified"] == "true"}
        found.append((match.group(1), marked))
    return found
