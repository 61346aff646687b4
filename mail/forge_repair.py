"""The forge sweep: the forge's vaults tell the office what the office missed, as the
embedded vault's sweep does (``mail.repair``).

A forge never redelivers a hook that failed (Gitea v1.26.3: a hook answered 5xx, or sent
while the office was down, is lost; a replay from the forge's UI carries a new delivery
id). So a mail whose hook was lost (and whose sender's transaction failed after the forge
wrote it), a label change or a close made on the forge, would never reach the index.
This sweep, run with the mail sweep (``mail.sweeps``), lists each of the office's vaults
on the forge for the issues updated since it last looked (``since``, a time kept in
``VaultCursor.commit`` as ISO 8601, less ``OVERLAP_SECONDS`` for the two clocks), and
hands every issue whose index disagrees (no thread, other labels or state, fewer texts)
to the office's one handler (``mail.events.do_handle_store_event``), as its hook would
have: ``opened`` for an issue the index never had (its run is admitted once when it
carries ``mail:new``), ``synced`` otherwise. Issues changed in the last
``SETTLE_SECONDS`` are left to the next sweep: their hooks may still be on their way.
Idempotent: an issue that agrees is left alone.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from .events import do_handle_store_event
from .index import state_of
from .models import Message, Thread, VaultCursor
from .queries import office_organization
from .store import MailStore, SharedStore, StoreError, StoreEvent, current_store

logger = logging.getLogger(__name__)

SETTLE_SECONDS = 30
# How far back of the last sweep's time the next one looks again (the forge's clock and
# the office's may differ; an issue read twice is compared, not acted on twice).
OVERLAP_SECONDS = 300
SYNCED = "synced"


def _agrees(org_id: str, vault: str, summary) -> bool:
    thread = Thread.objects.filter(organization_id=org_id, recipient=vault, number=summary.number).first()
    if thread is None or list(thread.labels) != list(summary.labels) or thread.state != state_of(summary):
        return False
    return Message.objects.filter(thread=thread).count() >= 1 + summary.comments


def do_sweep_forge(*, store: MailStore | None = None, now: datetime | None = None) -> list[str]:
    """Tell the office of every issue on the forge's vaults that the index holds
    differently (see the module docstring). ``now``: an aware datetime (default the
    clock). Returns the threads repaired, ``<agent>:<number>``. A backend that is no
    forge (no ``changed_issues``) sweeps nothing here; a vault that cannot be read is
    logged and left for the next sweep."""
    store = store or current_store()
    changed_issues = getattr(store, "changed_issues", None)
    if changed_issues is None:
        return []
    now = now or datetime.now(UTC)
    settled_before = now - timedelta(seconds=SETTLE_SECONDS)
    repaired: list[str] = []
    try:
        vaults = store.list_vaults()
    except StoreError:
        logger.exception("the forge sweep could not list the vaults")
        return []
    for org_id, vault in vaults:
        try:
            org = office_organization(org_id)
            if org is None or (isinstance(store, SharedStore) and not store.is_vault(org_id, vault)):
                continue
            cursor = VaultCursor.objects.filter(organization=org, vault=vault).first()
            since = _since(cursor.commit) if cursor else None
            for summary in changed_issues(org_id, vault, since - timedelta(seconds=OVERLAP_SECONDS) if since else None):
                if summary.updated_at >= settled_before or _agrees(org_id, vault, summary):
                    continue
                issue = store.get_issue(org_id, vault, summary.number)
                known = Thread.objects.filter(organization=org, recipient=vault, number=summary.number).exists()
                event = StoreEvent(
                    action=SYNCED if known else "opened",
                    org_id=org_id,
                    vault=vault,
                    issue=issue,
                    delivery=f"sweep:{settled_before.isoformat()}",
                )
                do_handle_store_event(event)
                if issue.by_office:
                    repaired.append(f"{vault}:{summary.number}")
        except Exception:
            # One vault that cannot be read or taken in is left for the next sweep.
            logger.exception("the forge sweep could not read %s in %s", vault, org_id)
            continue
        VaultCursor.objects.update_or_create(organization=org, vault=vault, defaults={"commit": settled_before.isoformat()})
    if repaired:
        logger.warning("the forge sweep told the office of %s, which the index had missed", ", ".join(repaired))
    return repaired


def _since(value: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None  # a commit id: this vault was swept as an embedded one before
    return when if when.tzinfo else when.replace(tzinfo=UTC)
