from django.apps import AppConfig


class WebConfig(AppConfig):
    """The server-rendered pages (docs/pages.md "The pages"): templates with htmx and its SSE
    extension, live over server-sent events. A top app: it reads ``mailboxes`` and the
    layers below it, and never ``coordinators`` or ``mail``."""

    name = "web"
    default_auto_field = "django.db.models.BigAutoField"
