"""Back-pressure: a bound on the work the task cluster has not finished (docs/running.md
"Back-pressure").

The backlog is the number of open wake rows, pending or running, summed over the sources
the apps register from their ``AppConfig.ready()`` (``register_backlog_source``): a
mailbox's deliveries, a coordinator's delegated posts, mail runs. Past
``WORKFORCE_BACKLOG_LIMIT`` (0 turns the bound off) the calls from outside that add wake
work (a post to a mailbox or a room, a coordinator's run, a mail send, a chat turn) are
refused with 503 ``backlog-full`` and ``Retry-After`` before anything is written
(``check_backlog``); what the cluster's own turns write (a seat's answer, a delegation)
is never refused, since that is the work draining.

The count is one query (every source's ``COUNT`` summed in one statement), made at most
once per ``BACKLOG_CACHE_SECONDS`` per process and kept meanwhile: a post while the
count is fresh adds no query. So the bound is soft by what one process admits in that
time and by the number of web processes; it is a brake on a growing backlog, not an
exact cap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet

from .refusals import Refusal
from .runtime import Slot

# How long a count is kept before the next check counts again (seconds): the hot path's
# cost is one COUNT per process per this long.
BACKLOG_CACHE_SECONDS = 1.0
# What a refused caller is told to wait (Retry-After, seconds): about what the cluster
# clears of a full backlog's excess at the defaults before the next count can admit.
BACKLOG_RETRY_AFTER_SECONDS = 5

_clock = time.monotonic  # the cache's clock (a test moves it on)
_sources: dict[str, Callable[[], QuerySet]] = {}
_lock = threading.Lock()
# (monotonic time counted, count), in this process's runtime (workforce.runtime); None: not counted yet.
_CACHED: Slot[tuple[float, int] | None] = Slot("workforce.backlog.cached", empty=lambda: None)


def register_backlog_source(name: str, open_rows: Callable[[], QuerySet]) -> None:
    """Count the rows ``open_rows()`` selects as backlog (called from an app's
    ``AppConfig.ready()``; registering ``name`` again replaces it).

    Args:
        name: the source's name, e.g. ``"mailboxes.delivery"``.
        open_rows: returns a QuerySet of the source's unfinished rows (pending and
            running); it is counted, never fetched.
    """
    _sources[name] = open_rows


def backlog_sources() -> list[str]:
    """The registered sources' names, sorted."""
    return sorted(_sources)


def count_backlog() -> int:
    """The open wake rows now, every source summed, in one query (no cache)."""
    if not _sources:
        return 0
    parts: list[str] = []
    params: list = []
    for name in sorted(_sources):
        sql, part_params = _sources[name]().order_by().values("pk").query.sql_with_params()
        parts.append(f"(SELECT COUNT(*) FROM ({sql}) AS backlog_part)")
        params.extend(part_params)
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + " + ".join(parts), params)
        row = cursor.fetchone()
    return int(row[0] or 0)


def current_backlog() -> int:
    """The backlog as last counted by this process, counted again when that count is
    older than ``BACKLOG_CACHE_SECONDS`` (one query; none while it is fresh)."""
    now = _clock()
    cached = _CACHED.get()
    if cached is not None and now - cached[0] < BACKLOG_CACHE_SECONDS:
        return cached[1]
    with _lock:
        cached = _CACHED.get()
        if cached is not None and _clock() - cached[0] < BACKLOG_CACHE_SECONDS:
            return cached[1]  # another thread counted while this one waited
        count = count_backlog()
        _CACHED.set((_clock(), count))
        return count


def reset_backlog_cache() -> None:
    """Forget the kept count: the next check counts again (tests; nothing else needs it)."""
    _CACHED.clear()


def check_backlog() -> None:
    """Refuse new wake work while the backlog is at or past ``WORKFORCE_BACKLOG_LIMIT``.

    No query when the limit is 0 (off) or the kept count is fresh.

    Raises:
        Refusal("backlog-full"): 503, ``retry_after`` = ``BACKLOG_RETRY_AFTER_SECONDS``.
    """
    limit = settings.WORKFORCE_BACKLOG_LIMIT
    if limit <= 0:
        return
    backlog = current_backlog()
    if backlog >= limit:
        raise Refusal(
            "backlog-full",
            f"{backlog} wakes are waiting for the workers (the bound is {limit}); nothing was posted. "
            f"Retry in {BACKLOG_RETRY_AFTER_SECONDS} s (Retry-After).",
            retry_after=BACKLOG_RETRY_AFTER_SECONDS,
        )


__all__ = [
    "BACKLOG_CACHE_SECONDS",
    "BACKLOG_RETRY_AFTER_SECONDS",
    "backlog_sources",
    "check_backlog",
    "count_backlog",
    "current_backlog",
    "register_backlog_source",
    "reset_backlog_cache",
]
