"""WSGI entry point. Like the ASGI one, a process started by a WSGI server boots itself
(hires the tree's seats, wires the notify block) on its first request."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workforce_project.settings")
django_application = get_wsgi_application()

from workforce.runtime import ensure_booted  # noqa: E402  (needs the app registry)


def application(environ, start_response):
    ensure_booted()
    return django_application(environ, start_response)
