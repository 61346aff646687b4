from django.apps import AppConfig


class WorkforceConfig(AppConfig):
    name = "workforce"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from . import checks  # noqa: F401  (registers the system checks)
        from .sweepers import on_worker_spawn

        # Cluster workers boot and run the sweeps the apps register (workforce.sweepers).
        post_spawn.connect(on_worker_spawn, dispatch_uid="workforce.sweepers.on_worker_spawn")
