"""A coordinator conversation and its delegates (spec 004 "Changing the delegates",
"Who can be a delegate").

- ``open_conversation``: a conversation takes its own copy of the file's ``delegates:``
  and ``fallback:`` on its first post or first delegate action (or tool call).
- ``do_change_delegates``: ``addDelegate``, ``removeDelegate``, ``setFallback``,
  ``listDelegates`` (actions and the coordinator's tools alike), each answering the list
  as it stands.

Both run with the conversation session's row lock held.
"""

from __future__ import annotations

from django.utils import timezone

from seats.queries import reachable_seats
from workforce.contracts import in_callers_transaction
from workforce.models import Organization, Session
from workforce.refusals import Refusal
from workforce.sessions import CHILD_SEPARATOR
from workforce.wire import MAX_ID_LENGTH

from . import policies
from .config import current_setup, takes_posts, takes_tasks
from .constants import (
    ALREADY_A_DELEGATE,
    CANNOT_TAKE_WORK,
    COORDINATOR_NOT_FOUND,
    DELEGATES_FULL,
    FALLBACK_NOT_A_DELEGATE,
    MAX_DELEGATES,
    NOT_A_DELEGATE,
    NOT_ON_ROSTER,
    already_a_delegate,
    delegates_full,
    fallback_not_a_delegate,
    no_worker_on_roster,
    not_a_delegate,
    takes_neither,
)
from .models import Conversation, Delegate, DelegateSession
from .queries import delegate_session_id, delegates_answer, find_conversation, list_delegates


def coordinator_worker(session: Session) -> str:
    """The coordinator a conversation talks to: its state's ``worker``, or, for a
    session opened by a post, the part of its id before the first colon
    (``support.help:u_42``)."""
    return (session.state or {}).get("worker") or session.session_id.split(":", 1)[0]


def open_conversation(org: Organization, session: Session, user_id: str) -> Conversation:
    """The conversation kept for ``session``; on its first post or delegate action it
    takes its own copy of the coordinator's ``delegates:`` and ``fallback:`` (spec
    "Changing the delegates"). Call with the session's row lock held.

    Raises:
        Refusal("session-not-found"): the session is another user's (404).
        Refusal("coordinator-not-found"): it names no coordinator on the owner's roster.
    """
    if session.user_id != user_id:
        raise Refusal("session-not-found", f'No session "{session.session_id}" exists.')
    conv = find_conversation(session)
    if conv is not None:
        conv.session = session
        return conv
    worker = coordinator_worker(session)
    seat = reachable_seats(org.pk, user_id, [worker]).get(worker)
    if seat is None or seat.kind != session.flow_kind:
        raise Refusal(
            COORDINATOR_NOT_FOUND,
            f'No coordinator "{worker}" on your roster; open a conversation with POST /api/workers/<worker>/sessions.',
        )
    config = seat.config or {}
    workers = list(dict.fromkeys(w for w in (config.get("delegates") or []) if isinstance(w, str)))[:MAX_DELEGATES]
    fallback = config.get("fallback") if config.get("fallback") in workers else ""
    conv = Conversation.objects.create(
        organization=org, session=session, worker=worker, fallback=fallback or "", copied_at=timezone.now()
    )
    Delegate.objects.bulk_create([Delegate(conversation=conv, worker=w, position=i) for i, w in enumerate(workers)])
    if (session.state or {}).get("worker") != worker:
        session.state = {**(session.state or {}), "worker": worker}
        Session.objects.filter(pk=session.pk).update(state=session.state)
    return conv


# ----------------------------------------------------------------------------- delegates


def _held_by_another(org: Organization, conv: Conversation, worker: str, child: str) -> bool:
    """True when ``child``, the id of ``worker``'s session for ``conv``, is held by a
    session other than the one that delegate already works ``conv``'s posts in."""
    own = DelegateSession.objects.filter(conversation=conv, worker=worker).values("session_id")
    return Session.objects.filter(organization=org, session_id=child).exclude(pk__in=own).exists()


@in_callers_transaction
def do_change_delegates(org: Organization, session: Session, user_id: str, change: str, data: dict) -> dict:
    """One delegate action or tool call (spec "Changing the delegates", "Who can be a
    delegate"), inside the caller's transaction; a refusal writes nothing.

    Args:
        change: ``add`` (``{worker, note?}``), ``remove`` (``{worker}``), ``fallback``
            (``{worker}``; ``None`` clears it) or ``list`` (``{}``).

    Returns:
        The list as it stands: ``{delegates, fallback, max: 25, filingSessionId}``.

    Raises:
        Refusal: the spec's refusals, each with its sentence: ``worker-not-on-roster``,
            ``delegate-cannot-take-work``, ``delegate-already-listed``, ``delegates-full``,
            ``delegate-not-listed``, ``fallback-not-a-delegate``; ``invalid-input`` for a
            malformed tool call; ``session-not-addressable`` (409) for a worker whose
            session id under this conversation another conversation holds.
    """
    session = policies.lock_conversation(session)
    conv = open_conversation(org, session, user_id)
    delegates = list_delegates(conv)
    listed = [d.worker for d in delegates]
    if change == "list":
        return delegates_answer(conv, delegates)
    worker = data.get("worker") if isinstance(data, dict) else None
    if change == "fallback" and worker is None and "worker" in data:
        conv.fallback = ""
        conv.save(update_fields=["fallback"])
        return delegates_answer(conv, delegates)
    if not isinstance(worker, str) or not worker.strip():
        raise Refusal("invalid-input", "worker: the id of a worker is required.")
    if change == "add":
        note = data.get("note") or ""
        if not isinstance(note, str):
            raise Refusal("invalid-input", "note: must be text.")
        setup = current_setup(session.flow_kind)
        seat = reachable_seats(org.pk, session.user_id, [worker]).get(worker)
        if seat is None:
            raise Refusal(NOT_ON_ROSTER, no_worker_on_roster(worker))
        if not takes_posts(seat.kind, setup) and not takes_tasks(seat.kind):
            raise Refusal(CANNOT_TAKE_WORK, takes_neither(worker, seat.kind))
        if worker in listed:
            raise Refusal(ALREADY_A_DELEGATE, already_a_delegate(worker))
        if len(listed) >= MAX_DELEGATES:
            raise Refusal(DELEGATES_FULL, delegates_full())
        child = delegate_session_id(session.session_id, worker)
        if len(child) > MAX_ID_LENGTH:
            # Refused here, not when the first post reaches the delegate in the cluster.
            raise Refusal(
                "invalid-input",
                f"{worker} can't be a delegate of this conversation: its session ({session.session_id[:40]}…"
                f"{CHILD_SEPARATOR}{worker}) would be {len(child)} characters, and ids are at most {MAX_ID_LENGTH}. "
                "Open a conversation with a shorter sessionId.",
            )
        if _held_by_another(org, conv, worker, child):
            # The delegate's session id ("<conversation>:<worker>") is held by another of
            # the caller's sessions (a conversation opened with sessionId = this worker):
            # every post handed to it would fail in the cluster. Refused here instead.
            raise Refusal(
                "session-not-addressable",
                f'{worker} can\'t be a delegate of this conversation: the id of its session, "{child}", is held by '
                "another conversation of yours.",
            )
        position = max((d.position for d in delegates), default=-1) + 1
        Delegate.objects.create(conversation=conv, worker=worker, note=note, position=position)
        return delegates_answer(conv)
    if change == "remove":
        if worker not in listed:
            raise Refusal(NOT_A_DELEGATE, not_a_delegate(worker))
        Delegate.objects.filter(conversation=conv, worker=worker).delete()
        if conv.fallback == worker:  # removing the fallback clears it
            conv.fallback = ""
            conv.save(update_fields=["fallback"])
        return delegates_answer(conv)
    if change == "fallback":
        if worker not in listed:
            raise Refusal(FALLBACK_NOT_A_DELEGATE, fallback_not_a_delegate(worker))
        conv.fallback = worker
        conv.save(update_fields=["fallback"])
        return delegates_answer(conv, delegates)
    raise ValueError(f"unknown delegate change {change!r}")
