"""A request body read ahead of its handler, handed over again (ASGI).

The web server reads a request's whole body before it gives the request a slot
(``workforce_project.admission``), and the MCP mount reads it to route a call
(``mail.mcp_http``); both then hand the handler a ``receive`` that gives that body back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]


def replay(body: bytes, receive: Receive) -> Receive:
    """An ASGI ``receive`` that hands ``body`` over once, whole, then defers to
    ``receive`` (which tells of the client's disconnect).

    Args:
        body: the request's whole body, already read.
        receive: the connection's own ``receive``.
    """
    pending = True

    async def again() -> dict[str, Any]:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again
