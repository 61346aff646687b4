"""django-q2 entry points: ids and JSON in, one service call, no logic (design.md §2).

Every task is idempotent: a delivery is claimed with a conditional UPDATE, so the
broker's redelivery never runs a seat's turn twice.
"""
from __future__ import annotations

from workforce.runtime import boot_for_task

from .services import do_deliver, do_sweep_deliveries


def deliver_post(delivery_id: int) -> str:
    """Run delivery ``delivery_id`` (one post to one member). Returns its outcome
    (``done``, ``failed``, ``not-claimed``, ``lease-lost``)."""
    boot_for_task()
    return do_deliver(delivery_id)


def sweep_deliveries() -> dict:
    """Re-enqueue deliveries a crashed worker or the broker dropped. Returns
    ``{"requeued": [ids], "abandoned": [ids]}``."""
    boot_for_task()
    result = do_sweep_deliveries()
    return {"requeued": result.requeued, "abandoned": result.abandoned}


def drain_board_as_seat(org_id: str, board_id: str, seat_id: str, worker_key: str | None = None) -> dict:
    """One step of seat ``seat_id``'s drain of board ``board_id`` in ``org_id``: run at
    most one claimed row as the seat's turn and enqueue the next step while rows remain
    (``seats.drains.do_seat_drain``). Idempotent: the claim decides who works a row."""
    boot_for_task()
    from .drains import do_seat_drain

    return do_seat_drain(org_id, board_id, seat_id, worker_key)


def sweep_board_drains() -> list:
    """Wake drains for board rows nothing picked up (``seats.drains.do_sweep_board_drains``);
    returns ``[[org id, board id, seat id, worker key], ...]`` enqueued."""
    boot_for_task()
    from .drains import do_sweep_board_drains

    return [list(woken) for woken in do_sweep_board_drains()]
