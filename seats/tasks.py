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


def drain_board_as_seat(org_id: str, board_id: str, seat_id: str, worker_key: str | None = None) -> dict:
    """One step of seat ``seat_id``'s drain of board ``board_id`` in ``org_id``: run at
    most one claimed row as the seat's turn and enqueue the next step while rows remain
    (``seats.drains.do_seat_drain``). Idempotent: the claim decides who works a row."""
    _boot()
    from .drains import do_seat_drain

    return do_seat_drain(org_id, board_id, seat_id, worker_key)


def sweep_board_drains() -> list:
    """Wake drains for board rows nothing picked up (``seats.drains.do_sweep_board_drains``);
    returns ``[[org id, board id, seat id, worker key], ...]`` enqueued."""
    _boot()
    from .drains import do_sweep_board_drains

    return [list(woken) for woken in do_sweep_board_drains()]
