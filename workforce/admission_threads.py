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

import asyncio
import os
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from asgiref.sync import sync_to_async

T = TypeVar("T")

# As many as asyncio gives a loop's default executor.
CHECK_THREADS = min(32, (os.cpu_count() or 1) + 4)

# One pool of threads per event loop, as its default executor is (a process may run
# several servers one after another: tests), made on first use; its idle threads end
# when their loop is gone.
_executors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, ThreadPoolExecutor] = weakref.WeakKeyDictionary()


async def run_check(check: Callable[..., T], *args, **kwargs) -> T:
    """``check(*args, **kwargs)`` on one of the running event loop's admission threads;
    its result.

    Args:
        check: a blocking function (a database read) that hands back the connections it
            used before it returns (``connections.close_all()``): the thread it ran on
            runs other checks next.
    """
    loop = asyncio.get_running_loop()
    executor = _executors.get(loop)
    if executor is None:
        executor = _executors[loop] = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="admission")
    return await sync_to_async(check, thread_sensitive=False, executor=executor)(*args, **kwargs)
