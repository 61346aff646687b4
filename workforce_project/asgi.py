"""ASGI entry point (``serve`` runs it under uvicorn).

A process started some other way (``uvicorn workforce_project.asgi:application``) boots
itself on its first request: hires the tree's seats and wires the notify block, as
``serve`` does before it listens (``serve`` marks its process booted, so this is free).
"""
import os

from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
django_application = get_asgi_application()

from workforce.runtime import ensure_booted, is_booted  # noqa: E402  (needs the app registry)


async def application(scope, receive, send):
    if not is_booted() and scope["type"] == "http":
        await sync_to_async(ensure_booted, thread_sensitive=True)()
    await django_application(scope, receive, send)
