"""The office's index of the vaults (spec "Where mail lives": "The office keeps an index
of mail in its database"): one ``Thread`` per issue and one ``Message`` per text,
written from an issue as a backend reports it. Upserts only, so indexing an issue
twice, or in any order with its events, leaves one row per issue and per text.

Who sent a mail is what the office recorded when it sent it, never what the issue says
now: anyone with write access to a forge repository can edit an issue's body, and its
author stays the office. So a thread's ``sender``, ``subject``, ``hops``, ``in_reply_to``
and ``sent_at``, and a message's ``author`` and ``body``, are written when the row is
first made (by the send itself, in its own transaction) and never from the issue
again. An issue whose header, title or text no longer agree with that record is marked
``edited`` (for good) and trusted for nothing. When there is no row (a rebuilt
database, ``reindex_mail``), the record is, in order: the ledger's ``mail.sent`` entry
of that thread (the office's own record, which a reindex keeps), then the header's
``Seal`` (``mail.header``: an HMAC keyed by the server's secret, which no edit keeps
valid); an issue with neither is indexed with sender ``unknown``, edited. See
docs/mail.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from workforce.models import Organization

from .constants import LABEL_CLOSED, LABEL_NEW, LABEL_REPLIED, LABEL_WORKING, MAIL_SENT
from .header import Header, comment_sealed, issue_sealed, read_header
from .models import LedgerEntry, Message, Thread
from .store import Comment, Issue

UNKNOWN_SENDER = "unknown"
SUBJECT_MAX = 300


def state_of(issue: Issue) -> str:
    """The thread state an issue's labels say (``closed`` also when the issue is)."""
    labels = set(issue.labels)
    if LABEL_CLOSED in labels or issue.state == "closed":
        return Thread.State.CLOSED
    for label, state in ((LABEL_REPLIED, Thread.State.REPLIED), (LABEL_WORKING, Thread.State.WORKING)):
        if label in labels:
            return state
    return Thread.State.NEW if LABEL_NEW in labels else Thread.State.DELIVERED


@dataclass(frozen=True)
class _Record:
    """What the office recorded of a mail: who sent it, its subject, hops, the thread it
    notifies of and when it was sent."""

    sender: str
    subject: str
    hops: int
    in_reply_to: str
    sent_at: datetime


def _same_text(a: str, b: str) -> bool:
    return a.replace("\r\n", "\n").rstrip() == b.replace("\r\n", "\n").rstrip()


def _subject(title: str) -> str:
    return " ".join(title.split())[:SUBJECT_MAX]


def _agrees(header: Header | None, record: _Record) -> bool:
    return header is not None and (header.sender, header.hops, header.in_reply_to, header.sent) == (
        record.sender,
        record.hops,
        record.in_reply_to,
        record.sent_at,
    )


def _recorded_send(org: Organization, vault: str, number: int) -> LedgerEntry | None:
    return LedgerEntry.objects.filter(organization=org, event=MAIL_SENT, thread=f"{vault}:{number}").order_by("-pk").first()


def _record_without_row(org: Organization, vault: str, issue: Issue, header: Header | None, sealed: bool):
    """The record of a mail the index has no row for, and whether the issue is edited."""
    entry = _recorded_send(org, vault, issue.number)
    subject = issue.title[:SUBJECT_MAX]
    signed = header if sealed else None  # a header is read only when sealed
    if entry is not None:
        data = entry.data if isinstance(entry.data, dict) else {}
        record = _Record(
            sender=entry.principal,
            subject=subject,
            hops=int(data.get("hops") or 0),
            in_reply_to=str(data.get("inReplyTo") or ""),
            sent_at=signed.sent if signed is not None else issue.created_at,
        )
        return record, not (signed is not None and _agrees(signed, record))
    if signed is not None:
        return _Record(signed.sender, subject, signed.hops, signed.in_reply_to, signed.sent), False
    return _Record(UNKNOWN_SENDER, subject, 0, "", issue.created_at), True


def _comment_message(thread: Thread, vault: str, comment: Comment, existing: Message | None) -> tuple[Message, bool]:
    """The message a comment is (as first indexed) and whether it is edited now."""
    if not comment.by_office:
        # A comment someone other than the office wrote has no office header to trust.
        message = Message(
            thread=thread, position=comment.id, author=UNKNOWN_SENDER, body=comment.body, sent_at=comment.created_at
        )
        return existing or message, False
    header, text = read_header(comment.body)
    if existing is not None:
        agrees = header is not None and header.sender == existing.author and header.sent == existing.sent_at
        return existing, existing.edited or not (agrees and _same_text(text, existing.body))
    sealed = comment_sealed(header, text, org_id=thread.organization_id, vault=vault, number=thread.number)
    signed = header if sealed else None  # a header is read only when sealed
    message = Message(
        thread=thread,
        position=comment.id,
        author=signed.sender if signed is not None else UNKNOWN_SENDER,
        body=text,
        sent_at=signed.sent if signed is not None else comment.created_at,
        edited=not sealed,
    )
    return message, not sealed


def _differs(thread: Thread, header: Header | None, text: str, title: str) -> bool:
    record = _Record(thread.sender, thread.subject, thread.hops, thread.in_reply_to, thread.sent_at)
    first = Message.objects.filter(thread=thread, position=0).first()
    return not (
        _agrees(header, record)
        and _subject(title) == _subject(thread.subject)
        and (first is None or _same_text(text, first.body))
    )


def issue_agrees_with_record(thread: Thread, issue: Issue) -> bool:
    """True when ``issue`` still says what the office recorded for ``thread`` (its
    header, title and text), or the thread is already marked edited: nothing new to
    tell the office (``mail.repair``)."""
    if thread.edited:
        return True
    if not issue.by_office:
        return False
    header, text = read_header(issue.body)
    return not _differs(thread, header, text, issue.title)


def index_issue(org: Organization, vault: str, issue: Issue, *, sent: Header | None = None) -> Thread:
    """Write what ``issue`` on ``vault`` (an agent's slug) says into the index and return
    its thread. The sender, subject, time and hops come from the office's record (see
    the module docstring), never from the text under the header; an issue or a comment
    whose header or text changed since the office wrote it is marked ``edited``. A
    comment the backend says the office did not write (``Comment.by_office``) is indexed
    with author ``unknown``. An issue the office did not create never reaches here
    (``mail.events``).

    ``sent``: the header the office just wrote for this new issue (the send itself,
    which is the record), so nothing is read back to find it."""
    header, text = read_header(issue.body)
    existing = None if sent is not None else Thread.objects.filter(organization=org, recipient=vault, number=issue.number).first()
    if sent is not None:
        record, edited = _Record(sent.sender, issue.title[:SUBJECT_MAX], sent.hops, sent.in_reply_to, sent.sent), False
    elif existing is not None:
        record = _Record(existing.sender, existing.subject, existing.hops, existing.in_reply_to, existing.sent_at)
        edited = existing.edited or _differs(existing, header, text, issue.title)
    else:
        sealed = issue_sealed(header, text, org_id=org.pk, vault=vault, title=issue.title)
        record, edited = _record_without_row(org, vault, issue, header, sealed)
    state = {"state": state_of(issue), "labels": list(issue.labels)}
    created = {
        **state,
        "sender": record.sender,
        "subject": record.subject,
        "hops": record.hops,
        "in_reply_to": record.in_reply_to,
        "sent_at": record.sent_at,
        "edited": edited,
    }
    # update_or_create locks the row, and takes an insert that loses a race to another
    # writer's as an update of that row. The record is written on create only; an edit
    # once seen stays marked.
    thread, _ = Thread.objects.update_or_create(
        organization=org,
        recipient=vault,
        number=issue.number,
        defaults={**state, **({"edited": True} if edited else {})},
        create_defaults=created,
    )
    messages = [Message(thread=thread, position=0, author=thread.sender, body=text, sent_at=thread.sent_at, edited=thread.edited)]
    now_edited = [0] if thread.edited else []
    known = {m.position: m for m in Message.objects.filter(thread=thread, position__in=[c.id for c in issue.comments])}
    for comment in issue.comments:
        message, comment_edited = _comment_message(thread, vault, comment, known.get(comment.id))
        if comment.id not in known:
            messages.append(message)
        if comment_edited:
            now_edited.append(comment.id)
    Message.objects.bulk_create(messages, ignore_conflicts=True)
    if now_edited:
        Message.objects.filter(thread=thread, position__in=now_edited, edited=False).update(edited=True)
    return thread
