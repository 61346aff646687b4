"""Reads of coordinator conversations (design.md §2: ``access_*`` raise, ``list_*`` and
``find_*`` return what there is)."""
from __future__ import annotations

from typing import Iterable

from django.db.models import Q

from seats.models import Seat
from seats.queries import SCOPE_ORDER, seat_reachable
from workforce.models import Item, Organization, Request, Session
from workforce.privacy import PARENT_JOIN, may_read
from workforce.queries import window_request_ids
from workforce.refusals import Refusal

from .constants import COORDINATOR_JUDGMENT, MAX_DELEGATES
from .models import Answer, Conversation, Delegate, DelegateSession

MESSAGE_ITEM = "message"


def reachable_seats(org_id: str, user_id: str, workers: Iterable[str]) -> dict[str, Seat]:
    """``{worker id: seat}`` for the workers ``user_id`` in ``org_id`` reaches (their
    own seat first, then the organization's, then a shared one), in one query. A worker
    nobody hired, another user's, or one that was fired is absent."""
    workers = list(dict.fromkeys(workers))
    if not workers:
        return {}
    rows = Seat.objects.filter(seat_id__in=workers).filter(
        Q(scope=Seat.Scope.SHARED) | Q(organization_id=org_id, scope=Seat.Scope.ORG)
        | Q(organization_id=org_id, scope=Seat.Scope.OWN, owner_user_id=user_id)
    )
    found: dict[str, Seat] = {}
    for seat in rows:
        if not seat_reachable(seat, org_id=org_id, user_id=user_id):
            continue
        best = found.get(seat.seat_id)
        if best is None or SCOPE_ORDER[seat.scope] < SCOPE_ORDER[best.scope]:
            found[seat.seat_id] = seat
    return found


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


def find_worker_session(
    org: Organization, user_id: str, *, worker: str, filing_session_id: str | None = None
) -> Session | None:
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
        .filter(conversation__session__organization=org, conversation__session__session_id=filing_session_id,
                worker=worker)
        .first()
    )
    # The kernel's read rule decides: a delegate's session is the conversation owner's.
    return row.session if row is not None and may_read(row.session, user_id) else None


def access_conversation_session(org: Organization, user_id: str, session_id: str) -> Session:
    """A coordinator conversation's session as its owner reaches it.

    Raises:
        Refusal("session-not-found"): no such session in ``org``, or it is someone
            else's (404, never 403: ids don't leak).
    """
    session = Session.objects.filter(organization=org, session_id=session_id, user_id=user_id).first()
    if session is None:
        raise Refusal("session-not-found", f'No session "{session_id}" exists.')
    return session


def round_answers(post_id: int, number: int) -> list[Answer]:
    """The answers of round ``number`` of post ``post_id`` that landed while it was
    open (the ones that go further), oldest first."""
    return list(Answer.objects.filter(post_id=post_id, round=number, goes_further=True).order_by("pk"))


def conversation_messages(session: Session, *, exclude_request_id: int | None = None) -> list[dict]:
    """The conversation as the coordinator's own turn sees it: its message items inside
    the history window, oldest first, as chat messages. A person's post is a user
    message; the coordinator's own reply an assistant message; a delegate's answer an
    assistant message ``<worker>: <text>``. The route records never enter it."""
    items = Item.objects.filter(session=session, type=MESSAGE_ITEM, request__in=window_request_ids(session)).order_by("seq")
    items = items.exclude(request__status=Request.Status.ABORTED)
    if exclude_request_id is not None:
        items = items.exclude(request_id=exclude_request_id)
    messages = []
    for item in items:
        data = item.data
        text = data.get("text") or ""
        if not text:
            continue
        if data.get("role") == "user":
            messages.append({"role": "user", "content": text})
        elif data.get("role") == "assistant":
            name = data.get("agentName") or ""
            content = text if name.startswith(COORDINATOR_JUDGMENT) or not name else f"{name}: {text}"
            messages.append({"role": "assistant", "content": content})
    return messages
