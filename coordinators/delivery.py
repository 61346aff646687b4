"""Delegates at work (spec 004 "Talking to it", "Making your own flow a delegate",
"Letting delegates answer each other").

``do_deliver_delegated(delivery_id)`` (the ``deliver_delegated_post`` task's body) runs
one delivery once:

1. claims it with a conditional UPDATE (pending, or running with a lapsed lease, and
   fewer than ``max_attempts()`` claims), so a redelivered task does nothing;
2. finds the delegate's own session for this conversation (by worker and filing session
   id; created on its first post, a child of the conversation's session);
3. runs the delegate flow's delegated-post entry on it, outside any transaction, in a
   request of the delegate's session (``onDelegatedPost``, input ``{message}``), through
   the kernel's one call of a handler (``workforce.sessions.call_handler``, as
   ``do_run_action``: the input checked, a refusal or a bug failing the request), one
   run of the delegate there at a time, through ``seats.turns.drive_turn`` (kind
   ``delegated-post``);
4. in one transaction, settles that request and reports to the conversation
   (``onDelegateReport``, a request of its own): the answer lands there under the
   delegate's worker id, once per delivery. A failed turn reports at once; a cancelled
   one reports at once only when the flow sets ``delegated_post_on_finished``. A run
   cancelled by ``POST /api/requests/{id}/cancel`` is reported by the cancel itself
   (``report_cancelled_run``), before its worker reaches a safe point.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from seats.models import Seat
from seats.queries import reachable_seats
from seats.turns import SlotRule, TurnPlan, TurnSpec, drive_turn
from workforce.cancelling import CANCELLED, cancelled_refusal, is_cancelled
from workforce.delegation import DELEGATED_POST_ENTRY, DelegatedRunCancelled, reply_text, reports_cancellation
from workforce.dispatch import dispatch
from workforce.flows import registry
from workforce.holders import is_outage
from workforce.leases import LeaseLost, claim_lease
from workforce.models import Request, Session
from workforce.refusals import Refusal, failure_text
from workforce.sessions import (
    ActionContext,
    ActionFailed,
    call_handler,
    do_abort_request,
    do_record_request,
    ensure_child_session,
)

from .config import current_setup, takes_posts
from .constants import DELEGATE_CANCELLED, REPORT, cannot_take_post, no_worker_on_roster
from .models import DelegatedPost, DelegateSession
from .policies import DELIVER_TASK
from .queries import delegate_session_id

logger = logging.getLogger(__name__)


def ensure_delegate_session(delivery: DelegatedPost, seat: Seat) -> Session:
    """The session ``seat`` works this conversation's posts in: one per delegate per
    conversation, found by worker and filing session id, created on its first post (a
    child of the conversation's session, owned by its owner, on the seat's kind, its
    state naming the seat, the coordinator and the filing session).

    Raises:
        Refusal("session-not-addressable"): the id is held by a session on another kind.
    """
    conv = delivery.conversation
    found = DelegateSession.objects.filter(conversation=conv, worker=seat.seat_id).select_related("session").first()
    if found is not None:
        return found.session
    filing = conv.session
    with transaction.atomic():
        session = ensure_child_session(
            filing,
            delegate_session_id(filing.session_id, seat.seat_id),
            kind=seat.kind,
            state={"seat": seat.seat_id, "coordinator": conv.worker, "filingSessionId": filing.session_id},
        )
        try:
            with transaction.atomic():
                DelegateSession.objects.create(conversation=conv, worker=seat.seat_id, session=session)
        except IntegrityError:
            pass  # another task made it at the same moment: same session
    return session


def report(
    *,
    delivery: DelegatedPost,
    token: str,
    outcome: str,
    text: str = "",
    error: Refusal | None = None,
    parent_request: Request | None = None,
) -> Request:
    """Tell the conversation how ``delivery`` ended, in a request of its own on the
    conversation's session (dispatch to ``onDelegateReport``), as holder of claim
    ``token``. Call inside the transaction that settles the delegate's turn."""
    payload: dict = {"deliveryId": delivery.pk, "outcome": outcome}
    if text:
        payload["text"] = text
    if error is not None:
        payload["error"] = error.as_error()
    conv_session = delivery.conversation.session
    return dispatch(
        org=conv_session.organization,
        kind=conv_session.flow_kind,
        session_id=conv_session.session_id,
        action=REPORT,
        payload=payload,
        user_id=conv_session.user_id,
        parent_request=parent_request,
        extras={"claim_token": token},
    )


def do_deliver_delegated(delivery_id: int) -> str:
    """Run delivery ``delivery_id`` once (see the module docstring). Never raises.

    A delegate still running a turn in its session for this conversation: the claim is
    handed back and the delivery waits (``seats.turns.take_slot``) until that turn ends.

    Returns:
        ``"answered"``, ``"failed"``, ``"cancelled"``, ``"waiting"``, ``"not-claimed"``
        or ``"lease-lost"``.
    """
    token = claim_lease(DelegatedPost, delivery_id)
    if token is None:
        return "not-claimed"
    delivery = DelegatedPost.objects.select_related("conversation__session__organization", "post__request", "turn_request").get(
        pk=delivery_id
    )
    if delivery.turn_request is not None and delivery.turn_request.status == Request.Status.RUNNING:
        do_abort_request(delivery.turn_request.pk, "the task running this delegated turn stopped; the post was delivered again.")
    try:
        return _run(delivery, token)
    except LeaseLost:
        logger.warning("delegated post %s: the claim lapsed and another task took it over", delivery_id)
        return "lease-lost"
    except Exception as exc:  # a bug: report it, keep the cluster going
        if is_outage(exc):  # not a bug: the task waits for the database and runs again (deliver_delegated_post)
            raise
        logger.exception("delegated post %s failed", delivery_id)
        try:
            with transaction.atomic():
                _report(delivery, token, "failed", error=Refusal("internal-error", failure_text(exc)))
        except LeaseLost:
            return "lease-lost"
        return "failed"


def _report(
    delivery: DelegatedPost,
    token: str,
    outcome: str,
    *,
    text: str = "",
    error: Refusal | None = None,
    parent: Request | None = None,
) -> Request:
    request = report(delivery=delivery, token=token, outcome=outcome, text=text, error=error, parent_request=parent)
    if request.status != Request.Status.COMPLETED:
        raise RuntimeError(f"the conversation refused the report: {request.error}")
    if not (request.output or {}).get("claimed"):
        raise LeaseLost()
    if outcome == "failed" and error is not None:
        logger.warning(
            "delivery failed: coordinator %s, conversation %s, delegate %s, post %s: %s",
            delivery.conversation.worker,
            delivery.conversation.session.session_id,
            delivery.worker,
            delivery.post.post_id,
            error.message,
        )
    return request


def _run(delivery: DelegatedPost, token: str) -> str:
    conv_session = delivery.conversation.session
    setup = current_setup(conv_session.flow_kind)
    seat = reachable_seats(conv_session.organization_id, conv_session.user_id, [delivery.worker]).get(delivery.worker)
    problem: Refusal | None = None
    session: Session | None = None
    if seat is None:
        problem = Refusal("delegate-fired", no_worker_on_roster(delivery.worker))
    elif not takes_posts(seat.kind, setup):
        problem = Refusal("delegate-cannot-take-post", cannot_take_post(delivery.worker, seat.kind))
    else:
        try:
            session = ensure_delegate_session(delivery, seat)
        except Refusal as refusal:
            problem = refusal
    if problem is not None or seat is None or session is None:  # (a problem is set whenever one is None)
        with transaction.atomic():
            _report(delivery, token, "failed", error=problem)
        return "failed"
    assert seat is not None  # a missing seat is a problem, reported above
    # One turn of a delegate at a time in its session (seats.turns): a delegate still
    # working this conversation's last post gets this one once it is done.
    rule = SlotRule.leased(session, seat.seat_id, task=DELIVER_TASK, model=DelegatedPost, pk=delivery.pk, token=token)

    def lost(turn: _EntryTurn, exc: Exception) -> None:
        if isinstance(exc, LeaseLost):
            do_abort_request(turn.request.pk, "another task took this delegated post over")

    plan: TurnPlan[_EntryTurn, str] = TurnPlan(
        start=lambda: _start_entry(delivery, token, seat, session),
        settle=lambda turn: _settle_entry(delivery, token, seat, turn),
        slot=rule,
        waiting="waiting",
        on_error=lost,
    )
    return drive_turn(TurnSpec.planned("delegated-post", plan))


@dataclass
class _EntryTurn:
    """A delegate's run of its flow's delegated-post entry, as the turn
    ``seats.turns.drive_turn`` finishes: the reply text, the error, or ``cancelled``."""

    request: Request
    reply: str = ""
    error: Refusal | None = None
    cancelled: bool = False

    def finish(self, *, output: dict | None = None) -> None:
        """Settle the delegate's request (``_finish``); a run cancelled as it finished
        ends cancelled."""
        if not _finish(self.request, text=self.reply, error=self.error, cancelled=self.cancelled):
            self.cancelled, self.reply, self.error = True, "", delegate_cancelled()


def _start_entry(delivery: DelegatedPost, token: str, seat: Seat, session: Session) -> Callable[[], _EntryTurn]:
    """Inside the slot's transaction: the delegate's running request, noted on the
    delivery; returns the run of the flow's entry (outside any transaction)."""
    conv_session = delivery.conversation.session
    flow = registry.require(seat.kind)
    action = flow.internal_actions[DELEGATED_POST_ENTRY]
    payload = {"message": delivery.message}
    request = do_record_request(
        session,
        action=DELEGATED_POST_ENTRY,
        input=payload,
        user_id=conv_session.user_id,
        running=True,
        parent=delivery.post.request,  # the person's post started this run (GET …/runs?startedBy=)
    )
    if not DelegatedPost.objects.filter(pk=delivery.pk, claim_token=token).update(turn_request=request, delegate_session=session):
        raise LeaseLost()

    def run() -> _EntryTurn:
        ctx = ActionContext(
            org=conv_session.organization,
            session=session,
            request=request,
            user_id=conv_session.user_id,
            flow=flow,
            extras={
                "delegated": {
                    "postId": delivery.post.post_id,
                    "round": delivery.round,
                    "coordinator": delivery.conversation.worker,
                    "filingSessionId": conv_session.session_id,
                    "deliveryId": delivery.pk,
                    "idempotencyPrefix": f"cdp{delivery.pk}",
                }
            },
        )
        turn = _EntryTurn(request)
        try:
            # The kernel's one call of a handler (what do_run_action calls): the input
            # checked, a refusal or a bug (the door's: it fails the turn, not the
            # cluster) turned into the request's error the same way.
            output = call_handler(
                action,
                ctx,
                payload,
                label=f"{seat.kind}.{DELEGATED_POST_ENTRY} on {session.session_id}",
                passthrough=(DelegatedRunCancelled,),
            )
            turn.reply = reply_text(output)
            if not turn.reply.strip():
                turn.error = Refusal(
                    "empty-reply", f"{delivery.worker} answered the delegated post with nothing; nothing is answered."
                )
        except DelegatedRunCancelled:
            turn.cancelled = True
        except ActionFailed as failed:
            turn.error = failed.refusal
        if turn.cancelled or is_cancelled(request.pk):
            turn.cancelled, turn.reply, turn.error = True, "", delegate_cancelled()  # someone cancelled the run while it ran
        return turn

    return run


def _settle_entry(delivery: DelegatedPost, token: str, seat: Seat, turn: _EntryTurn) -> str:
    """Inside the transaction that finished the run: report how it ended to the
    conversation (a cancelled run of a flow that does not say so waits for its round's
    deadline). Raises LeaseLost when the claim lapsed."""
    if (
        turn.cancelled
        and not DelegatedPost.objects.filter(pk=delivery.pk, claim_token=token, status=DelegatedPost.Status.RUNNING).exists()
    ):
        return "cancelled"  # the cancel reported it already (report_cancelled_run)
    if turn.cancelled and not reports_cancellation(seat.kind):
        # Its flow doesn't say so: the round waits for its deadline.
        error = turn.error or delegate_cancelled()
        if not DelegatedPost.objects.filter(pk=delivery.pk, claim_token=token, status=DelegatedPost.Status.RUNNING).update(
            status=DelegatedPost.Status.CANCELLED, finished_at=timezone.now(), error=error.as_error()
        ):
            raise LeaseLost()
        return "cancelled"
    outcome = "cancelled" if turn.cancelled else ("failed" if turn.error else "answered")
    _report(delivery, token, outcome, text=turn.reply if outcome == "answered" else "", error=turn.error, parent=turn.request)
    return outcome


def _finish(request: Request, *, text: str, error: Refusal | None, cancelled: bool) -> bool:
    """Settle the delegate's request (running -> aborted, failed or completed); a request
    cancelled meanwhile stays aborted. Returns False when it was cancelled first."""
    now = timezone.now()
    if cancelled:
        Request.objects.filter(pk=request.pk, status=Request.Status.RUNNING).update(
            status=Request.Status.ABORTED, finished_at=now, error=cancelled_refusal().as_error()
        )
        return True
    if error is not None:
        fields = {"status": Request.Status.FAILED, "error": error.as_error()}
    else:
        fields = {"status": Request.Status.COMPLETED, "output": {"text": text}}
    if Request.objects.filter(pk=request.pk, status=Request.Status.RUNNING).update(finished_at=now, **fields):
        return True
    return not is_cancelled(request.pk)


def delegate_cancelled() -> Refusal:
    """What a delegate whose run was cancelled reports, at once, so its round does not
    wait (spec 004 "A round closes…", ``delegatedPostOnFinished``):
    ``cancelled: its turn failed: its run was cancelled``."""
    return Refusal(CANCELLED, DELEGATE_CANCELLED)


def report_cancelled_run(request: Request) -> None:
    """The cancel listener (``workforce.cancelling.register_cancel_listener``, from
    ``CoordinatorsConfig.ready``): when ``request`` is the run of a delegated post still
    running, the delegate reports it at once, in the cancel's transaction, so its round
    does not wait for its worker to reach a safe point; the delivery is ``cancelled``
    with the error ``cancelled: its turn failed: its run was cancelled``. A flow that
    does not set ``delegated_post_on_finished`` is settled ``cancelled`` without a
    report (its round waits for its deadline). Anything else is left alone."""
    if request.action != DELEGATED_POST_ENTRY:
        return
    delivery = (
        DelegatedPost.objects.select_related("conversation__session__organization", "post")
        .filter(turn_request=request, status=DelegatedPost.Status.RUNNING)
        .first()
    )
    if delivery is None:
        return
    error = delegate_cancelled()
    if not reports_cancellation(request.session.flow_kind):
        DelegatedPost.objects.filter(pk=delivery.pk, status=DelegatedPost.Status.RUNNING).update(
            status=DelegatedPost.Status.CANCELLED, finished_at=timezone.now(), error=error.as_error()
        )
        return
    try:
        with transaction.atomic():
            _report(delivery, delivery.claim_token, "cancelled", error=error, parent=request)
    except LeaseLost:
        pass  # its worker reported first


def do_abandon_delivery(delivery_id: int) -> bool:
    """Settle a delivery that ran out of attempts as failed (``delivery-abandoned``),
    reported, so its round does not wait on it. Returns True when it did."""
    delivery = (
        DelegatedPost.objects.select_related("conversation__session__organization", "post")
        .filter(pk=delivery_id, status=DelegatedPost.Status.RUNNING)
        .first()
    )
    if delivery is None:
        return False
    try:
        with transaction.atomic():
            _report(
                delivery,
                delivery.claim_token,
                "failed",
                error=Refusal("delivery-abandoned", f"its turn never finished in {delivery.attempts} attempts"),
            )
    except LeaseLost:
        return False
    if delivery.turn_request_id:
        do_abort_request(delivery.turn_request_id)
    return True
