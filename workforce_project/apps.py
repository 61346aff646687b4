from django.apps import AppConfig


class WorkforceProjectConfig(AppConfig):
    """The composition root: boot, the ``serve`` command and the deployment checks."""

    name = "workforce_project"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from mailboxes.inventory import configure_discover
        from mailboxes.projects import configure_project_tool

        from . import checks  # noqa: F401  (registers the deployment checks)

        # A worker's discover: [mailboxes] (spec "Upgrading from channels"): the agent
        # kind (seats) offers the inventory's list-mailboxes tool (mailboxes).
        configure_discover("agent")
        # The create-project tool a worker's tools: can name (spec "A room per project").
        configure_project_tool("agent")
