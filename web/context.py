"""Template context every page gets."""

from django.conf import settings

from .forms import take_flashed


def workforce(request) -> dict:
    """``auth_none``: the server runs without authentication (the page offers to change
    the user id it acts as); ``forms``: the forms a plain (no-script) POST flashed for
    this page (``web.forms``), by name."""
    return {"auth_none": settings.WORKFORCE_AUTH == "none", "forms": take_flashed(request)}
