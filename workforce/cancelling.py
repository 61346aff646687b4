"""Cancelling a running request (``POST /api/requests/{id}/cancel``; spec 000 "What
routing can't do", 004 "A round closes…" and ``delegatedPostOnFinished``; see
``docs/architecture.md``, "Cancelling").

``do_cancel_request`` marks a running request ``aborted`` at once, with the error
``{reason: "cancelled", message: "cancelled: its run was cancelled"}``, in one
conditional UPDATE, so a cancel and the work finishing decide once between them, across
processes. The row's status is the cancel flag: whoever runs the work checks it at its
safe points (``is_cancelled``) and stops there, leaving the request aborted:

- a seat's turn (``seats.turns``): before each model call, between tool calls and before
  it settles; a cancelled turn ends with the ``cancelled`` refusal and its caller settles
  its own work item as it does a failed turn (a mailbox delivery is failed, a board row
  is parked);
- a routed post's fan-out (``mailboxes.routing``): cancelled before its route is
  recorded, nobody is woken, the fallback included; after, the chosen member still
  answers and the fan-out stays aborted;
- a delegate's run (``coordinators.delivery``): reported to its conversation at once by
  a cancel listener, so its round does not wait.

Apps that must hear of a cancel in its own transaction (the coordinators' delegated
runs) register a listener from their ``AppConfig.ready()`` with
``register_cancel_listener``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction
from django.utils import timezone

from .models import Organization, Request
from .queries import access_request_to_cancel
from .refusals import Refusal

CANCELLED = "cancelled"  # the reason code of a cancelled request's error
REQUEST_FINISHED = "request-finished"  # 409: only a running request can be cancelled
RUN_CANCELLED = "its run was cancelled"

CancelListener = Callable[[Request], None]

_listeners: dict[str, CancelListener] = {}

_OPEN = (Request.Status.PENDING, Request.Status.RUNNING)


def cancelled_refusal(detail: str = RUN_CANCELLED) -> Refusal:
    """The refusal a cancelled run ends with: ``cancelled: its run was cancelled``."""
    return Refusal(CANCELLED, detail)


def is_cancelled(request_pk: int | None) -> bool:
    """True when request ``request_pk`` was cancelled (it is ``aborted``): one indexed
    read, so a worker in another process sees a cancel at its next safe point."""
    if request_pk is None:
        return False
    # The SQL the ORM's exists() sends, built once: a turn reads it before each model
    # and tool call, and the compile cost more than the read.
    with connection.cursor() as cursor:
        cursor.execute(_IS_CANCELLED, [1, request_pk, Request.Status.ABORTED])
        return cursor.fetchone() is not None


_IS_CANCELLED = (
    f'SELECT %s AS "a" FROM "{Request._meta.db_table}" WHERE ("{Request._meta.db_table}"."id" = %s '
    f'AND "{Request._meta.db_table}"."status" = %s) LIMIT 1'
)


def register_cancel_listener(name: str, listener: CancelListener) -> None:
    """Call ``listener(request)`` inside the transaction of every cancel, after the
    request was marked aborted (a second registration under ``name`` replaces the
    first). A listener must be quick, must not raise for work it does not own, and
    writes in the cancel's transaction (a delegate's cancelled run is reported there)."""
    _listeners[name] = listener


def do_cancel_request(org: Organization, request_id: str, *, user_id: str | None) -> Request:
    """Cancel request ``request_id`` in ``org`` as ``user_id``, in one transaction.

    Only the request's owner (the user it runs as, ``Request.user_id``) may cancel it,
    and only when they may read it (``workforce.privacy.may_cancel``). A running (or
    pending) request is marked ``aborted`` with the error ``cancelled: its run was
    cancelled`` and a finish time, and the cancel listeners are told. Cancelling an
    aborted request again changes nothing and answers it as it is (idempotent).

    Returns:
        The request, ``aborted``.

    Raises:
        Refusal("request-not-found"): no such request, or one ``user_id`` may not
            read (404 either way: ids don't leak).
        Refusal("not-request-owner"): one ``user_id`` may read but that runs as someone
            else (403).
        Refusal("request-finished"): it already completed or failed (409).
    """
    with transaction.atomic():
        row = access_request_to_cancel(org, request_id, reader=user_id)
        if row.status in _OPEN:
            error = cancelled_refusal().as_error()
            if Request.objects.filter(pk=row.pk, status__in=_OPEN).update(
                status=Request.Status.ABORTED, error=error, finished_at=timezone.now()
            ):
                row.refresh_from_db(fields=["status", "output", "error", "finished_at"])
                for listener in list(_listeners.values()):
                    listener(row)
                return row
            row.refresh_from_db(fields=["status", "output", "error", "finished_at"])  # it ended meanwhile
        if row.status == Request.Status.ABORTED:
            return row
        raise Refusal(
            REQUEST_FINISHED,
            f'Request "{row.request_id}" already {row.status}; only a running request can be cancelled.',
        )


__all__ = [
    "CANCELLED",
    "REQUEST_FINISHED",
    "RUN_CANCELLED",
    "cancelled_refusal",
    "do_cancel_request",
    "is_cancelled",
    "register_cancel_listener",
]
