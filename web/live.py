"""The pages' live parts: server-sent events carrying HTML for htmx's SSE extension
(``sse-swap``). A mailbox page's stream is the kernel's item stream
(``workforce.streams.item_events``) rendered as fragments; a board page's re-sends the
board whenever its rows change."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

from asgiref.sync import sync_to_async
from django.conf import settings

from workforce.streams import RETRY_MS, hub

# A board has no items to be woken by: its stream re-reads this often, on both databases.
BOARD_POLL_SECONDS = 0.5


def html_event(event: str, html: str, *, id: int | None = None) -> str:
    """One server-sent event named ``event`` whose data is ``html`` (one ``data:`` line
    per line of it; ``EventSource`` joins them with newlines)."""
    head = f"id: {id}\n" if id is not None else ""
    data = "".join(f"data: {line}\n" for line in html.splitlines() or [""])
    return f"{head}event: {event}\n{data}\n"


async def state_events(
    read: Callable[[], tuple[str, str]], *, since: str, event: str, poll_seconds: float = BOARD_POLL_SECONDS
) -> AsyncIterator[str]:
    """Events of a whole fragment that has no per-item cursor: ``read()`` -> ``(signature,
    html)``, re-read every ``poll_seconds``; an ``event`` with the html each time the
    signature differs from the last one sent (first: ``since``, the page's own), a
    heartbeat comment when idle, until the server stops."""
    fetch = sync_to_async(read)
    heartbeat = float(settings.WORKFORCE_STREAM_HEARTBEAT_SECONDS)
    last, last_sent = since, time.monotonic()
    yield f"retry: {RETRY_MS}\n\n"
    while not hub.stopping:
        signature, html = await fetch()
        if signature != last:
            last, last_sent = signature, time.monotonic()
            yield html_event(event, html)
        elif time.monotonic() - last_sent >= heartbeat:
            last_sent = time.monotonic()
            yield ": heartbeat\n\n"
        await asyncio.sleep(poll_seconds)
