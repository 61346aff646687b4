"""django-q2 entry points: ids and JSON in, one service call, no logic (design.md §2).

Every task is idempotent: a delivery is claimed with a conditional UPDATE, so the
broker's redelivery never runs a seat's turn twice.
"""
from __future__ import annotations

import logging

from workforce.runtime import ensure_booted

from .services import do_deliver, do_sweep_deliveries

logger = logging.getLogger(__name__)


def _boot() -> None:
    from django_q.conf import Conf

    if Conf.SYNC:  # the task runs inside the caller's process, configured by the caller
        return
    try:
        ensure_booted()
    except Exception:  # a bad tree: log it; the delivery still runs with what is configured
        logger.exception("booting the task worker failed")


def deliver_post(delivery_id: int) -> str:
    """Run delivery ``delivery_id`` (one post to one member). Returns its outcome
    (``done``, ``failed``, ``not-claimed``, ``lease-lost``)."""
    _boot()
    return do_deliver(delivery_id)


def sweep_deliveries() -> dict:
    """Re-enqueue deliveries a crashed worker or the broker dropped. Returns
    ``{"requeued": [ids], "abandoned": [ids]}``."""
    _boot()
    result = do_sweep_deliveries()
    return {"requeued": result.requeued, "abandoned": result.abandoned}
