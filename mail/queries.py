"""Reads of the mail index (``access_*`` raise, ``list_*`` return what there is)."""

from __future__ import annotations

from django.db.models import QuerySet

from workforce.models import DEFAULT_ORG_ID, Organization
from workforce.refusals import Refusal
from workforce.sessions import ensure_organization

from .models import LedgerEntry, Thread


def office_organization(org_id: str) -> Organization | None:
    """The office's organization ``org_id`` when it has one (the default organization
    always: it is made on first use); None for an owner on a shared forge the office
    does not know, whose repositories are no vaults."""
    if org_id == DEFAULT_ORG_ID:
        return ensure_organization(org_id)
    return Organization.objects.filter(pk=org_id).first()


def split_thread_id(thread_id: str) -> tuple[str, int] | None:
    """``("support.devices", 3)`` for ``"support.devices:3"``; None for anything else."""
    if not isinstance(thread_id, str):
        return None
    slug, sep, number = thread_id.rpartition(":")
    if not sep or not slug or not number.isdigit() or len(number) > 9:
        return None
    return slug, int(number)


def access_thread(org: Organization, thread_id: str) -> Thread:
    """The thread ``<recipient>:<number>`` in ``org``.

    Raises:
        Refusal("thread-not-found"): no such thread in ``org`` (another organization's
            thread is not found either).
    """
    parts = split_thread_id(thread_id)
    thread = Thread.objects.filter(organization=org, recipient=parts[0], number=parts[1]).first() if parts is not None else None
    if thread is None:
        raise Refusal("thread-not-found", f'No mail "{str(thread_id)[:200]}" here.')
    return thread


def list_threads(org: Organization, *, recipient: str | None = None, state: str | None = None) -> QuerySet[Thread]:
    """The threads of ``org``, newest first, only ``recipient``'s or in ``state`` when
    given."""
    qs = Thread.objects.filter(organization=org)
    if recipient:
        qs = qs.filter(recipient=recipient)
    if state:
        qs = qs.filter(state=state)
    return qs.order_by("-sent_at", "-pk")


def unseen_threads(org: Organization, recipient: str, *, exclude: Thread | None = None) -> list[Thread]:
    """Mail delivered to ``recipient`` without ``mail:new`` (past the loop guard) that no
    run of it has been shown yet, oldest first (spec "Loop guard": "the agent sees it on
    its next run")."""
    qs = Thread.objects.filter(organization=org, recipient=recipient, state=Thread.State.DELIVERED, seen_at__isnull=True)
    if exclude is not None:
        qs = qs.exclude(pk=exclude.pk)
    return list(qs.order_by("sent_at", "pk").prefetch_related("messages"))


def list_ledger(org: Organization, *, thread: str | None = None, event: str | None = None) -> QuerySet[LedgerEntry]:
    """The ledger of ``org`` in the order it was written."""
    qs = LedgerEntry.objects.filter(organization=org)
    if thread:
        qs = qs.filter(thread=thread)
    if event:
        qs = qs.filter(event=event)
    return qs.order_by("pk")


def thread_wire(thread: Thread, *, messages: bool = False) -> dict:
    """A thread as the API answers it."""
    data = {
        "thread": thread.thread_id,
        "to": thread.recipient,
        "from": thread.sender,
        "subject": thread.subject,
        "state": thread.state,
        "labels": list(thread.labels),
        "hops": thread.hops,
        "inReplyTo": thread.in_reply_to or None,
        "sentAt": thread.sent_at.isoformat(),
        # The header, title or text changed after the office wrote it; "from" is
        # still what the office recorded (mail.index).
        "edited": thread.edited,
    }
    if messages:
        data["messages"] = [
            {"position": m.position, "from": m.author, "body": m.body, "sentAt": m.sent_at.isoformat(), "edited": m.edited}
            for m in thread.messages.order_by("position")
        ]
    return data


def ledger_wire(entry: LedgerEntry) -> dict:
    """A ledger entry as the API answers it: ``{event, principal, thread, data, at}``."""
    return {
        "event": entry.event,
        "principal": entry.principal,
        "thread": entry.thread,
        "data": entry.data,
        "at": entry.at.isoformat(),
    }
