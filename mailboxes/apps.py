from django.apps import AppConfig


class MailboxesConfig(AppConfig):
    name = "mailboxes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the tree check)
        from django.conf import settings

        from .flow import register
        from .kinds import register_configured_kinds

        register()
        register_configured_kinds(getattr(settings, "WORKFORCE_MAILBOX_KINDS", {}))

        from workforce.leases import register_work_table
        from workforce.sweepers import register_sweep

        from .deliveries import do_sweep_deliveries
        from .models import Delivery, Route
        from .routing import do_sweep_routes

        # Deliveries and routes a lossy broker or a crashed worker dropped, from each
        # cluster worker (workforce.sweepers).
        register_sweep("deliveries", do_sweep_deliveries)
        register_sweep("routes", do_sweep_routes)
        register_work_table(Delivery, "started_at")
        register_work_table(Route, "decided_at")
