"""django-q2 entry points of mailboxes: ids in, one service call, no logic (design.md §2).

Every task is idempotent: a route is decided with a conditional UPDATE, so the broker's
redelivery never records a post's route twice.
"""
from __future__ import annotations

import logging

from workforce.runtime import ensure_booted

from .routing import do_route_post, do_sweep_routes

logger = logging.getLogger(__name__)


def _boot() -> None:
    from django_q.conf import Conf

    if Conf.SYNC:  # the task runs inside the caller's process, configured by the caller
        return
    try:
        ensure_booted()
    except Exception:  # a bad tree: log it; the task still runs with what is configured
        logger.exception("booting the task worker failed")


def route_post(route_id: int) -> str:
    """Decide where one client post on a routed mailbox goes and wake that member
    (``mailboxes.routing.do_route_post``). Returns ``held``, ``evaluated``,
    ``fallback``, ``failed`` or ``not-claimed``."""
    _boot()
    return do_route_post(route_id)


def sweep_routes() -> list[int]:
    """Enqueue again the routes a lossy broker or a crashed worker dropped."""
    _boot()
    return do_sweep_routes()
