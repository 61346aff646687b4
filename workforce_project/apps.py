from django.apps import AppConfig


class WorkforceProjectConfig(AppConfig):
    """The composition root: boot, the ``serve`` command and the deployment checks."""

    name = "workforce_project"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings
        from django.db.backends.signals import connection_created

        from mailboxes.inventory import configure_discover
        from mailboxes.projects import configure_project_tool

        from . import checks  # noqa: F401  (registers the deployment checks)
        from .prepared import on_connection_created

        # Prepared statements a schema change made stale heal (workforce_project.prepared).
        if settings.WORKFORCE_DB_PREPARED:
            connection_created.connect(on_connection_created, dispatch_uid="workforce_project.prepared")

        # A worker's discover: [mailboxes] (spec "Upgrading from channels"): the agent
        # kind (seats) offers the inventory's list-mailboxes tool (mailboxes).
        configure_discover("agent")
        # The create-project tool a worker's tools: can name (spec "A room per project").
        configure_project_tool("agent")
