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
