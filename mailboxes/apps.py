from django.apps import AppConfig

from workforce.refusals import register_reasons

# HTTP statuses of the mailbox's reason codes (spec "Opening it, and why an unopened id is
# not a mailbox", "What author is", "Holding a board", "A room per project").
REASONS = {
    "mailbox-not-bound": 404,
    "board-not-declared": 404,
    "author-not-a-member": 403,
    "talk-session-not-listed": 403,
    "mailbox-is-a-template": 409,
    # fileTask naming a worker key no drain of the board declares: the board's state, not the schema.
    "unknown-assignee": 409,
    # The inventory (GET /api/seats/{seat}/mailboxes) and rooms (spec "A room per project").
    "seat-not-found": 404,
    "no-such-project": 404,
    "talk-not-bound": 404,
    "talk-bound-elsewhere": 409,
    "talk-on-a-mailbox": 409,
    "project-exists": 409,
    # A project member who is not a person of the organization (or no user at all).
    "member-not-in-organization": 404,
    "author-on-a-person-post": 400,
    "not-project-owner": 403,
    "answer-token-refused": 403,
}


class MailboxesConfig(AppConfig):
    name = "mailboxes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.conf import settings

        from . import checks  # noqa: F401  (registers the tree check)
        from .flow import register
        from .kinds import register_configured_kinds

        register()
        register_reasons(REASONS)
        register_configured_kinds(settings.WORKFORCE_MAILBOX_KINDS)

        from workforce.leases import register_work_table
        from workforce.sweepers import register_sweep

        from .deliveries import do_sweep_deliveries
        from .models import Delivery, Route
        from .routing import do_sweep_routes

        # Deliveries and routes a lossy broker or a crashed worker dropped, from each
        # cluster worker (workforce.sweepers).
        register_sweep("routes", do_sweep_routes)
        register_sweep("deliveries", do_sweep_deliveries)
        register_work_table(Route, "decided_at")
        register_work_table(Delivery, "started_at")
        from workforce import inline

        from .notify import DELIVER_TASK
        from .routing import ROUTE_TASK

        # Claimed rows with sweepers: serve's web process may run them itself (workforce.inline).
        inline.allow(DELIVER_TASK)
        inline.allow(ROUTE_TASK)
        from workforce.backlog import register_backlog_source

        # The backlog WORKFORCE_BACKLOG_LIMIT bounds (workforce.backlog): unfinished deliveries.
        register_backlog_source(
            "mailboxes.delivery",
            lambda: Delivery.objects.filter(status__in=[Delivery.Status.PENDING, Delivery.Status.RUNNING]),
        )
