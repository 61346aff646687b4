"""django-q2 entry points of coordinators: ids in, one service call, no logic. Every task is idempotent: deliveries and jobs are claimed with a
conditional UPDATE, and a round closes once (conditional UPDATE on its status)."""

from __future__ import annotations

from workforce.holders import outage_safe
from workforce.runtime import boot_for_task

from .delivery import do_deliver_delegated
from .jobs import do_run_job
from .services import do_close_round_at_deadline, do_sweep


@outage_safe("coordinators.tasks.deliver_delegated_post")
def deliver_delegated_post(delivery_id: int) -> str:
    """Run one delivery of a post to a delegate
    (``coordinators.delivery.do_deliver_delegated``); a database outage is waited out
    (``workforce.holders.outage_safe``)."""
    boot_for_task()
    return do_deliver_delegated(delivery_id)


def run_job(job_id: int) -> str:
    """Make one routing decision that needs a model (``coordinators.jobs.do_run_job``)."""
    boot_for_task()
    return do_run_job(job_id)


def close_round_at_deadline(round_id: int) -> str:
    """A round's deadline check, run by its django-q2 Schedule
    (``coordinators.services.do_close_round_at_deadline``)."""
    boot_for_task()
    return do_close_round_at_deadline(round_id)


def sweep() -> dict:
    """Recover deliveries, jobs and deadlines a crashed worker or a lossy broker
    dropped (``coordinators.services.do_sweep``), every minute."""
    boot_for_task()
    return do_sweep()
