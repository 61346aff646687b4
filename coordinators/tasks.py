"""django-q2 entry points of coordinators: ids in, one service call, no logic
(design.md §2). Every task is idempotent: deliveries and jobs are claimed with a
conditional UPDATE, and a round closes once (conditional UPDATE on its status)."""
from __future__ import annotations

import logging

from workforce.runtime import ensure_booted

logger = logging.getLogger(__name__)


def _boot() -> None:
    from django_q.conf import Conf

    if Conf.SYNC:  # the task runs inside the caller's process, configured by the caller
        return
    try:
        ensure_booted()
    except Exception:  # a bad tree: log it; the task still runs with what is configured
        logger.exception("booting the task worker failed")


def deliver_delegated_post(delivery_id: int) -> str:
    """Run one delivery of a post to a delegate
    (``coordinators.delivery.do_deliver_delegated``)."""
    _boot()
    from .delivery import do_deliver_delegated

    return do_deliver_delegated(delivery_id)


def run_job(job_id: int) -> str:
    """Make one routing decision that needs a model (``coordinators.jobs.do_run_job``)."""
    _boot()
    from .jobs import do_run_job

    return do_run_job(job_id)


def close_round_at_deadline(round_id: int) -> str:
    """A round's deadline check, run by its django-q2 Schedule
    (``coordinators.services.do_close_round_at_deadline``)."""
    _boot()
    from .services import do_close_round_at_deadline

    return do_close_round_at_deadline(round_id)


def sweep() -> dict:
    """Recover deliveries, jobs and deadlines a crashed worker or a lossy broker
    dropped (``coordinators.services.do_sweep``), every minute."""
    _boot()
    from .services import do_sweep

    return do_sweep()
