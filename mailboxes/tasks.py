"""django-q2 entry points of mailboxes: ids in, one service call, no logic (docs/architecture.md
"Layers").

Every task is idempotent: a route is decided with a conditional UPDATE, so the broker's
redelivery never records a post's route twice.
"""
from __future__ import annotations

from workforce.runtime import boot_for_task

from .routing import do_route_post, do_sweep_routes


def route_post(route_id: int) -> str:
    """Decide where one client post on a routed mailbox goes and wake that member
    (``mailboxes.routing.do_route_post``). Returns ``held``, ``evaluated``,
    ``fallback``, ``failed`` or ``not-claimed``."""
    boot_for_task()
    return do_route_post(route_id)


def sweep_routes() -> list[int]:
    """Enqueue again the routes a lossy broker or a crashed worker dropped."""
    boot_for_task()
    return do_sweep_routes()
