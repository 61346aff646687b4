"""The office's index of the vaults (spec "Where mail lives": "The office keeps an index
of mail in its database"): one ``Thread`` per issue and one ``Message`` per text,
written from an issue as a backend reports it. Upserts only, so indexing an issue
twice, or in any order with its events, leaves one row per issue and per text."""

from __future__ import annotations

from workforce.models import Organization

from .constants import LABEL_CLOSED, LABEL_NEW, LABEL_REPLIED, LABEL_WORKING
from .header import read_header
from .models import Message, Thread
from .store import Issue

UNKNOWN_SENDER = "unknown"


def state_of(issue: Issue) -> str:
    """The thread state an issue's labels say (``closed`` also when the issue is)."""
    labels = set(issue.labels)
    if LABEL_CLOSED in labels or issue.state == "closed":
        return Thread.State.CLOSED
    for label, state in ((LABEL_REPLIED, Thread.State.REPLIED), (LABEL_WORKING, Thread.State.WORKING)):
        if label in labels:
            return state
    return Thread.State.NEW if LABEL_NEW in labels else Thread.State.DELIVERED


def index_issue(org: Organization, vault: str, issue: Issue) -> Thread:
    """Write what ``issue`` on ``vault`` (an agent's slug) says into the index and return
    its thread. The sender, time and hops are read from the office's header only
    (``mail.header.read_header``), never from the text under it; an issue with no
    header (written on the forge by hand) is indexed with sender ``unknown``, as is a
    comment the backend says the office did not write (``Comment.by_office``). An issue
    the office did not create never reaches here (``mail.events``)."""
    header, text = read_header(issue.body)
    defaults = {
        "sender": header.sender if header else UNKNOWN_SENDER,
        "subject": issue.title[:300],
        "state": state_of(issue),
        "labels": list(issue.labels),
        "hops": header.hops if header else 0,
        "in_reply_to": header.in_reply_to if header else "",
        "sent_at": header.sent if header else issue.created_at,
    }
    # update_or_create locks the row, and takes an insert that loses a race to another
    # writer's as an update of that row.
    thread, _ = Thread.objects.update_or_create(organization=org, recipient=vault, number=issue.number, defaults=defaults)
    messages = [Message(thread=thread, position=0, author=defaults["sender"], body=text, sent_at=defaults["sent_at"])]
    for comment in issue.comments:
        # A comment someone other than the office wrote has no office header to trust.
        comment_header, comment_text = read_header(comment.body) if comment.by_office else (None, comment.body)
        messages.append(
            Message(
                thread=thread,
                position=comment.id,
                author=comment_header.sender if comment_header else UNKNOWN_SENDER,
                body=comment_text,
                sent_at=comment_header.sent if comment_header else comment.created_at,
            )
        )
    Message.objects.bulk_create(messages, ignore_conflicts=True)
    return thread
