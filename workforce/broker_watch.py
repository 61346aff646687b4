"""Noticing that the Redis broker lost its queue, and recovering at once (issue 22,
item 11; docs/workers.md "Workers and seats").

The Redis broker keeps no receipts and, restarted without persistence or flushed, forgets
every task it held. The sweeps would find that work only after their backoff
(``WORKFORCE_REQUEUE_SECONDS``); this timer notices the loss itself, within a second of
the broker answering again, and runs them then.
"""

from __future__ import annotations

import logging
import time
import uuid

from django.utils import timezone

from .broker import redis_broker, to_the_front
from .leases import note_broker_lost, queue_passed
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
    task it held. The one process whose ``SET NX`` wins waits for the tasks the cluster
    had already taken to start (``_wait_for_taken``, a few seconds at most), notes the loss
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
    # A first start looks the same as a loss (no mark either way), so the line says both.
    logger.warning(
        "the task broker holds no queue mark (a queue used for the first time, or one the broker lost): "
        "enqueuing again any waiting work it held"
    )
    lost_at = timezone.now()
    # Tasks the cluster took from the broker before the loss (its workers' prefetch) are
    # not lost: they start within moments. Wait for them, so they are not run twice.
    _wait_for_taken(broker, lost_at)
    note_broker_lost(lost_at)
    with to_the_front():  # ahead of what was enqueued since, as it was
        requeued = run_all_sweeps()
    return {"lost": True, "requeued": requeued}


TAKEN_WAIT_SECONDS = 5.0  # the longest wait for the tasks the cluster had taken to start
IDLE_SECONDS = 1.0  # an empty queue this long: what the workers had taken has started


def _wait_for_taken(broker, lost_at, *, bound: float = TAKEN_WAIT_SECONDS) -> None:
    """Return once what the cluster had taken from the broker before ``lost_at`` has
    started: a task enqueued after the loss started (``workforce.leases.queue_passed``:
    the queue is first in, first out), or the queue stayed empty ``IDLE_SECONDS``, or
    ``bound`` seconds passed."""
    deadline = time.monotonic() + bound
    idle_since = None
    while time.monotonic() < deadline:
        if queue_passed(lost_at):
            return
        try:
            empty = broker.connection.llen(broker.list_key) == 0
        except Exception:
            empty = False
        now = time.monotonic()
        idle_since = (idle_since or now) if empty else None
        if idle_since is not None and now - idle_since >= IDLE_SECONDS:
            return
        time.sleep(0.1)
