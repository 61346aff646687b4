"""Who may read a session: the one rule every read of a session, its items, requests,
runs and streams, and of a request goes through.

A session is *private* when it, or any session above it in its ``parent`` chain, runs on
a kind with the ``private_sessions`` facet (a coordinator conversation), or is one its
kind's ``private_session`` rule says is private (a project's talk session): then only the
owner of that private session reads it, and everything under it (a delegate's session
in the conversation). Any other session (a mailbox, a seat's conversation in it, a
board's run session) is readable by everyone in its organization; the organization
itself is checked by the lookup, never here. A reader of None (no authentication and no
``userId``) never reads a private session.
"""

from __future__ import annotations

from .facets import PRIVATE_SESSION, PRIVATE_SESSIONS
from .models import Request, Session

# Sessions nest a level or two (mailbox > seat conversation, conversation > delegate,
# mailbox > board run): lookups that follow this rule join this many ancestors in one
# query, and the walk gives up (private, nobody's) past MAX_DEPTH levels.
PARENT_JOIN = "parent__parent__parent"
MAX_DEPTH = 16

_UNREADABLE = object()


def _private_owner(session: Session) -> object:
    """The owner of the nearest private session in ``session``'s chain (itself
    included), None when none is private, ``_UNREADABLE`` when the chain is deeper than
    ``MAX_DEPTH``. Each ancestor not already loaded costs one query."""
    node = session
    for _ in range(MAX_DEPTH):
        if PRIVATE_SESSIONS.of(node.flow_kind):
            return node.user_id
        rule = PRIVATE_SESSION.of(node.flow_kind)
        if rule is not None and rule(node):
            return node.user_id
        if node.parent_id is None:  # the key, not the relation: no descriptor call on every read
            return None
        parent = node.parent
        if parent is None:
            return None
        node = parent
    return _UNREADABLE


def may_read(session: Session, reader: str | None) -> bool:
    """True when ``reader`` (a user id, or None for a caller that named nobody) may read
    ``session``, an object already found in the reader's organization.

    Load the session with ``select_related(PARENT_JOIN)`` (or as the ``session`` of a
    request, ``"session__" + PARENT_JOIN``) to check it without further queries.
    """
    owner = _private_owner(session)
    if owner is None:
        return True
    return reader is not None and owner is not _UNREADABLE and owner == reader


def may_cancel(request: Request, reader: str | None) -> bool:
    """True when ``reader`` may cancel ``request`` (``POST /api/requests/{id}/cancel``):
    it is the request's owner (the user it runs as, ``Request.user_id``) and may read
    its session (``may_read``). Load the request with ``select_related("session__" +
    PARENT_JOIN)`` to check it without further queries."""
    return reader is not None and request.user_id == reader and may_read(request.session, reader)
