"""Refusals: the spec's named reasons an action says no (docs/architecture.md "Settings and reason codes").

``Refusal(reason, detail)`` reads ``"<reason>: <detail>"``. Raising one inside an action
rolls back everything the action wrote; the request itself is still recorded as failed.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError

logger = logging.getLogger(__name__)

# HTTP status per reason: the kernel's own codes. Each app registers its codes from its
# AppConfig.ready() with register_reason (docs/architecture.md "Settings and reason codes").
# Anything not registered is a state conflict: 409.
KERNEL_REASONS = {
    "invalid-input": 400,
    "idempotency-key-reused": 409,
    "payload-too-large": 413,
    "request-timeout": 408,  # a body that did not arrive within WORKFORCE_BODY_TIMEOUT_SECONDS
    "too-many-connections": 429,  # one client address holds WORKFORCE_ADDRESS_LIMIT bodies and streams
    "not-found": 404,
    "method-not-allowed": 405,
    "not-acceptable": 406,
    "unsupported-media-type": 415,
    "session-not-found": 404,
    "flow-not-found": 404,
    "action-not-found": 404,
    "request-not-found": 404,
    "not-a-member": 403,
    "principal-mismatch": 403,
    "not-request-owner": 403,  # cancelling a request one may read but that runs as someone else
    "not-authenticated": 401,
    "forbidden": 403,  # a CSRF failure with session auth
    "session-not-addressable": 409,
    "request-finished": 409,  # cancelling a request that already completed or failed
    "external-dispatcher": 503,
    "database-unavailable": 503,
    "throttled": 429,  # a user's or an organization's rate (workforce.api.throttles; answered with Retry-After)
    "too-many-streams": 503,  # WORKFORCE_STREAM_LIMIT live streams are open (answered with Retry-After)  # the database refused a connection (answered with Retry-After)
    "backlog-full": 503,  # WORKFORCE_BACKLOG_LIMIT open wakes (workforce.backlog; answered with Retry-After)
    "internal-error": 500,
}
UNREGISTERED_STATUS = 409

_statuses: dict[str, int] = dict(KERNEL_REASONS)


def register_reason(code: str, status: int) -> None:
    """Answer a refusal with reason ``code`` with HTTP ``status``.

    Called from an app's ``AppConfig.ready()`` for the reason codes it raises (the spec's
    exact strings, e.g. ``"mailbox-not-bound"``); registering a code again with the same
    status is a no-op.

    Args:
        code: the reason code, non-empty.
        status: a 4xx or 5xx HTTP status.

    Raises:
        ValueError: the status is not 4xx/5xx, or ``code`` is already registered with
            another status (two apps disagree; the first registration stays).
    """
    if not code or not isinstance(code, str):
        raise ValueError(f"a reason code is non-empty text, not {code!r}")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise ValueError(f"reason {code!r}: a refusal answers a 4xx or 5xx status, not {status!r}")
    known = _statuses.get(code)
    if known is not None and known != status:
        raise ValueError(f"reason {code!r} already answers {known}; it cannot also answer {status}")
    _statuses[code] = status


def register_reasons(statuses: dict[str, int]) -> None:
    """``register_reason(code, status)`` for each item of ``statuses``."""
    for code, status in statuses.items():
        register_reason(code, status)


def registered_reasons() -> dict[str, int]:
    """Every registered reason code and its HTTP status (the kernel's and the apps')."""
    return dict(_statuses)


class Refusal(Exception):
    """An action's named refusal.

    Args:
        reason: the spec's reason code, e.g. ``"author-not-a-member"``.
        detail: a sentence for people; the message is ``"<reason>: <detail>"``.
        retry_after: whole seconds a caller should wait before trying again, sent as
            ``Retry-After`` (``backlog-full``); None for a refusal a retry won't change.
    """

    def __init__(self, reason: str, detail: str, *, retry_after: int | None = None):
        self.reason = reason
        self.detail = detail
        self.retry_after = retry_after
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
    """The HTTP status that answers a refusal with ``reason`` (409 when nobody
    registered it)."""
    return _statuses.get(reason, UNREGISTERED_STATUS)


def failure_text(exc: BaseException) -> str:
    """What an unexpected exception stores as an error's detail (a failed request's, a
    tool call's, a delivery's), which API readers and the model read.

    Most exceptions read ``"<type>: <message>"``. A database error (``DatabaseError`` and
    its subclasses) names its class only: the driver's text carries the server's DETAIL
    (backend pids, transaction and tuple ids, key values) that is no reader's business.
    That full text is logged here, at warning, instead.

    Args:
        exc: the exception caught.

    Returns:
        One line's worth of text, without the reason code.
    """
    name = type(exc).__name__
    if isinstance(exc, DatabaseError):
        logger.warning("database error, stored without its detail: %s: %s", name, " ".join(str(exc).split()))
        return f"the database refused the statement ({name}); the error's detail is in the server's log"
    return f"{name}: {exc}"
