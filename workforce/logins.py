"""Throttling failed logins (issue 22 item 13; docs/api.md "Limits"): the admin's login and the
pages' ``/accounts/login/``.

Every failed ``django.contrib.auth.authenticate`` (Django's ``user_login_failed``
signal, whichever form sent it) counts against the username it named *from* the client
address it came from, and against that address (``REMOTE_ADDR``; no proxy header is
trusted). After ``WORKFORCE_LOGIN_FAILURES_PER_USERNAME`` failures for one username from
one address, or ``WORKFORCE_LOGIN_FAILURES_PER_ADDRESS`` from one address whatever the
usernames, within ``WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS`` of the first of them, a login
view wrapped by ``throttled_login`` refuses every further such attempt, the right password
too, with a 429 and ``Retry-After`` until the window has passed; no password is checked
meanwhile. A successful login clears its username's count from its address (not the
address's). The counts live in Django's default cache (per process with the local-memory
cache ``serve`` uses).

The username's count is per address, as django-axes locks a username and address
together by default: a count per username alone let anyone who knew a name lock its
owner out from everywhere, the right password included. A guesser who spreads over many
addresses gets the per-username limit from each.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpResponse

WINDOW_KEY = "wf-login:{kind}:{ident}"


def client_address(request) -> str:
    """The caller's address as the server saw it (``REMOTE_ADDR``)."""
    return (request.META.get("REMOTE_ADDR") if request is not None else None) or "unknown"


def _username_key(request, username: str) -> str:
    """The cache key of ``username``'s count from ``request``'s address."""
    named = f"{username.strip().lower()}\0{client_address(request)}"
    return WINDOW_KEY.format(kind="username", ident=hashlib.sha256(named.encode("utf-8", "surrogatepass")).hexdigest())


def _counters(request, username: str | None) -> list[tuple[str, int]]:
    """``(cache key, limit)`` of each count a login attempt is held to; a limit of 0 is off."""
    counters = []
    if username:
        counters.append((_username_key(request, username), int(settings.WORKFORCE_LOGIN_FAILURES_PER_USERNAME)))
    if request is not None:
        counters.append(
            (WINDOW_KEY.format(kind="address", ident=client_address(request)), int(settings.WORKFORCE_LOGIN_FAILURES_PER_ADDRESS))
        )
    return [(key, limit) for key, limit in counters if limit > 0]


def _window() -> int:
    return int(settings.WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS)


def login_locked_for(request, username: str | None) -> int | None:
    """Seconds until an attempt for ``username`` from ``request``'s address is let through
    again; None when it is let through now."""
    now = time.time()
    waits = []
    for key, limit in _counters(request, username):
        entry = cache.get(key)
        if entry and entry["count"] >= limit and entry["first"] + _window() > now:
            waits.append(entry["first"] + _window() - now)
    return max(1, math.ceil(max(waits))) if waits else None


def record_login_failure(request, username: str | None) -> None:
    """Count one failed login for ``username`` and the request's address."""
    now = time.time()
    for key, _limit in _counters(request, username):
        entry = cache.get(key)
        if not entry or entry["first"] + _window() <= now:
            entry = {"count": 0, "first": now}
        entry["count"] += 1
        cache.set(key, entry, timeout=max(1, math.ceil(entry["first"] + _window() - now)))


def forget_login_failures(request, username: str | None) -> None:
    """Clear ``username``'s count from ``request``'s address (a login that succeeded)."""
    if username:
        cache.delete(_username_key(request, username))


def on_login_failed(sender, credentials=None, request=None, **kwargs) -> None:
    """``user_login_failed`` receiver: count the failure (connected by the kernel's app)."""
    from django.contrib.auth import get_user_model

    username = (credentials or {}).get(get_user_model().USERNAME_FIELD)
    record_login_failure(request, username if isinstance(username, str) else None)


def on_logged_in(sender, request=None, user=None, **kwargs) -> None:
    """``user_logged_in`` receiver: a login that succeeded clears its username's count."""
    if user is not None:
        forget_login_failures(request, user.get_username())


def throttled_login(view):
    """Wrap a login view: a ``POST`` whose username or address is locked
    (``login_locked_for``) answers 429 with ``Retry-After`` and checks no password; any
    other request goes to ``view``."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        if request.method == "POST":
            wait = login_locked_for(request, request.POST.get("username"))
            if wait is not None:
                response = HttpResponse(
                    "<!doctype html><title>Too many failed logins</title>"
                    "<p>Too many failed logins for this account or from this address. "
                    f"Try again in {wait} seconds.</p>",
                    status=429,
                )
                response["Retry-After"] = str(wait)
                return response
        return view(request, *args, **kwargs)

    return wrapped


__all__ = ["throttled_login", "login_locked_for", "record_login_failure", "forget_login_failures"]
