"""Reads of kernel data, always through the organization: another
organization's object answers ``*-not-found`` (404), never 403."""
from __future__ import annotations

from django.db.models import QuerySet

from .flows import registry
from .models import Item, Organization, Request, Session
from .refusals import Refusal
from .sessions import history_window


def access_session(org: Organization, session_id: str, *, reader: str | None = None) -> Session:
    """The session ``session_id`` in ``org``.

    Args:
        reader: the caller's user id, for reads: a session on a kind with private
            sessions (facet ``private_sessions``, a coordinator conversation) is found
            only by its owner.

    Raises:
        Refusal("session-not-found"): no such session, or another user's private one.
    """
    session = Session.objects.filter(organization=org, session_id=session_id).first()
    if session is not None and reader is not None and session.user_id != reader:
        flow = registry.get(session.flow_kind)
        if flow is not None and flow.facets.get("private_sessions"):
            session = None
    if session is None:
        raise Refusal("session-not-found", f'No session "{session_id}" exists.')
    return session


def access_request(org: Organization, request_id: str) -> Request:
    """The request ``request_id`` in ``org``. Raises Refusal("request-not-found")."""
    try:
        return Request.objects.select_related("session").get(organization=org, request_id=request_id)
    except Request.DoesNotExist:
        raise Refusal("request-not-found", f'No request "{request_id}" exists.') from None


def list_items(session: Session, *, item_types: list[str] | None = None, after: int = 0, limit: int = 500) -> QuerySet[Item]:
    """The session's items with ``seq > after``, oldest first, at most ``limit``."""
    qs = Item.objects.filter(session=session, seq__gt=after).select_related("request").order_by("seq")
    if item_types:
        qs = qs.filter(type__in=item_types)
    return qs[:limit]


def list_requests(session: Session, *, limit: int = 500) -> list[Request]:
    """The session's most recent ``limit`` requests, newest last."""
    rows = list(Request.objects.filter(session=session).select_related("session").order_by("-pk")[:limit])
    rows.reverse()
    return rows


def window_request_ids(session: Session, window: int | None = None) -> QuerySet:
    """Primary keys of the session's last ``window`` requests (the history window)."""
    n = history_window() if window is None else window
    return Request.objects.filter(session=session).order_by("-pk").values("pk")[:n]
