"""What is left in the store from before channels were renamed to mailboxes (spec
"Upgrading from channels"). Only reads."""

from __future__ import annotations

from collections.abc import Iterable

from workforce.models import Item, OrgRecord, Session
from workforce.queries import window_request_ids

OLD_KIND = "channel"
OLD_COMPONENTS = ("channel-post", "channel-route")
OLD_INVENTORY_PREFIX = "inventory/channels/"


def find_pre_rename_marks(*, mailbox_ids: Iterable[str] = (), org_ids: Iterable[str] = ()) -> dict:
    """Every session on the old ``channel`` kind, every listed mailbox whose recent
    transcript (its history window) holds old items, and every listed organization
    holding inventory rows under the old key, each with the reason.

    Args:
        mailbox_ids: mailbox ids whose transcripts are checked (in every organization).
        org_ids: organizations whose inventory is checked.

    Returns:
        ``{"sessions": [{"id", "organization", "reason"}], "organizations": [{"id", "reason"}]}``;
        both empty for a store written after the rename.
    """
    sessions: list[dict] = []
    for session in Session.objects.filter(flow_kind=OLD_KIND).order_by("organization_id", "session_id"):
        sessions.append(
            {
                "id": session.session_id,
                "organization": session.organization_id,
                "reason": 'runs on the old "channel" kind, which is no longer read',
            }
        )
    old_ids = {(s["organization"], s["id"]) for s in sessions}
    for session in Session.objects.filter(session_id__in=list(mailbox_ids)).order_by("organization_id", "session_id"):
        if (session.organization_id, session.session_id) in old_ids:
            continue
        old = (
            Item.objects.filter(session=session, request__in=window_request_ids(session), component__in=OLD_COMPONENTS)
            .values_list("component", flat=True)
            .distinct()
        )
        found = sorted(set(old))
        if found:
            sessions.append(
                {
                    "id": session.session_id,
                    "organization": session.organization_id,
                    "reason": f"its recent transcript holds {' and '.join(found)} items from before the rename",
                }
            )
    organizations = []
    for org_id in sorted(set(org_ids)):
        count = OrgRecord.objects.filter(organization_id=org_id, key__startswith=OLD_INVENTORY_PREFIX).count()
        if count:
            organizations.append(
                {"id": org_id, "reason": f'holds {count} inventory row(s) under the old key "{OLD_INVENTORY_PREFIX}"'}
            )
    return {"sessions": sessions, "organizations": organizations}


def describe_pre_rename_marks(marks: dict) -> str:
    """One sentence for a non-empty result: what was found, to put after "This store was"."""
    parts = [f"session {s['id']} ({s['organization']}): {s['reason']}" for s in marks["sessions"]]
    parts += [f"organization {o['id']}: {o['reason']}" for o in marks["organizations"]]
    return "written before mailboxes were renamed: " + "; ".join(parts)
