"""django-q2 entry points of seats: ids and JSON in, one service call, no logic.

Every task is idempotent: a board row is claimed with a conditional UPDATE, so the
broker's redelivery never runs a row's turn twice.
"""

from __future__ import annotations

from workforce.holders import outage_safe
from workforce.runtime import boot_for_task

from . import drains


@outage_safe("seats.tasks.drain_board_as_seat")
def drain_board_as_seat(org_id: str, board_id: str, seat_id: str, worker_key: str | None = None) -> dict | str:
    """One step of seat ``seat_id``'s drain of board ``board_id`` in ``org_id``: run at
    most one claimed row as the seat's turn and enqueue the next step while rows remain
    (``seats.drains.do_seat_drain``). Idempotent: the claim decides who works a row. A
    database outage is waited out (``workforce.holders.outage_safe``: ``"outage"`` when
    it outlasts the wait)."""
    boot_for_task()
    return drains.do_seat_drain(org_id, board_id, seat_id, worker_key)


def sweep_board_drains() -> list:
    """Wake drains for board rows nothing picked up (``seats.drains.do_sweep_board_drains``);
    returns ``[[org id, board id, seat id, worker key], ...]`` enqueued."""
    boot_for_task()
    return [list(woken) for woken in drains.do_sweep_board_drains()]
