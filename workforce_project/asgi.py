"""ASGI entry point (``serve`` runs it under uvicorn).

At most ``WORKFORCE_WEB_CONCURRENCY`` requests run at once; the rest wait. Each running
request holds a database connection, so a burst never exhausts PostgreSQL's.

A process started some other way (``uvicorn workforce_project.asgi:application``) boots
itself on its first request: hires the tree's seats and wires the notify block, as
``serve`` does before it listens (``serve`` marks its process booted, so this is free).
"""

import asyncio
import os

from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402

from workforce.runtime import ensure_booted, is_booted  # noqa: E402  (needs the app registry)

_slots: asyncio.Semaphore | None = None


async def application(scope, receive, send):
    global _slots
    if scope["type"] != "http":
        await django_application(scope, receive, send)
        return
    if _slots is None:
        _slots = asyncio.Semaphore(max(1, settings.WORKFORCE_WEB_CONCURRENCY))
    async with _slots:
        if not is_booted():
            await sync_to_async(ensure_booted, thread_sensitive=True)()
        await django_application(scope, receive, send)
