"""Noticing that the Redis broker lost its queue, and recovering at once (issue 22,
item 11; README "Workers and seats").

The Redis broker keeps no receipts and, restarted without persistence or flushed, forgets
every task it held. The sweeps would find that work only after their backoff
(``WORKFORCE_REQUEUE_SECONDS``); this timer notices the loss itself, within a second of
the broker answering again, and runs them then.
"""

from __future__ import annotations

import logging
import uuid

from django.utils import timezone

from .broker import redis_broker, to_the_front
from .leases import note_broker_lost
from .sweepers import run_all_sweeps

logger = logging.getLogger(__name__)


def epoch_key(list_key: str) -> str:
    """The Redis key that marks the queue ``list_key`` as held since its broker last
    started empty: it lives beside the list, so whatever empties the list's database
    (a restart without persistence, a flush) takes it too."""
    return f"{list_key}:workforce-epoch"


def do_watch_broker() -> dict | None:
    """Notice the Redis broker losing its queue and recover what it lost at once (a
    timer sweep, every second in each cluster worker).

    The queue's epoch mark (``epoch_key``) is set once with ``SET NX``; a broker that
    comes back without it (it restarted empty, or its database was flushed) lost every
    task it held. The one process whose ``SET NX`` wins notes the loss
    (``workforce.leases.note_broker_lost``: rows enqueued before now and still waiting,
    whose task is not in the list, are known lost) and runs every sweep at once, their
    tasks put at the head of the queue (``workforce.broker.to_the_front``), so the
    lost work is enqueued again within a second or two of the broker answering. A
    broker that is unreachable is left for the next pass; one that comes back with its
    mark (a network blip, a restart with its data) lost nothing. The first start of a
    queue counts as a loss too: what a cluster before it held in its workers is gone.

    Returns:
        ``{"lost": True, "requeued": {sweep: result}}`` when it recovered a loss, else None.
    """
    broker = redis_broker()
    if broker is None:
        return None
    try:
        fresh = broker.connection.set(epoch_key(broker.list_key), uuid.uuid4().hex, nx=True)
    except Exception:  # unreachable: the next pass looks again
        return None
    if not fresh:
        return None
    logger.warning("the task broker holds no queue mark: it lost its queue; enqueuing again what it held")
    note_broker_lost(timezone.now())
    with to_the_front():  # ahead of what was enqueued since, as it was
        requeued = run_all_sweeps()
    return {"lost": True, "requeued": requeued}
