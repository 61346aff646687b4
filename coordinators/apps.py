from django.apps import AppConfig

from workforce.refusals import register_reasons

from . import constants as c

# HTTP statuses of the coordinator's reason codes (spec 004 "Who can be a delegate",
# "Changing the delegates").
REASONS = {
    c.STATE_FIELD_RESERVED: 400,
    c.NOT_ON_ROSTER: 404,
    c.COORDINATOR_NOT_FOUND: 404,
    c.CANNOT_TAKE_WORK: 409,
    c.ALREADY_A_DELEGATE: 409,
    c.DELEGATES_FULL: 409,
    c.NOT_A_DELEGATE: 409,
    c.FALLBACK_NOT_A_DELEGATE: 409,
}


class CoordinatorsConfig(AppConfig):
    name = "coordinators"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workforce.sweepers import register_sweep

        from . import checks  # noqa: F401  (registers the coordinator checks)
        from .flow import register
        from .services import do_sweep

        register()
        from workforce.leases import register_work_table
        from workforce.wakeups import TIMERS

        from .models import DelegatedPost, Job
        from .services import ROUND_TIMER_SECONDS, do_close_overdue_rounds, seconds_to_next_deadline

        # Their rows witness the task queue's progress for every sweep (workforce.leases).
        register_work_table(DelegatedPost, "started_at")
        from workforce.backlog import register_backlog_source

        # A coordinator's delegations not yet answered count as backlog (workforce.backlog).
        register_backlog_source(
            "coordinators.delegatedpost",
            lambda: DelegatedPost.objects.filter(status__in=[DelegatedPost.Status.PENDING, DelegatedPost.Status.RUNNING]),
        )
        register_work_table(Job, "finished_at")
        from workforce import inline

        from .policies import DELIVER_TASK, JOB_TASK

        # Claimed rows with sweepers: serve's web process may run them itself (workforce.inline).
        inline.allow(DELIVER_TASK)
        inline.allow(JOB_TASK)
        # Rounds close at their deadline, not at the scheduler's 30 s cadence (the Schedule
        # and the minute sweep stay as fallbacks): the timer sleeps until the next open
        # round's deadline, and a round opening wakes it (workforce.wakeups.TIMERS).
        register_sweep(
            "round-deadlines",
            do_close_overdue_rounds,
            every=ROUND_TIMER_SECONDS,
            due=seconds_to_next_deadline,
            wake_on=TIMERS,
        )
        register_reasons(REASONS)
        from workforce.cancelling import register_cancel_listener

        from .delivery import report_cancelled_run

        # A delegate's cancelled run reports at once, so its round doesn't wait (spec 004).
        register_cancel_listener("coordinators.delegated-runs", report_cancelled_run)
        # Delegated posts, jobs and round deadlines a crashed worker or the broker dropped,
        # by hand (`manage.py sweep`); the cluster runs it from its own django-q2 Schedule
        # (coordinators.services.ensure_sweep_schedule), not from the sweeper thread.
        register_sweep("coordinators", lambda: _did_something(do_sweep()), in_sweeper_thread=False)
        from workforce.sweepers import note_periodic_task

        from .services import SWEEP_TASK

        note_periodic_task(SWEEP_TASK)  # its minute's run is not work arriving (workforce.sweepers)


def _did_something(result: dict) -> dict | None:
    """``do_sweep``'s result when it moved anything, else None (the sweeper logs only work)."""
    return result if any(result.values()) else None
