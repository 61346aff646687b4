"""Template context every page gets."""

from django.conf import settings


def workforce(request) -> dict:
    """``auth_none``: the server runs without authentication (the page offers to change
    the user id it acts as)."""
    return {"auth_none": settings.WORKFORCE_AUTH == "none"}
