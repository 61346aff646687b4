from django.apps import AppConfig


class WorkforceProjectConfig(AppConfig):
    """The composition root: boot, the ``serve`` command and the deployment checks."""

    name = "workforce_project"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the deployment checks)
