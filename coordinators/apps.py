from django.apps import AppConfig


class CoordinatorsConfig(AppConfig):
    name = "coordinators"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the coordinator checks)
        from .flow import register

        register()
        from workforce.leases import register_work_table

        from .models import DelegatedPost, Job

        # Their rows witness the task queue's progress for every sweep (workforce.leases).
        register_work_table(DelegatedPost, "started_at")
        register_work_table(Job, "finished_at")
        from workforce.sweepers import register_sweep

        from .services import ROUND_TIMER_SECONDS, do_close_overdue_rounds

        # Rounds close within about a second of their deadline, not at the scheduler's
        # 30 s cadence (the Schedule and the minute sweep stay as fallbacks).
        register_sweep("round-deadlines", do_close_overdue_rounds, every=ROUND_TIMER_SECONDS)
