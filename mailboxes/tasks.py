"""django-q2 entry points of mailboxes: ids in, one service call, no logic (docs/architecture.md
"Layers").

Every task is idempotent: a route is decided, and a delivery claimed, with a
conditional UPDATE, so the broker's redelivery never records a post's route twice nor
runs a seat's turn twice.
"""

from __future__ import annotations

from workforce.holders import outage_safe
from workforce.runtime import boot_for_task

from .deliveries import do_deliver, do_sweep_deliveries
from .notify import DELIVER_TASK
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


@outage_safe(DELIVER_TASK)
def deliver_post(delivery_id: int) -> str:
    """Run delivery ``delivery_id`` (one post to one member;
    ``mailboxes.deliveries.do_deliver``). Returns its outcome (``done``, ``failed``,
    ``waiting``, ``not-claimed``, ``lease-lost``, or ``outage`` when a database outage
    outlasted its wait: ``workforce.holders.outage_safe``)."""
    boot_for_task()
    return do_deliver(delivery_id)


def sweep_deliveries() -> dict:
    """Re-enqueue deliveries a crashed worker or the broker dropped, and release held ones
    with room to run. Returns ``{"requeued": [ids], "abandoned": [ids], "released": [ids]}``."""
    boot_for_task()
    result = do_sweep_deliveries()
    return {"requeued": result.requeued, "abandoned": result.abandoned, "released": result.released}
