"""Reads of seats, conversations and deliveries (design.md §2: ``access_*`` raise,
``list_*`` return what there is)."""
from __future__ import annotations

from typing import Iterable

from django.db.models import Q, QuerySet

from workforce.models import Item, Organization, Request, Session
from workforce.queries import window_request_ids
from workforce.refusals import Refusal

from .models import Delivery, Seat

SCOPE_ORDER = {Seat.Scope.OWN: 0, Seat.Scope.ORG: 1, Seat.Scope.SHARED: 2}
MESSAGE_ITEM = "message"


def seat_reachable(seat: Seat, *, org_id: str, user_id: str) -> bool:
    """True when ``user_id`` in organization ``org_id`` can reach ``seat``: their own,
    their organization's, or a shared one."""
    if seat.scope == Seat.Scope.SHARED:
        return True
    if seat.organization_id != org_id:
        return False
    return seat.scope == Seat.Scope.ORG or seat.owner_user_id == user_id


def resolve_seat(seats: Iterable[Seat], seat_id: str, *, org_id: str, user_id: str) -> Seat | None:
    """The seat called ``seat_id`` that ``user_id`` in ``org_id`` reaches first among
    ``seats``: their own, then the organization's, then a shared one (spec "Waking
    agent seats"). None when none of them is reachable."""
    best: Seat | None = None
    for seat in seats:
        if seat.seat_id != seat_id or not seat_reachable(seat, org_id=org_id, user_id=user_id):
            continue
        if best is None or SCOPE_ORDER[seat.scope] < SCOPE_ORDER[best.scope]:
            best = seat
    return best


def access_seat(org: Organization, user_id: str, seat_id: str) -> Seat:
    """The seat ``seat_id`` as ``user_id`` in ``org`` reaches it (own, org, shared).

    Raises:
        Refusal("seat-not-found"): no reachable seat has that id (another user's or
            organization's seat is not found either).
    """
    rows = Seat.objects.filter(seat_id=seat_id).filter(
        Q(scope=Seat.Scope.SHARED) | Q(organization=org, scope=Seat.Scope.ORG)
        | Q(organization=org, scope=Seat.Scope.OWN, owner_user_id=user_id)
    )
    seat = resolve_seat(rows, seat_id, org_id=org.pk, user_id=user_id)
    if seat is None:
        raise Refusal("seat-not-found", f'No worker "{seat_id}" on your roster.')
    return seat


def list_seats(*, scope: str | None = None) -> QuerySet[Seat]:
    """Every hired seat (optionally of one scope), by seat id."""
    qs = Seat.objects.all().order_by("seat_id", "scope", "pk")
    return qs.filter(scope=scope) if scope else qs


def conversation_id(mailbox_id: str, seat_id: str) -> str:
    """The session id of ``seat_id``'s conversation in ``mailbox_id``:
    ``<mailbox id>:<seat id>`` (``support.desk:support.devices``). A mailbox id has no
    colon, so it never collides with a mailbox."""
    return f"{mailbox_id}:{seat_id}"


def list_conversation_messages(conversation: Session, *, exclude_request_id: int | None = None) -> list[dict]:
    """The conversation's messages inside its history window, oldest first, as chat
    messages ``{"role": "user"|"assistant", "content": text}`` (spec: "a seat remembers
    only as far back as its history window reaches"). A turn aborted by a crashed
    worker is left out: its post was delivered again."""
    items = (
        Item.objects.filter(session=conversation, type=MESSAGE_ITEM, request__in=window_request_ids(conversation))
        .exclude(request__status=Request.Status.ABORTED)
        .order_by("seq")
    )
    if exclude_request_id is not None:
        items = items.exclude(request_id=exclude_request_id)
    return [
        {"role": item.data["role"], "content": item.data.get("text", "")}
        for item in items
        if item.data.get("role") in ("user", "assistant") and item.data.get("text")
    ]


def list_deliveries(mailbox: Session, post_id: str | None = None) -> QuerySet[Delivery]:
    """The deliveries of a mailbox (or of one post), oldest first."""
    qs = Delivery.objects.filter(mailbox=mailbox).order_by("pk")
    return qs.filter(post_id=post_id) if post_id else qs
