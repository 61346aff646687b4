from django.apps import AppConfig


class SeatsConfig(AppConfig):
    name = "seats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from . import checks  # noqa: F401  (registers the worker checks)
        from .flow import register
        from .sweeper import on_worker_spawn

        register()
        post_spawn.connect(on_worker_spawn, dispatch_uid="seats.sweeper.on_worker_spawn")
