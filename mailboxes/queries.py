"""Reads of mailboxes: their bound state, the windowed transcript and the durable one."""

from __future__ import annotations

from django.db.models import QuerySet

from workforce.models import Organization, Session
from workforce.privacy import PARENT_JOIN, may_read
from workforce.queries import window_request_ids
from workforce.refusals import Refusal

from .models import Delivery, Line
from .roster import current_roster

MAILBOX_STATE_KEYS = ("members", "charter", "description")


def is_mailbox_state(state: object) -> bool:
    """True when ``state`` is what ``open_mailboxes`` writes: members, charter, description."""
    return (
        isinstance(state, dict)
        and isinstance(state.get("members"), list)
        and isinstance(state.get("charter"), str)
        and isinstance(state.get("description"), str)
    )


def access_mailbox_state(session: Session) -> dict:
    """The mailbox state of ``session`` (members, charter, description).

    Raises:
        Refusal("mailbox-is-a-template"): the id is a room template's (``mintFor:``).
        Refusal("mailbox-not-bound"): nobody opened this id as a mailbox.
    """
    if current_roster().template(session.session_id) is not None:
        raise Refusal(
            "mailbox-is-a-template",
            f'"{session.session_id}" is a room template (mintFor:), not a mailbox; its old session is kept but not served.',
        )
    if not is_mailbox_state(session.state):
        raise Refusal(
            "mailbox-not-bound",
            f'"{session.session_id}" was never opened as a mailbox. Declare it in the tree and run open_mailboxes.',
        )
    return session.state


def access_mailbox_session(org: Organization, mailbox_id: str, *, reader: str | None) -> Session:
    """The opened mailbox ``mailbox_id`` in ``org``, as ``reader`` (a user id, None for a
    caller that named nobody) reads it: a mailbox is readable by its organization, and
    the kernel's rule (``workforce.privacy.may_read``) refuses any session under a
    private conversation.

    Raises:
        Refusal("mailbox-not-bound"): no such session, it is not an opened mailbox, or
            ``reader`` may not read it.
    """
    session = Session.objects.filter(organization=org, session_id=mailbox_id).select_related(PARENT_JOIN).first()
    if session is None or not session.state or session.flow_kind == "channel" or not may_read(session, reader):
        raise Refusal("mailbox-not-bound", f'"{mailbox_id}" was never opened as a mailbox.')
    access_mailbox_state(session)
    return session


def list_window_lines(session: Session) -> QuerySet[Line]:
    """The lines inside the session's history window (its last N requests), in order."""
    # Materialize the window's request ids first: a correlated subquery makes SQLite scan
    # every line of the mailbox (bench/posts.py), while 50 ids hit the request index.
    request_ids = list(window_request_ids(session).values_list("pk", flat=True))
    return Line.objects.filter(request_id__in=request_ids).order_by("seq")


def list_transcript(session: Session, *, after: int = 0, limit: int = 100) -> QuerySet[Line]:
    """The durable transcript: lines with ``seq > after``, oldest first, at most ``limit``."""
    return Line.objects.filter(session=session, seq__gt=after).order_by("seq")[:limit]


def held_boards(session: Session) -> list[str]:
    """The boards the mailbox holds, from the files as bound at this start (never stored)."""
    bound = current_roster().mailbox(session.session_id)
    return list(bound.boards) if bound is not None else []


def list_deliveries(mailbox: Session, post_id: str | None = None) -> QuerySet[Delivery]:
    """The deliveries of a mailbox (or of one post), oldest first."""
    qs = Delivery.objects.filter(mailbox=mailbox).order_by("pk")
    return qs.filter(post_id=post_id) if post_id else qs
