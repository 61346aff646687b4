from django.apps import AppConfig


class CoordinatorsConfig(AppConfig):
    name = "coordinators"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the coordinator checks)
        from .flow import register

        register()
