from django.apps import AppConfig


class MailboxesConfig(AppConfig):
    name = "mailboxes"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the tree check)
        from .flow import register

        register()
