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

        from django_q.signals import post_spawn

        from .sweeper import on_worker_spawn

        post_spawn.connect(on_worker_spawn, dispatch_uid="mailboxes.sweeper.on_worker_spawn")
