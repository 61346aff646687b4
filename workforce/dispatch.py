"""Dispatch: one flow reaching another kind's action (docs/architecture.md "Layers").

Apps never import each other's internals to reach one another at run time; they
dispatch to a kind's action through the registry, in process (``dispatch``) or on the
django-q2 cluster (``enqueue_action``), exactly as the spec's flows do.
"""

from __future__ import annotations

import logging
from typing import Any, NotRequired, TypedDict, Unpack

from django.conf import settings
from django.db import transaction

from . import inline
from .extras import ActionExtras
from .models import Organization, Request, Session
from .posted_by import PostedBy
from .refusals import Refusal
from .sessions import do_run_action

logger = logging.getLogger(__name__)


def external_dispatcher() -> bool:
    """True when dispatch hands work to an external queue with no shared lease backend
    (``WORKFORCE_EXTERNAL_DISPATCHER``): flow-to-flow posts are then refused."""
    return bool(settings.WORKFORCE_EXTERNAL_DISPATCHER)


class DispatchCall(TypedDict):
    """``dispatch``'s keyword arguments, for a caller that makes one call either way
    (``dispatch`` or ``dispatch_once``): ``dispatch(**call)``."""

    org: Organization
    kind: str
    session_id: str
    action: str
    payload: Any  # the action's input: any JSON value
    user_id: str
    parent_request: NotRequired[Request | None]
    parent_session: NotRequired[Session | None]
    extras: NotRequired[ActionExtras | None]
    posted_by: NotRequired[PostedBy | None]


def dispatch(
    *,
    org: Organization,
    kind: str,
    session_id: str,
    action: str,
    payload: Any,
    user_id: str,
    parent_request: Request | None = None,
    parent_session: Session | None = None,
    extras: ActionExtras | None = None,
    posted_by: PostedBy | None = None,
) -> Request:
    """Run ``kind.action`` on ``session_id`` in this process, as a flow (internal
    actions reachable), and return its recorded Request. ``posted_by``: who a line the
    action writes names (``do_run_action``): a seat's tool passes its seat.

    Raises:
        Refusal("external-dispatcher"): dispatch into an existing session is not possible
            on this deployment.
        Refusal("flow-not-found" | "action-not-found" | "session-not-addressable").
    """
    if external_dispatcher():
        raise Refusal(
            "external-dispatcher",
            "This deployment hands dispatch to an external queue whose workers share no lease backend.",
        )
    return do_run_action(
        org=org,
        kind=kind,
        session_id=session_id,
        action=action,
        input=payload,
        user_id=user_id,
        internal=True,
        parent_request=parent_request,
        parent_session=parent_session,
        extras=extras,
        posted_by=posted_by,
    )


def enqueue(func_path: str, *args: Any, group: str | None = None, **kwargs: Any) -> None:
    """Hand ``func_path(*args, **kwargs)`` to the django-q2 cluster, never before the
    current transaction commits. Arguments must be ids and JSON, never model instances.

    With the ORM broker the task row is written inside the caller's transaction, so it
    commits (or rolls back) with the rows it reads: nothing is lost if the process dies
    right after the commit. With Redis, and in sync mode (tests), it is sent from
    ``transaction.on_commit`` so a worker never runs before those rows exist
    (the Redis broker is not part of the transaction). A send that fails there (the broker is down) is logged as one warning
    line and does not raise: the caller's rows are committed and its answer stands; the
    work is picked up by its app's sweeper (pending deliveries, undecided routes, rows
    nobody drains, coordinator deliveries and jobs).

    In ``serve`` on one machine a task an app let run in the web process
    (``workforce.inline.allow``) runs there on a free thread after the commit, and goes
    to the cluster only when none is free (``workforce.inline``).
    """
    from django_q.conf import Conf
    from django_q.tasks import async_task

    def _send() -> None:
        options = {"group": group} if group else {}
        async_task(func_path, *args, **kwargs, **({"q_options": options} if options else {}))

    def _send_after_commit() -> None:
        # The caller's rows are committed: a broker that is down must not turn that into
        # an error (a client would retry and act twice). Every enqueued task has a row
        # a sweeper enqueues again, so log and go on.
        # Sync mode (tests) runs the task here: its own exceptions still propagate.
        if Conf.SYNC:
            _send()
            return
        try:
            _send()
        except Exception as exc:  # noqa: BLE001  (any broker failure: connection, timeout, auth)
            reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            logger.warning("task %s%s not enqueued (%s); its sweeper will enqueue it again", func_path, list(args), reason)

    # On one machine serve's web process may run the task itself after the commit
    # (workforce.inline): its row is the durable record, its sweeper the fallback.
    if not kwargs and group is None and not Conf.SYNC and inline.offer_after_commit(func_path, args, _send_after_commit):
        return
    if Conf.ORM and not Conf.SYNC and transaction.get_connection().in_atomic_block:
        _send()
    else:
        transaction.on_commit(_send_after_commit)


def dispatch_once(*, idempotency_key: str, **kwargs: Unpack[DispatchCall]) -> Request:
    """``dispatch`` with an idempotency key: a second call with the same key (by the same
    ``user_id`` in the same ``org``) answers the first call's request instead of acting
    again. Used where a redelivered task may repeat a dispatch (a seat's tool post).

    Args:
        idempotency_key: unique per intended effect, e.g. ``"dlv_42:post-to-mailbox:1"``.
        **kwargs: exactly ``dispatch``'s keyword arguments.

    Raises:
        Refusal("external-dispatcher"), and what ``dispatch`` raises.
        Refusal("idempotency-key-reused"): the key was used with other input.
    """
    if external_dispatcher():
        raise Refusal(
            "external-dispatcher",
            "This deployment hands dispatch to an external queue whose workers share no lease backend.",
        )
    return do_run_action(
        org=kwargs["org"],
        kind=kwargs["kind"],
        session_id=kwargs["session_id"],
        action=kwargs["action"],
        input=kwargs["payload"],
        user_id=kwargs["user_id"],
        parent_request=kwargs.get("parent_request"),
        parent_session=kwargs.get("parent_session"),
        extras=kwargs.get("extras"),
        posted_by=kwargs.get("posted_by"),
        internal=True,
        idempotency_key=idempotency_key,
    )
