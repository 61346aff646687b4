"""The inventory: which mailboxes each seat is in (spec "What a mailbox is": the
inventory row, "only for finding which mailboxes a seat is in"; "Upgrading from
channels": the inventory collection's key prefix is ``inventory/mailboxes/``).

Three tables (``mailboxes.models``): a seat row ``{id, kind, hired}``, a mailbox row
``{id, kind, members, openedAt}`` and one membership row per (seat, mailbox). They are
written when the mailboxes are opened (``do_register_inventory``, inside
``do_open_mailboxes``' transaction): the membership rows first and the mailbox row last,
so a listed mailbox always has its members. A mailbox id that is now a room template
has its row retired and is listed no more; a template is never registered; rooms and
talk sessions are never rows. A worker's ``discover: [mailboxes]`` gives its seat the
``list-mailboxes`` tool, which reads these rows (``discover_capability``).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import QuerySet
from django.utils import timezone

from seats.models import Seat
from seats.queries import reachable_seats
from workforce.contracts import in_callers_transaction
from workforce.facets import CAPABILITIES
from workforce.flows import registry
from workforce.models import Organization
from workforce.refusals import Refusal
from workforce.sessions import now_ms
from workforce.tools import Tool, ToolContext, ToolResult, refuse

from .binder import BoundMailbox
from .models import InventoryMailbox, InventoryMembership, InventorySeat
from .roster import current_roster

# Kept for the spec's name of the collection; the rows are tables, not keys.
INVENTORY_PREFIX = "inventory/mailboxes/"
DISCOVER_MAILBOXES = "mailboxes"
LIST_MAILBOXES = "list-mailboxes"


def template_refusal(mailbox_id: str) -> Refusal:
    """``mailbox-is-a-template`` for an id that is a room template's (spec "A room per
    project": "every mailbox action on it, including inventory registration")."""
    return Refusal(
        "mailbox-is-a-template",
        f'"{mailbox_id}" is a room template (mintFor:), not a mailbox; its old session is kept but not served.',
    )


@in_callers_transaction
def do_register_inventory(
    org: Organization,
    mailbox: BoundMailbox,
    *,
    members: list[str],
    description: str,
    opened_by: str,
    template_ids: Iterable[str] = (),
) -> InventoryMailbox:
    """Write the inventory rows of one opened mailbox: a seat row per member (its kind
    and whether it is hired, as ``opened_by`` reaches it), one membership row per
    member, then the mailbox row (``openedAt`` on create only; a row retired earlier is
    listed again). Call inside the transaction that opens the mailbox.

    Args:
        members, description: what the mailbox was opened with (its session state).
        template_ids: the room templates' ids of the bound tree.

    Raises:
        Refusal("mailbox-is-a-template"): ``mailbox.id`` is a template's id.
    """
    if mailbox.id in set(template_ids):
        raise template_refusal(mailbox.id)
    hired = reachable_seats(org.pk, opened_by, members)
    for seat_id in members:
        seat = hired.get(seat_id)
        InventorySeat.objects.update_or_create(
            organization=org,
            seat_id=seat_id,
            defaults={"kind": seat.kind if seat else "", "hired": seat is not None},
        )
    existing = set(InventoryMembership.objects.filter(organization=org, mailbox_id=mailbox.id).values_list("seat_id", flat=True))
    gone = existing - set(members)  # members an applied file dropped (open_mailboxes --apply)
    if gone:
        InventoryMembership.objects.filter(organization=org, mailbox_id=mailbox.id, seat_id__in=gone).delete()
    InventoryMembership.objects.bulk_create(
        [InventoryMembership(organization=org, seat_id=s, mailbox_id=mailbox.id) for s in members if s not in existing],
        ignore_conflicts=True,
    )
    row, created = InventoryMailbox.objects.get_or_create(
        organization=org,
        mailbox_id=mailbox.id,
        defaults={"kind": mailbox.kind, "members": list(members), "description": description, "opened_at": now_ms()},
    )
    changed = row.members != list(members) or row.kind != mailbox.kind or row.description != description
    if not created and (row.retired_at is not None or changed):
        row.retired_at = None
        row.members = list(members)
        row.kind = mailbox.kind
        row.description = description
        row.save(update_fields=["retired_at", "members", "kind", "description"])
    return row


def do_retire_templates(org: Organization, template_ids: Iterable[str]) -> int:
    """Retire the inventory rows of mailbox ids that are now room templates (they are
    listed no more; their memberships stay, unread). Returns how many were retired."""
    return InventoryMailbox.objects.filter(organization=org, mailbox_id__in=list(template_ids), retired_at__isnull=True).update(
        retired_at=timezone.now()
    )


def list_inventory_mailboxes(org: Organization, *, after: str = "", limit: int = 100) -> QuerySet[InventoryMailbox]:
    """The organization's listed mailboxes, by id, after the id ``after``, at most ``limit``."""
    qs = InventoryMailbox.objects.filter(organization=org, retired_at__isnull=True).order_by("mailbox_id")
    if after:
        qs = qs.filter(mailbox_id__gt=after)
    return qs[:limit]


def list_seat_mailboxes(org: Organization, seat_id: str) -> list[InventoryMailbox]:
    """The listed mailboxes ``seat_id`` is a member of, by id (one query)."""
    ids = InventoryMembership.objects.filter(organization=org, seat_id=seat_id).values("mailbox_id")
    return list(
        InventoryMailbox.objects.filter(organization=org, retired_at__isnull=True, mailbox_id__in=ids).order_by("mailbox_id")
    )


def access_inventory_seat(org: Organization, seat_id: str, *, reader: str) -> dict:
    """The seat row ``{id, kind, hired}`` of ``seat_id``: the inventory's, or, for a seat
    that is hired and in no mailbox, what ``reader`` reaches.

    Raises:
        Refusal("seat-not-found"): no mailbox lists it and ``reader`` reaches no seat by that id.
    """
    row = InventorySeat.objects.filter(organization=org, seat_id=seat_id).first()
    if row is not None:
        return row.as_wire()
    seat = reachable_seats(org.pk, reader, [seat_id]).get(seat_id)
    if seat is None:
        raise Refusal("seat-not-found", f'No seat "{seat_id}" is hired or listed by a mailbox.')
    return {"id": seat.seat_id, "kind": seat.kind, "hired": True}


# ----------------------------------------------------------------------------- discover: [mailboxes]


def list_mailboxes_tool(ctx: ToolContext, args: dict) -> ToolResult:
    """The ``list-mailboxes`` tool: ``{"mailboxes": [{id, description, members}]}``, the
    mailboxes the calling seat is a member of, from the inventory. Takes no input."""
    if args:
        return refuse("invalid-input", f"{LIST_MAILBOXES} takes no input.")
    rows = list_seat_mailboxes(ctx.org, ctx.seat_id)
    templates = {t.id for t in current_roster().templates}
    return {
        "ok": True,
        "mailboxes": [
            {"id": r.mailbox_id, "description": r.description, "members": list(r.members)}
            for r in rows
            if r.mailbox_id not in templates
        ],
    }


LIST_MAILBOXES_TOOL = Tool(
    name=LIST_MAILBOXES,
    description="List the mailboxes you are a member of: each one's id, description and members.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    call=list_mailboxes_tool,
)


def discover_capability(seat: Seat) -> list[Tool]:
    """What a worker's ``discover: [mailboxes]`` gives its seat: the ``list-mailboxes``
    tool. A seat that does not discover mailboxes is never offered it."""
    return [LIST_MAILBOXES_TOOL] if DISCOVER_MAILBOXES in ((seat.config or {}).get("discover") or []) else []


def configure_discover(kind: str = "agent") -> None:
    """Give worker kind ``kind`` the ``discover: [mailboxes]`` capability (its seats that
    declare it are offered ``list-mailboxes``). Idempotent. The composition root calls it
    at start-up, once the worker kinds are registered.

    Raises:
        Refusal("flow-not-found"): no such kind.
    """
    flow = registry.require(kind)
    capabilities = list(CAPABILITIES.get(flow) or [])
    if discover_capability not in capabilities:
        CAPABILITIES.set(flow, [*capabilities, discover_capability])
