"""Refusals: the spec's named reasons an action says no (design.md §8).

``Refusal(reason, detail)`` reads ``"<reason>: <detail>"``. Raising one inside an action
rolls back everything the action wrote; the request itself is still recorded as failed.
"""
from __future__ import annotations

# HTTP status per reason (design.md §4). Anything not listed is a state conflict: 409.
HTTP_STATUS = {
    "invalid-input": 400,
    "idempotency-key-reused": 409,
    "payload-too-large": 413,
    "not-found": 404,
    "method-not-allowed": 405,
    "not-acceptable": 406,
    "unsupported-media-type": 415,
    "mailbox-not-bound": 404,
    "board-not-declared": 404,
    "session-not-found": 404,
    "flow-not-found": 404,
    "action-not-found": 404,
    "request-not-found": 404,
    "author-not-a-member": 403,
    "talk-session-not-listed": 403,
    "not-a-member": 403,
    "principal-mismatch": 403,
    "not-authenticated": 401,
    "forbidden": 403,  # a CSRF failure with session auth
    "mailbox-is-a-template": 409,
    "session-not-addressable": 409,
    "external-dispatcher": 503,
    "database-unavailable": 503,  # the database refused a connection (answered with Retry-After)
    "internal-error": 500,
    # fileTask naming a worker key no drain of the board declares: the board's state, not the schema.
    "unknown-assignee": 409,
    # A mailbox's board actions (boardActions: true) refuse with the task tools' codes.
    "task_not_found": 404,
    "unknown_assignee": 400,
    "invalid_arguments": 400,
    # Coordinators (spec 004 "Who can be a delegate", "Changing the delegates").
    "state-field-reserved": 400,
    "worker-not-on-roster": 404,
    "coordinator-not-found": 404,
    "delegate-cannot-take-work": 409,
    "delegate-already-listed": 409,
    "delegates-full": 409,
    "delegate-not-listed": 409,
    "fallback-not-a-delegate": 409,
}


class Refusal(Exception):
    """An action's named refusal.

    Args:
        reason: the spec's reason code, e.g. ``"author-not-a-member"``.
        detail: a sentence for people; the message is ``"<reason>: <detail>"``.
    """

    def __init__(self, reason: str, detail: str):
        self.reason = reason
        self.detail = detail
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.detail}"

    @property
    def http_status(self) -> int:
        return http_status_for(self.reason)

    def as_error(self) -> dict:
        """The error payload stored on a failed request and sent over HTTP."""
        return {"reason": self.reason, "message": self.message}


def http_status_for(reason: str) -> int:
    """The HTTP status that answers a refusal with ``reason`` (409 when unlisted)."""
    return HTTP_STATUS.get(reason, 409)
