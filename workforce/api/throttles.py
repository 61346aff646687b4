"""Throttling the API per user and per organization (docs/api.md "Limits"; docs/architecture.md
"Settings and reason codes").

Two DRF throttles run on every API view (``REST_FRAMEWORK["DEFAULT_THROTTLE_CLASSES"]``):
``UserThrottle`` keyed by the caller's user id and ``OrgThrottle`` keyed by its
organization, each with a rate for writes (any method but GET, HEAD and OPTIONS: posts,
actions, mail, chat, hiring) and a looser one for reads:

- ``WORKFORCE_THROTTLE_USER`` / ``WORKFORCE_THROTTLE_ORG``: writes;
- ``WORKFORCE_THROTTLE_READ_USER`` / ``WORKFORCE_THROTTLE_READ_ORG``: reads.

A rate is ``"<count>/<period>"`` with period ``s``, ``m``/``min``, ``h``/``hour`` or
``d``/``day`` (DRF's form), counted over a sliding window; an empty rate turns that
throttle off. A refused call answers 429 ``throttled`` in the contract's shape with
``Retry-After`` (whole seconds until the oldest counted call leaves the window).

Who is counted: with ``WORKFORCE_AUTH=token`` the authenticated user and the
organization its membership names (read once per request and handed to
``workforce.principals.resolve_principal``, so it costs no second query); without
authentication the ``userId`` the call names (the body's for a write, the query's for a
read; a call that names nobody, or names an id that breaks the rule, counts as its
client address) in ``DEFAULT_ORG_ID``, where everyone is, so the organization's rate
bounds what any number of made-up ``userId``s can send. The counts live in Django's
default cache: per process with the local-memory cache ``serve`` uses (one web
process); a deployment with several web processes sets ``CACHES`` to a shared one.
"""

from __future__ import annotations

import math

from django.conf import settings
from rest_framework.permissions import SAFE_METHODS
from rest_framework.throttling import SimpleRateThrottle

# Seconds per period name: DRF's single letters, and the words people write.
PERIODS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}


def parse_rate(rate: str | None) -> tuple[int, int] | None:
    """``(count, seconds)`` of a rate such as ``"60/min"``; None for an empty one (off).

    Raises:
        ValueError: not ``<whole number>/<period>`` with a known period.
    """
    if rate is None or not str(rate).strip():
        return None
    count, sep, period = str(rate).strip().partition("/")
    period = period.strip().lower()
    if not sep or not count.strip().isdigit() or period not in PERIODS:
        raise ValueError(f"{rate!r} is not a rate: write <count>/<period>, the period one of s, min, hour, day.")
    return int(count), PERIODS[period]


def client_address(request) -> str:
    """The caller's address as the server saw it (``REMOTE_ADDR``; no proxy header is
    trusted)."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def token_membership(request):
    """The authenticated caller's ``Membership`` (with its organization), read once per
    request; None when it has none."""
    from workforce.models import Membership
    from workforce.principals import MEMBERSHIP_ATTR  # kept on the request for resolve_principal

    cached = getattr(request, MEMBERSHIP_ATTR, False)
    if cached is False:
        cached = Membership.objects.select_related("organization").filter(user=request.user).first()
        setattr(request, MEMBERSHIP_ATTR, cached)
    return cached


def claimed_user(request) -> str | None:
    """Without authentication: the ``userId`` the call names (a write's body, a read's
    query), when it keeps ``workforce.principals.USER_ID_RULE``."""
    from workforce.principals import user_id_problem

    if request.method in SAFE_METHODS:
        value = request.query_params.get("userId")
    else:
        data = request.data  # a body that is not JSON raises ParseError here, as the view would
        value = data.get("userId") if isinstance(data, dict) else None
        value = value or request.query_params.get("userId")
    return value if value and user_id_problem(value) is None else None


class _PrincipalThrottle(SimpleRateThrottle):
    """A sliding-window throttle whose rate depends on whether the call writes, keyed by
    ``ident_of``. Subclasses name the settings and the key."""

    write_setting = ""
    read_setting = ""
    kind = ""

    def __init__(self):  # the rate is chosen per request (read or write), not per class
        self.rate = None
        self.num_requests: int | None = None
        self.duration: int | None = None

    # The key a call made outside the API's views counts under (``principal_wait``); None:
    # ``ident_of`` reads it from the request.
    fixed_ident: str | None = None

    def ident_of(self, request) -> str | None:
        raise NotImplementedError

    def get_cache_key(self, request, view) -> str | None:
        ident = self.fixed_ident if self.fixed_ident is not None else self.ident_of(request)
        if ident is None:
            return None
        return f"wf-throttle:{self.kind}:{self.scope}:{ident}"

    def allow_request(self, request, view) -> bool:
        writes = request.method not in SAFE_METHODS
        self.scope = "write" if writes else "read"
        parsed = parse_rate(getattr(settings, self.write_setting if writes else self.read_setting))
        if parsed is None:
            return True
        self.rate = f"{parsed[0]}/{parsed[1]}s"
        self.num_requests, self.duration = parsed
        return super().allow_request(request, view)

    def wait(self) -> float:
        """Seconds until the oldest call in the window leaves it: the earliest a retry is
        let through."""
        duration = self.duration or 0  # allow_request set it before anyone asks
        if not self.history:
            return float(duration)
        return max(0.0, self.history[-1] + duration - self.now)


class UserThrottle(_PrincipalThrottle):
    """Calls per user: ``WORKFORCE_THROTTLE_USER`` (writes), ``WORKFORCE_THROTTLE_READ_USER`` (reads)."""

    write_setting = "WORKFORCE_THROTTLE_USER"
    read_setting = "WORKFORCE_THROTTLE_READ_USER"
    kind = "user"

    def ident_of(self, request) -> str | None:
        if settings.WORKFORCE_AUTH != "none":
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                return f"u:{user.pk}"
            return f"addr:{client_address(request)}"
        claimed = claimed_user(request)
        return f"id:{claimed}" if claimed else f"addr:{client_address(request)}"


class OrgThrottle(_PrincipalThrottle):
    """Calls per organization: ``WORKFORCE_THROTTLE_ORG`` (writes),
    ``WORKFORCE_THROTTLE_READ_ORG`` (reads). A caller with no organization (not
    authenticated, no membership) is refused by the view, not counted here."""

    write_setting = "WORKFORCE_THROTTLE_ORG"
    read_setting = "WORKFORCE_THROTTLE_READ_ORG"
    kind = "org"

    def ident_of(self, request) -> str | None:
        if settings.WORKFORCE_AUTH == "none":
            from workforce.models import DEFAULT_ORG_ID  # loaded with DRF's settings, before the apps

            return DEFAULT_ORG_ID
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        membership = token_membership(request)
        return membership.organization_id if membership is not None else None


class _Call:
    """What ``_PrincipalThrottle.allow_request`` reads of a call made outside DRF."""

    def __init__(self, writes: bool):
        self.method = "POST" if writes else "GET"


def principal_wait(principal, user=None, *, writes: bool = True) -> float | None:
    """Count one call of ``principal`` made outside the API's views (a page's form, an MCP
    tool call) against the same windows the API's ``UserThrottle`` and ``OrgThrottle``
    keep, under the same keys, so those paths cannot flood past the API's rates.

    Args:
        principal: the verified caller (``workforce.principals.Principal``).
        user: with ``WORKFORCE_AUTH=token`` the Django user (its key is its pk, as the
            API's); None in development (the key is the user id).
        writes: counted against the write rates (default) or the read rates.

    Returns:
        None when the call may go on; else the seconds until it may (``retry_after``).
    """
    if settings.WORKFORCE_AUTH != "none" and user is not None and getattr(user, "is_authenticated", False):
        user_ident = f"u:{user.pk}"
    else:
        user_ident = f"id:{principal.user_id}"
    for throttle_class, ident in ((UserThrottle, user_ident), (OrgThrottle, principal.org.pk)):
        throttle = throttle_class()
        throttle.fixed_ident = ident
        if not throttle.allow_request(_Call(writes), None):
            return throttle.wait()
    return None


def throttled(wait: float | None):
    """The ``throttled`` refusal for a call ``principal_wait`` refused (the API's wording)."""
    from workforce.refusals import Refusal

    seconds = retry_after(wait)
    return Refusal("throttled", f"Too many calls from this user or organization; retry in {seconds} s (Retry-After).")


def retry_after(wait: float | None) -> str:
    """``Retry-After`` for a throttled call: whole seconds, at least 1."""
    return str(max(1, math.ceil(wait or 0)))


__all__ = ["UserThrottle", "OrgThrottle", "parse_rate", "principal_wait", "retry_after", "throttled", "token_membership"]
