"""Reads of kernel data, always through the organization: another organization's object
answers ``*-not-found`` (404), never 403; inside it, a private conversation and every
session under it are their owner's (``workforce.privacy``)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.db.models import Q, QuerySet

from .models import Item, Organization, Request, Session
from .prepared import Prepared
from .privacy import PARENT_JOIN, may_cancel, may_read
from .refusals import Refusal
from .sessions import history_window


def access_session(org: Organization, session_id: str, *, reader: str | None) -> Session:
    """The session ``session_id`` in ``org``, as ``reader`` may read it.

    Args:
        reader: the caller's user id, or None for a caller that named nobody (no
            authentication, no ``userId``). A private session (a coordinator
            conversation, or any session under one: ``workforce.privacy.may_read``) is
            found only by its owner; None never finds one.

    Raises:
        Refusal("session-not-found"): no such session, or one ``reader`` may not read
            (404 either way: ids don't leak).
    """
    session = Session.objects.filter(organization=org, session_id=session_id).select_related(PARENT_JOIN).first()
    if session is None or not may_read(session, reader):
        raise Refusal("session-not-found", f'No session "{session_id}" exists.')
    return session


def session_readable(org: Organization, session_id: str, *, reader: str | None) -> bool:
    """False when ``session_id`` names a session in ``org`` that ``reader`` may not read
    (``access_session``'s rule); True otherwise, also when there is no such session (a
    read of something kept beside a session id, such as a board's rows under its
    mailbox)."""
    session = Session.objects.filter(organization=org, session_id=session_id).select_related(PARENT_JOIN).first()
    return session is None or may_read(session, reader)


def access_request(org: Organization, request_id: str, *, reader: str | None) -> Request:
    """The request ``request_id`` in ``org``, when ``reader`` may read its session
    (``access_session``'s rule: a request in another user's private conversation, or
    in any session under it, is not found).

    Raises:
        Refusal("request-not-found"): no such request, or one ``reader`` may not read.
    """
    row = Request.objects.select_related(f"session__{PARENT_JOIN}").filter(organization=org, request_id=request_id).first()
    if row is None or not may_read(row.session, reader):
        raise Refusal("request-not-found", f'No request "{request_id}" exists.')
    return row


def access_request_to_cancel(org: Organization, request_id: str, *, reader: str | None) -> Request:
    """The request ``request_id`` in ``org``, when ``reader`` may cancel it
    (``workforce.privacy.may_cancel``: its owner, who may read it), its row locked
    until the transaction ends (``SELECT … FOR UPDATE``).

    Raises:
        Refusal("request-not-found"): no such request, or one ``reader`` may not read
            (``access_request``'s rule; word for word as a request that does not exist:
            ids don't leak).
        Refusal("not-request-owner"): ``reader`` may read it (its ``GET`` answers it) but
            it runs as someone else; the message says whose it is to cancel.
    """
    row = (
        Request.objects.select_for_update(of=("self",))
        .select_related(f"session__{PARENT_JOIN}")
        .filter(organization=org, request_id=request_id)
        .first()
    )
    if row is None or not may_read(row.session, reader):
        raise Refusal("request-not-found", f'No request "{request_id}" exists.')
    if not may_cancel(row, reader):
        # Its reader already sees it, so a 404 would hide nothing and mislead: say who may.
        raise Refusal(
            "not-request-owner",
            f"Only the user request \"{request_id}\" runs as may cancel it: a post's fan-out is the poster's, "
            "a seat's turn in a mailbox and a board row's run the mailbox principal's, a delegate's run the "
            "conversation owner's.",
        )
    return row


def list_items(session: Session, *, item_types: list[str] | None = None, after: int = 0, limit: int = 500) -> QuerySet[Item]:
    """The session's items with ``seq > after``, oldest first, at most ``limit``."""
    qs = Item.objects.filter(session=session, seq__gt=after).select_related("request").order_by("seq")
    if item_types:
        qs = qs.filter(type__in=item_types)
    return qs[:limit]


# What a stream's read takes of each item (``list_item_rows``): the items endpoint's
# item, in ``workforce.api.serializers.item_wire``'s order.
ITEM_ROW_FIELDS = ("seq", "type", "component", "data", "request__request_id", "created_at")
# Where the call's values go in the compiled read: values no session pk, seq or item type takes.
_SESSION_SENTINEL = -7_400_001
_AFTER_SENTINEL = -7_400_002


def _type_sentinel(i: int) -> str:
    return f"wf-item-type-sentinel-{i}"


@lru_cache(maxsize=64)  # per itemTypes shape and page size a process's streams ask for
def _item_rows(types: int, limit: int) -> Prepared:
    def build(session_pk: int, after: int, *item_types: str) -> QuerySet:
        qs = Item.objects.filter(session_id=session_pk, seq__gt=after).order_by("seq")
        if item_types:
            qs = qs.filter(type__in=item_types)
        return qs.values_list(*ITEM_ROW_FIELDS)[:limit]

    return Prepared(build, sentinels=(_SESSION_SENTINEL, _AFTER_SENTINEL, *map(_type_sentinel, range(types))))


def list_item_rows(
    session_pk: int, *, item_types: tuple[str, ...] = (), after: int = 0, limit: int = 500
) -> list[tuple[Any, ...]]:
    """``list_items``' items as ``ITEM_ROW_FIELDS`` tuples (``(seq, type, component, data,
    request id or None, created_at)``), one statement compiled once per process (for
    each count of ``item_types`` and each ``limit``): a live stream's read, run at every
    wake-up of every open stream.

    Args:
        session_pk: a ``Session`` primary key the caller already checked readable
            (``access_session``); only its items are read.
        item_types: only items of these types (every type when empty).
        after: a seq; only items past it, oldest first, at most ``limit`` (a count).
    """
    return _item_rows(len(item_types), limit).all(session_pk, after, *item_types)


ACTIVE_STATUSES = (Request.Status.PENDING, Request.Status.RUNNING)


def list_active_runs(session: Session, *, reader: str | None, started_by: str | None = None, limit: int = 100) -> list[Request]:
    """The runs ``session``'s work started that have not finished (spec "Showing a
    mailbox on screen": ``childSessions`` whose status is active): the pending or
    running requests on its child sessions (a seat's conversation in a mailbox, a
    delegate's session in a coordinator conversation, a board's run session), oldest
    first, at most ``limit``, each readable by ``reader`` (``workforce.privacy``).

    Args:
        session: a session the caller may read (``access_session``).
        started_by: a request id: only the runs that request started (their
            ``parent_request``), e.g. a post's seat turns.
    """
    qs = (
        Request.objects.filter(session__parent=session, status__in=ACTIVE_STATUSES)
        .select_related(f"session__{PARENT_JOIN}", "parent_request")
        .order_by("pk")
    )
    if started_by is not None:
        qs = qs.filter(parent_request__request_id=started_by)
    return [row for row in qs[:limit] if may_read(row.session, reader)]


def list_failed_runs(session: Session, *, reader: str | None, started_by: str | None = None, limit: int = 100) -> list[Request]:
    """The runs that failed on ``session`` and its child sessions, for operators (issue
    24: "every failed run is listed"): the failed requests there, newest first, at most
    ``limit``, each readable by ``reader``, each with its ``error`` (``{reason,
    message}``, a model's error under ``model-error``). On a mailbox that is a seat's
    failed turn in its conversation and the mailbox's own record of the failed delivery
    (``deliverPost``); on a mail session (``mail:<slug>``) its failed mail runs.

    Args:
        session: a session the caller may read (``access_session``).
        started_by: a request id: only the runs that request started.
    """
    qs = (
        Request.objects.filter(Q(session__parent=session) | Q(session=session), status=Request.Status.FAILED)
        .select_related(f"session__{PARENT_JOIN}", "parent_request")
        .order_by("-pk")
    )
    if started_by is not None:
        qs = qs.filter(parent_request__request_id=started_by)
    return [row for row in qs[:limit] if may_read(row.session, reader)]


def list_requests(session: Session, *, limit: int = 500) -> list[Request]:
    """The session's most recent ``limit`` requests, newest last."""
    rows = list(Request.objects.filter(session=session).select_related("session").order_by("-pk")[:limit])
    rows.reverse()
    return rows


def window_request_ids(session: Session, window: int | None = None) -> QuerySet:
    """Primary keys of the session's last ``window`` requests (the history window)."""
    n = history_window() if window is None else window
    return Request.objects.filter(session=session).order_by("-pk").values("pk")[:n]
