"""The threads the web server checks a request's credentials on before the request takes a
web slot or a stream place (``workforce_project.admission.has_credentials``, the MCP
mount's ``admit`` in ``mail.mcp_http``): threads of their own, never the event loop's
default executor.

Why: a check reads the database, so on PostgreSQL it waits for a connection of the web
pool (``WORKFORCE_WEB_CONCURRENCY`` of them, ``workforce_project.db_pool``). The requests
that hold those connections are in web slots, and a stream or a refusal there runs in
Django's stock ASGI handler, which logs every answer of 400 and up on the default
executor (``sync_to_async(log_response, thread_sensitive=False)``) before the answer goes
out and its connection comes back. With the checks on the default executor, a burst of
refused streams filled its threads with checks waiting for the pool while the pool's
holders waited for those threads: nothing was answered until the checks gave up, one
pool timeout (10 s) per check per thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from asgiref.sync import sync_to_async

T = TypeVar("T")

# As many as asyncio gives a loop's default executor; started on first use.
CHECK_THREADS = min(32, (os.cpu_count() or 1) + 4)

_executor = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="admission")


async def run_check(check: Callable[..., T], *args, **kwargs) -> T:
    """``check(*args, **kwargs)`` on one of the admission threads; its result.

    Args:
        check: a blocking function (a database read) that hands back the connections it
            used before it returns (``connections.close_all()``): the thread it ran on
            runs other checks next.
    """
    return await sync_to_async(check, thread_sensitive=False, executor=_executor)(*args, **kwargs)
