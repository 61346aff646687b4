"""Who wrote a line (docs/architecture.md "Who said what"): ``postedBy``, the caller the
server resolved, recorded on each mailbox line, room line, conversation message, chat
message and seat's reply item beside the spec's ``principal`` (the session's user, the same on every line) and ``author`` (an
unverified label). The server sets it from the principal a view, a page or the MCP server
resolved, or from the seat whose turn it ran; no request body can.
"""

from __future__ import annotations

from typing import Literal, TypedDict


class PostedBy(TypedDict):
    """Who wrote a line, as the server knows it (docs/architecture.md "Who said what"):
    the ``postedBy`` of a mailbox line, a room line, a conversation's or a chat's message
    and a seat's reply (not of a turn's prompt the server builds, nor a tool call).

    ``kind`` is ``"user"`` (a person: the caller the HTTP API, a page or the MCP server
    resolved) or ``"seat"`` (a seat whose turn the server ran; ``id`` its seat id).
    ``verified`` is True when the server checked it: a user authenticated by token or
    login (``WORKFORCE_AUTH=token``), or a seat; False without authentication
    (``WORKFORCE_AUTH=none``), where ``id`` is the ``userId`` the caller named itself.
    Never read from a request's body: a caller cannot set it.
    """

    kind: Literal["user", "seat"]
    id: str
    verified: bool


def user_posted_by(user_id: str, *, verified: bool) -> PostedBy:
    """``{"kind": "user", "id": user_id, "verified": verified}``."""
    return {"kind": "user", "id": user_id, "verified": verified}


def seat_posted_by(seat_id: str) -> PostedBy:
    """``{"kind": "seat", "id": seat_id, "verified": True}``: a seat's line, set by the
    server code that ran the seat's turn (never by the model)."""
    return {"kind": "seat", "id": seat_id, "verified": True}


def as_posted_by(value: object) -> PostedBy | None:
    """``value`` (a stored ``posted_by`` column) as a ``PostedBy``; None for a row written
    before lines recorded it, or by the server on nobody's behalf. Never raises."""
    if not isinstance(value, dict):
        return None
    kind, ident = value.get("kind"), value.get("id")
    if kind not in ("user", "seat") or not isinstance(ident, str):
        return None
    return {"kind": kind, "id": ident, "verified": value.get("verified") is True}


__all__ = ["PostedBy", "user_posted_by", "seat_posted_by", "as_posted_by"]
