from django.apps import AppConfig


class CoordinatorsConfig(AppConfig):
    name = "coordinators"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workforce.sweepers import register_sweep

        from . import checks  # noqa: F401  (registers the coordinator checks)
        from .flow import register
        from .services import do_sweep

        register()
        # Delegated posts, jobs and round deadlines a crashed worker or the broker dropped,
        # from each cluster worker and `manage.py sweep` (workforce.sweepers).
        register_sweep("coordinators", lambda: _did_something(do_sweep()))


def _did_something(result: dict) -> dict | None:
    """``do_sweep``'s result when it moved anything, else None (the sweeper logs only work)."""
    return result if any(result.values()) else None
