"""The mail ledger (spec "How mail becomes work", "Loop guard", "Who an agent can write
to"): one ``LedgerEntry`` per event the spec names."""

from __future__ import annotations

from workforce.models import Organization

from .models import LedgerEntry

OFFICE = "office"


def ledger(org: Organization, event: str, principal: str, thread: str = "", *, key: str | None = None, **data) -> LedgerEntry:
    """Record ``event`` (``mail.sent``, ``mail.replied``, ``mail.closed``,
    ``mail.loop_guard``, ``run.denied``) by ``principal`` on ``thread`` (its address,
    ``<recipient>:<number>``), with ``data`` (JSON); ``key`` (unique) marks an agent
    tool call's effect, so a turn run again after a crash finds it (``recorded``)."""
    return LedgerEntry.objects.create(organization=org, event=event, principal=principal, thread=thread, data=data, key=key)


def recorded(org: Organization, key: str | None) -> LedgerEntry | None:
    """The ledger entry a tool call with ``key`` wrote, if it already ran."""
    return LedgerEntry.objects.filter(organization=org, key=key).first() if key else None
