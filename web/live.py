"""The pages' live parts: server-sent events carrying HTML for htmx's SSE extension
(``sse-swap``). A mailbox page's stream is the kernel's item stream
(``workforce.streams.item_events``) rendered as fragments; a board page's re-sends the
board whenever its rows change; a room page's re-sends the room's lines when one lands
(woken by its note on PostgreSQL). Each is a stream of the web server
(``workforce_project.asgi``): it counts against ``WORKFORCE_STREAM_LIMIT`` and ends
when its client goes away."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence

from asgiref.sync import sync_to_async
from django.conf import settings

from workforce.streams import RETRY_MS, SAFETY_READ_SECONDS, AccessCheck, PreviewWatch, hub, is_postgres

# A board has no items to be woken by: its stream re-reads this often, on both databases.
BOARD_POLL_SECONDS = 0.5


def html_event(event: str, html: str, *, id: int | None = None) -> str:
    """One server-sent event named ``event`` whose data is ``html`` (one ``data:`` line
    per line of it; ``EventSource`` joins them with newlines)."""
    head = f"id: {id}\n" if id is not None else ""
    data = "".join(f"data: {line}\n" for line in html.splitlines() or [""])
    return f"{head}event: {event}\n{data}\n"


async def state_events(
    read: Callable[[], tuple[str, str]],
    *,
    since: str,
    event: str,
    poll_seconds: float = BOARD_POLL_SECONDS,
    topic: int | str | None = None,
    previews: Sequence[int] = (),
    partial: Callable[[dict, list[dict]], str | None] | None = None,
    still_allowed: Callable[[], bool] | None = None,
) -> AsyncIterator[str]:
    """Events of a whole fragment that has no per-item cursor: ``read()`` -> ``(signature,
    html)``; an ``event`` with the html each time the signature differs from the last one
    sent (first: ``since``, the page's own), a heartbeat comment when idle, until the
    server stops or the client goes away (the server cancels the stream then).

    ``topic``: the hub's key the fragment's writers notify (``workforce.streams.room_topic``):
    on PostgreSQL ``read`` runs again when woken (and every ``SAFETY_READ_SECONDS`` in case
    a note was missed), not on a timer. Without one, or on SQLite, it re-reads every
    ``poll_seconds``.

    ``previews``: sessions (pks) whose answers being written the stream also sends, each
    change as ``partial(preview, shown)`` (``workforce.streams.PreviewWatch``; a room's
    talk sessions, whose seats answer its posts), after the fragment read with it.

    ``still_allowed``: a blocking check that the reader still may read
    (``workforce.principals.access_held``), run before an event at most every
    ``ACCESS_RECHECK_SECONDS`` (``workforce.streams.AccessCheck``); False ends the stream."""
    fetch = sync_to_async(read)
    heartbeat = float(settings.WORKFORCE_STREAM_HEARTBEAT_SECONDS)
    # Subscribed on both databases: the hub ends the stream when the server stops.
    sub = hub.subscribe(topic) if topic is not None else None
    shared = sub.event if sub is not None else None
    watched = [hub.subscribe(pk, shared) for pk in previews] if partial is not None else []
    watch = PreviewWatch(watched, partial) if partial is not None else None
    interval = SAFETY_READ_SECONDS if sub is not None and is_postgres() else poll_seconds
    woken = True
    allowed = AccessCheck(still_allowed)
    last, last_sent = since, time.monotonic()
    try:
        yield f"retry: {RETRY_MS}\n\n"
        while not hub.stopping:
            if sub is not None:
                sub.event.clear()
            if watch is not None:
                await watch.gather(woken=woken)
            signature, html = await fetch()
            if signature != last:
                if not await allowed():
                    return
                last, last_sent = signature, time.monotonic()
                yield html_event(event, html)
            elif time.monotonic() - last_sent >= heartbeat:
                last_sent = time.monotonic()
                yield ": heartbeat\n\n"
            for text in watch.events() if watch is not None else ():
                if not await allowed():
                    return
                last_sent = time.monotonic()
                yield text
            wait = min(interval, max(0.0, last_sent + heartbeat - time.monotonic()))
            if sub is None:
                await asyncio.sleep(wait)
                continue
            woken = True
            try:
                await asyncio.wait_for(sub.event.wait(), timeout=wait)
            except TimeoutError:
                woken = False
    finally:
        for each in [sub, *watched]:
            if each is not None:
                hub.unsubscribe(each)
