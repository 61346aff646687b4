"""Reads of coordinator conversations (``access_*`` raise, ``list_*`` and
``find_*`` return what there is)."""

from __future__ import annotations

from workforce.models import Organization, Session
from workforce.privacy import PARENT_JOIN, may_read
from workforce.sessions import CHILD_SEPARATOR

from .constants import MAX_DELEGATES
from .models import Answer, Conversation, Delegate, DelegateSession


def delegate_session_id(filing_session_id: str, worker: str) -> str:
    """The id of ``worker``'s session for the conversation ``filing_session_id``:
    ``<filing session id>:<worker>``."""
    return f"{filing_session_id}{CHILD_SEPARATOR}{worker}"


def find_conversation(session: Session) -> Conversation | None:
    """The conversation kept for ``session``, or None before its first post or delegate
    action."""
    return Conversation.objects.filter(session=session).first()


def list_delegates(conversation: Conversation) -> list[Delegate]:
    """The conversation's delegates, in list order."""
    return list(Delegate.objects.filter(conversation=conversation).order_by("position", "pk"))


def delegates_answer(conversation: Conversation, delegates: list[Delegate] | None = None) -> dict:
    """The list as it stands (every delegate action's output; spec "Changing the
    delegates"): ``{"delegates": [{worker, note?}], "fallback": {worker} | None,
    "max": 25, "filingSessionId": ...}``."""
    rows = list_delegates(conversation) if delegates is None else delegates
    return {
        "delegates": [row.as_wire() for row in rows],
        "fallback": {"worker": conversation.fallback} if conversation.fallback else None,
        "max": MAX_DELEGATES,
        "filingSessionId": conversation.session.session_id,
    }


def find_worker_session(org: Organization, user_id: str, *, worker: str, filing_session_id: str | None = None) -> Session | None:
    """The session ``worker`` works a coordinator conversation's posts in (the spec's
    ``findWorkerSession({worker, filingSessionId})``), or None.

    With ``filing_session_id`` (a conversation's ``filingSessionId``): the delegate's
    session for that conversation, when ``user_id`` may read it (the kernel's rule,
    ``workforce.privacy.may_read``: the conversation is ``user_id``'s). Without it,
    the caller's own direct session with the worker (``<worker>:<user id>``, what
    ``ensure_worker_session`` opens): a lookup that names only the worker never finds a
    delegate's session.
    """
    if filing_session_id is None:
        return Session.objects.filter(
            organization=org, session_id=f"{worker}:{user_id}", user_id=user_id, parent__isnull=True
        ).first()
    row = (
        DelegateSession.objects.select_related(f"session__{PARENT_JOIN}")
        .filter(conversation__session__organization=org, conversation__session__session_id=filing_session_id, worker=worker)
        .first()
    )
    # The kernel's read rule decides: a delegate's session is the conversation owner's.
    return row.session if row is not None and may_read(row.session, user_id) else None


def round_answers(post_id: int, number: int) -> list[Answer]:
    """The answers of round ``number`` of post ``post_id`` that landed while it was
    open (the ones that go further), oldest first."""
    return list(Answer.objects.filter(post_id=post_id, round=number, goes_further=True).order_by("pk"))
