"""Running a mailbox's deliveries on the task cluster (spec "Waking members": "A
delivery that fails is recorded"; see ``docs/architecture.md``, "A post end to end").

``mailboxes.tasks.deliver_post(delivery_id)`` runs ``do_deliver``: it claims the
delivery with a conditional UPDATE (``workforce.leases.claim_lease``: pending, or
running with a lapsed lease), so a redelivered task does nothing, then runs what the
member gets. A ``wake`` runs the seat's turn through its kind's ``post_turn`` facet in
the seat's conversation (a child session of the mailbox, one per seat per mailbox), one
turn of the seat there at a time, through ``seats.turns.drive_turn`` (the one path every
turn takes), and settles the delivery in the transaction that finishes the turn; a kind
without that facet gets its ``onMailboxPost`` dispatched. A delivery that fails is a failed
request on the mailbox's session; the others run; the post stays.
``do_sweep_deliveries`` re-enqueues what a crashed worker or a lossy broker dropped.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField, OuterRef, Q, Subquery, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Concat, JSONObject
from django.utils import timezone

from seats.models import Seat
from seats.queries import conversation_id
from seats.turns import (
    SlotRule,
    TurnPlan,
    TurnSpec,
    Wake,
    drive_turn,
    free_slot,
    free_slot_statement,
    free_turn_slot,
    slot_freed,
    take_slot,
)
from workforce.cancelling import CANCELLED, cancelled_refusal
from workforce.dispatch import dispatch, enqueue, external_dispatcher
from workforce.facets import NOTIFY, POST_TURN, AnswerSlot, PostTurn, Turn
from workforce.flows import registry
from workforce.holders import is_outage
from workforce.leases import LeaseLost, claim_lease, claim_statement, give_back_lease, lapsed_claim_q, requeue_lost
from workforce.leases import max_attempts as max_delivery_attempts  # claims a delivery gets
from workforce.models import Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.prepared import Prepared, update_statement
from workforce.refusals import Refusal, failure_text
from workforce.rows import concrete_field, quote
from workforce.sessions import CHILD_SEPARATOR, StartNote, do_abort_request, do_record_failed_request, ensure_child_session

from .fairness import do_release_deliveries, do_release_held_everywhere
from .models import Delivery, Line, RoomLine
from .notify import DELIVER_TASK, NotifyFanOut, seat_hears
from .rooms import post_request_of
from .routing import do_finish_fan_out

logger = logging.getLogger(__name__)

FAILED_DELIVERY_ACTION = "deliverPost"


def do_deliver(delivery_id: int) -> str:
    """Run one delivery, once (the ``deliver_post`` task's body). Never raises.

    Claims the delivery in one statement (pending, or running with a lapsed lease, and
    fewer than ``max_delivery_attempts()`` claims; ``workforce.leases.claim_lease``); a
    delivery that is done, failed or held by a live claim is left alone, so a
    redelivered task never runs a seat's turn twice. A turn left running by a crashed
    worker is marked ``aborted`` before the delivery runs again; one that was cancelled
    is not run again (the delivery fails ``cancelled``).

    A ``wake`` runs its seat's turn through ``seats.turns.drive_turn`` (kind
    ``delivery``). When the seat's kind can start in the caller's transaction (the agent
    kind's ``begin``) it is two transactions: the claim, the read of the delivery with
    what the turn needs (mailbox, organization, seat, the post's request, the seat's
    conversation), the seat's turn slot, the turn's start and its history in the first;
    the reply, the turn's end, the delivery settled and the slot freed in the second;
    the model runs between them, outside any. A ``wake`` whose seat is still running a
    turn in the same conversation hands its claim back and waits
    (``seats.turns.take_slot``): its task is enqueued again when that turn ends. Any
    other wake runs on the older path (``_deliver_wake``, kind ``delivery-other-kind``)
    after the claim commits.

    Returns:
        ``"done"``, ``"failed"``, ``"waiting"``, ``"not-claimed"`` or ``"lease-lost"``.
    """
    run = _DeliveryRun(delivery_id, timezone.now())
    try:
        outcome = drive_turn(TurnSpec("delivery", run.claim))
        if outcome != _OTHER_PATH:
            return outcome
        delivery, token = run.claimed()
        if delivery.mode == Delivery.Mode.WAKE:
            return _deliver_wake(delivery, token)
        return _deliver_block(delivery, token)
    except LeaseLost:
        logger.warning("delivery %s: the claim lapsed and another task took it over", delivery_id)
        return "lease-lost"
    except Exception as exc:  # a bug: record it on the mailbox, keep the cluster going
        if is_outage(exc):  # not a bug: the task waits for the database and runs again (deliver_post)
            raise
        logger.exception("delivery %s failed", delivery_id)
        return _record_bug(delivery_id, run.token, exc)


# What the claim answers when the delivery is claimed but runs after the claim commits
# (a block, or a wake that cannot start in the claim's transaction).
_OTHER_PATH = "other-path"


class _DeliveryRun:
    """One ``do_deliver``: its claim step (``claim``, the first step of the delivery's
    ``drive_turn``) and what it claimed."""

    def __init__(self, delivery_id: int, now: datetime) -> None:
        self.delivery_id = delivery_id
        self.now = now
        self.token: str | None = None
        self.delivery: Delivery | None = None

    def claimed(self) -> tuple[Delivery, str]:
        """The claimed delivery and its claim's token (after ``claim`` claimed it)."""
        assert self.delivery is not None and self.token is not None
        return self.delivery, self.token

    def claim(self) -> TurnPlan[Any, str] | str:
        """Inside the first transaction: claim and read the delivery; settle one whose
        turn was cancelled; abort a turn a crashed worker left running; then the wake's
        plan (``_wake_plan``), or ``_OTHER_PATH``."""
        token, delivery = _claim(self.delivery_id, self.now)
        self.token, self.delivery = token, delivery
        if token is None or delivery is None:
            return "not-claimed"
        last_turn = delivery.turn_request if delivery.turn_request_id else None  # joined by the read
        if last_turn is not None and (last_turn.error or {}).get("reason") == CANCELLED:
            # Its turn was cancelled and its worker stopped before settling: the cancel holds.
            _settle(delivery, token, error=cancelled_refusal())
            return "failed"
        if last_turn is not None and last_turn.status == Request.Status.RUNNING:
            do_abort_request(
                last_turn.pk,
                "the task running this turn stopped before it finished; the post was delivered again.",
                now=self.now,
            )
        if delivery.mode != Delivery.Mode.WAKE:
            return _OTHER_PATH
        return _wake_plan(delivery, token)


def _record_bug(delivery_id: int, token: str | None, exc: Exception) -> str:
    """Fail the delivery with ``internal-error`` (and its turn, if one is running). A bug
    in the first transaction rolled the claim back with it: the delivery is claimed
    again to record it."""
    error = Refusal("internal-error", failure_text(exc))
    delivery = Delivery.objects.select_related("mailbox").filter(pk=delivery_id).first()
    if delivery is None:
        return "failed"
    if token is None or delivery.claim_token != token or delivery.status != Delivery.Status.RUNNING:
        token = claim_lease(Delivery, delivery_id)
        if token is None:
            return "lease-lost"
    try:
        _settle(delivery, token, error=error)
    except LeaseLost:
        return "lease-lost"
    turn_id = Delivery.objects.filter(pk=delivery_id).values_list("turn_request_id", flat=True).first()
    if turn_id:
        Request.objects.filter(pk=turn_id, status=Request.Status.RUNNING).update(
            status=Request.Status.FAILED, finished_at=timezone.now(), error=error.as_error()
        )
    return "failed"


def _claimed_delivery_query(delivery_id: int | RawSQL):
    conversation = Session.objects.filter(
        organization_id=OuterRef("organization_id"),
        session_id=Concat(OuterRef("mailbox__session_id"), Value(CHILD_SEPARATOR), OuterRef("seat__seat_id")),
    ).values(
        j=JSONObject(pk="pk", kind="flow_kind", user="user_id", parent="parent_id", state="state"),
    )[:1]
    return (
        Delivery.objects.select_related("mailbox__organization", "seat", "turn_request")
        .annotate(
            known_conversation=Subquery(conversation, output_field=JSONField()),
            post_request_pk=post_request_of(),  # a mailbox line's or a room line's
        )
        .filter(pk=delivery_id)
    )


# Compiled once per process: the joins and subqueries cost more to compile than to run.
_CLAIMED_DELIVERY = Prepared(_claimed_delivery_query, sentinels=(-7_300_001,))


# What the claim changes, read back from its RETURNING: the claim-and-read statement's
# SELECT sees the delivery row as it was before the claim's UPDATE in the same statement.
_CLAIMED_FIELDS = ("status", "attempts", "claim_token", "lease_until", "started_at")


def _claim_and_read_query():
    claimed = {}
    for name in _CLAIMED_FIELDS:
        field = concrete_field(Delivery, name)
        # The model's own field, unbound, so each value is converted as the ORM converts it.
        claimed[f"claimed_{name}"] = RawSQL(f"(SELECT {quote(field.column)} FROM claimed)", [], output_field=field.clone())  # type: ignore[attr-defined]  # django-stubs lacks Field.clone
    pk = quote(Delivery._meta.pk.column)
    return _claimed_delivery_query(RawSQL(f"(SELECT {pk} FROM claimed)", [])).annotate(**claimed)


_CLAIM_AND_READ = Prepared(_claim_and_read_query, sentinels=())


def _claim(delivery_id: int, now) -> tuple[str | None, Delivery | None]:
    """Claim the delivery (``workforce.leases.claim_lease``) and read it with what its
    turn needs (``_claimed_delivery``): on PostgreSQL in one statement, the claim a CTE
    the read joins (``claimed``); elsewhere in two. ``(token, delivery)``, or ``(None,
    None)`` when it was not claimable."""
    if connection.vendor != "postgresql":
        token = claim_lease(Delivery, delivery_id, now=now)
        return token, (_claimed_delivery(delivery_id) if token is not None else None)
    for attempt in range(CLAIM_LOCKED_RETRIES + 1):
        token, sql, params = claim_statement(Delivery, delivery_id, now=now, returning=tuple(_CLAIMED_FIELDS))
        delivery = _CLAIM_AND_READ.one(prefix=(f"WITH claimed AS ({sql})", params))
        if delivery is not None:
            break
        if attempt == CLAIM_LOCKED_RETRIES or not _pending(delivery_id):
            return None, None
        time.sleep(CLAIM_LOCKED_PAUSE)  # a pending row someone holds for a moment: not ours to drop
    for name in _CLAIMED_FIELDS:
        setattr(delivery, name, getattr(delivery, f"claimed_{name}"))
    return token, delivery


# The claim skips a row another transaction holds (SKIP LOCKED), so that a redelivered task
# never queues behind the run it duplicates. A pending delivery can be held for a moment by
# a release that read it as held (mailboxes.fairness: PostgreSQL keeps the row lock of a
# FOR UPDATE whose recheck failed until that transaction ends); its task then claims again,
# at most CLAIM_LOCKED_RETRIES times CLAIM_LOCKED_PAUSE seconds, rather than end and leave
# the delivery to the sweep.
CLAIM_LOCKED_RETRIES = 40
CLAIM_LOCKED_PAUSE = 0.025


def _pending(delivery_id: int) -> bool:
    """True when the delivery is pending with claims left (so a claim that took nothing
    found it locked); a plain read, which no row lock blocks."""
    return Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING, attempts__lt=max_delivery_attempts()).exists()


def _claimed_delivery(delivery_id: int) -> Delivery:
    """The claimed delivery with all its turn needs, in one SELECT: its mailbox and the
    mailbox's organization, its seat and its last turn's request (joined), the post's
    request (``post_request_pk``) and the seat's conversation in the mailbox, if it
    exists (``known_conversation``: ``{pk, kind, user, parent, state}``). The SQL is
    built once (``workforce.prepared``).

    Raises:
        Delivery.DoesNotExist: no such delivery.
    """
    delivery = _CLAIMED_DELIVERY.one(delivery_id)
    if delivery is None:
        raise Delivery.DoesNotExist(f"no delivery {delivery_id}")
    return delivery


def _conversation_of(delivery: Delivery, seat: Seat) -> Session:
    """The seat's conversation as ``_claimed_delivery`` read it, or found or created
    (``ensure_conversation``) when it was not there or runs on another kind."""
    known = vars(delivery)["known_conversation"]  # annotated by the claim's query, not a column
    if isinstance(known, str):  # a backend that hands JSON back as text
        known = json.loads(known)
    if not known or known.get("kind") != seat.kind:
        return ensure_conversation(delivery.mailbox, seat)
    session = Session(
        pk=known["pk"],
        organization_id=delivery.mailbox.organization_id,
        session_id=conversation_id(delivery.mailbox.session_id, seat.seat_id),
        flow_kind=known["kind"],
        user_id=known["user"],
        parent_id=known["parent"],
        state=known.get("state") or {},
    )
    session._state.adding = False
    session._state.db = delivery._state.db
    return session


def _turn_settled(delivery: Delivery, token: str, slot: _SlotFreedBySettle | None = None) -> Callable[[Turn], str]:
    """How a delivery's turn settles (inside the transaction that finishes it): the
    delivery done with ``{requestId}``, or failed with the turn's error. A turn that
    failed (not cancelled) after its answer line was stored did the delivery's work:
    the delivery is done, so nothing runs it again into a second answer, and the
    turn's request stays failed with its error (``runs?status=failed``). ``slot``: the
    turn's slot, freed by the settle's statement (``_SlotFreedBySettle``)."""

    def settle(turn: Turn) -> str:
        request = turn.request
        if request is not None and (turn.error is None or (turn.error.reason != CANCELLED and answer_stored(delivery))):
            _settle(delivery, token, output={"requestId": request.request_id}, slot=slot)
            return "done"
        _settle(delivery, token, error=turn.error, slot=slot)
        return "failed"

    return settle


def answer_stored(delivery: Delivery) -> bool:
    """True when the delivery's member has an answer line to its post: the post's one
    answer line in a mailbox, or the seat's answer in a room (spec "The answer lands in
    the mailbox", "A room per project"). Only a delivery with an answer slot
    (``answer_slot``: routed, or a room's) has one."""
    if answer_slot(delivery) is None:
        return False
    if Line.objects.filter(answer_to__line_id=delivery.post_id, author=delivery.member).exists():
        return True
    return RoomLine.objects.filter(answer_to__line_id=delivery.post_id, author=delivery.member).exists()


def _abort_when_lost(turn: Turn, exc: Exception) -> None:
    """A claim that lapsed while the turn ran: its request is aborted."""
    if isinstance(exc, LeaseLost) and turn.request is not None:
        do_abort_request(turn.request.pk, "another task took this delivery over")


def _hand_back(delivery: Delivery, token: str) -> None:
    give_back_lease(Delivery, delivery.pk, token)


def _wake_plan(delivery: Delivery, token: str) -> TurnPlan[Any, str] | str:
    """Inside the claim's transaction: settle a wake that cannot run (``"failed"``), or
    the plan of a turn that starts there (the seat's kind's ``begin``): the slot taken
    in the same transaction, its claim handed back when it is taken. ``_OTHER_PATH``:
    the seat's kind has no ``begin`` (or the wake is settled by ``_deliver_wake``)."""
    seat = delivery.seat
    if seat is None or not seat_hears(seat) or external_dispatcher():
        return _OTHER_PATH  # settled, with its reason, by _deliver_wake
    post_turn = POST_TURN.get(registry.require(seat.kind))
    begin = getattr(post_turn, "begin", None)
    if begin is None:
        return _OTHER_PATH
    try:
        conversation = _conversation_of(delivery, seat)
    except Refusal as refusal:
        _settle(delivery, token, error=refusal)
        return "failed"

    # The claim is ours until this transaction ends (its row is locked by the claim). The
    # note rides the start's statement on PostgreSQL (workforce.sessions.StartNote).
    note_turn = _turn_note(delivery, token, conversation)

    def start() -> Callable[[], Turn]:
        # The turn was started by the post: its runs are listed under the post's request
        # (GET /api/sessions/{mailbox}/runs?startedBy=<request id>).
        # Passed by its key: no Request is built only to carry the id.
        parent = vars(delivery)["post_request_pk"] or None  # annotated by the claim's query, not a column
        started = begin(
            seat=seat,
            mailbox=delivery.mailbox,
            conversation=conversation,
            notify_input=delivery.notify_input,
            key=f"dlv{delivery.pk}",
            answer=answer_slot(delivery),
            on_started=note_turn,
            org=delivery.mailbox.organization,
            parent=parent,
        )
        return started.run

    # The slot's primitives are named here (the ones this module imported), so the
    # delivery's claim, slot and start stay one transaction; the settle frees the slot
    # in its own statement on PostgreSQL (_SlotFreedBySettle).
    slot = _SlotFreedBySettle(conversation, seat.seat_id)
    rule = SlotRule(
        conversation,
        seat.seat_id,
        Wake(DELIVER_TASK, (delivery.pk,)),
        on_wait=lambda: _hand_back(delivery, token),
        take=slot.take,
        free=slot.free,
        free_alone=free_turn_slot,
    )
    return TurnPlan(
        start=start, settle=_turn_settled(delivery, token, slot), slot=rule, waiting="waiting", on_error=_abort_when_lost
    )


def _settle(
    delivery: Delivery, token: str, *, output: Any = None, error: Refusal | None = None, slot: _SlotFreedBySettle | None = None
) -> None:
    """Mark the delivery done (or failed, recording the failure on the mailbox's
    session), if our claim still holds. Call inside a transaction to make it atomic with
    what the delivery wrote (no SAVEPOINT is taken: a LeaseLost rolls that transaction
    back). With ``slot`` (a turn's, held) on PostgreSQL the slot is freed in the
    settle's own statement, only when the delivery's UPDATE matched
    (``_SlotFreedBySettle``). Raises LeaseLost when the claim lapsed."""
    with transaction.atomic(savepoint=False):
        settled = update_statement(
            Delivery,
            {"claim_token": token, "id": delivery.pk, "status": Delivery.Status.RUNNING},
            status=Delivery.Status.FAILED if error else Delivery.Status.DONE,
            finished_at=timezone.now(),
            output=output,
            error=error.as_error() if error else None,
        )
        if slot is not None and slot.folds():
            updated = slot.settle_and_free(settled)
        else:
            with connection.cursor() as cursor:
                cursor.execute(*settled)
                updated = cursor.rowcount
        if not updated:
            raise LeaseLost()
        if error is not None:
            record_failed_delivery(delivery, error)
        if delivery.notify_input.get("routed"):
            do_finish_fan_out(delivery.mailbox, delivery.post_id)
        # Its place is free: the next held delivery of its organization goes (mailboxes.fairness).
        do_release_deliveries(delivery.organization_id)


class _SlotFreedBySettle:
    """A delivery turn's slot primitives (``SlotRule.take``/``free``) whose release
    rides the delivery's settle on PostgreSQL: one statement, the delivery's conditional
    UPDATE and the slot's (``seats.turns.free_slot_statement``) as two data-modifying
    CTEs, the slot freed only when the delivery's matched; then ``free``, called by
    ``drive_turn`` right after the settle in the same transaction, does the rest of
    ``free_slot`` (``seats.turns.slot_freed``: the waits) from the row that statement
    answered. Elsewhere, or when the settle did not free it, ``free`` is ``free_slot``.

    A LeaseLost from the settle rolls the transaction back, the slot's release with it,
    and ``drive_turn`` frees the slot on its own (``free_turn_slot``), as before."""

    def __init__(self, session: Session, seat_id: str) -> None:
        self.session = session
        self.seat_id = seat_id
        self.hold: str | None = None
        self.answered: tuple[tuple[int, int] | None] | None = None  # the settle's answer, once

    def take(self, session: Session, seat_id: str, **kwargs: Any) -> str | None:
        """``take_slot``, keeping the hold's token for the settle."""
        self.hold = take_slot(session, seat_id, **kwargs)
        return self.hold

    def folds(self) -> bool:
        """True when the settle frees the slot in its statement: PostgreSQL, slot held."""
        return connection.vendor == "postgresql" and self.hold is not None

    def settle_and_free(self, settled: tuple[str, list]) -> int:
        """Run the settle's UPDATE ``settled`` (``(sql, params)``, no RETURNING) and the
        slot's release, when it matched, in one statement. Returns the rows the settle
        updated."""
        assert self.hold is not None
        free_sql, free_params = free_slot_statement(
            self.session, self.seat_id, self.hold, only_if="EXISTS (SELECT 1 FROM settled)"
        )
        sql = (
            f"WITH settled AS ({settled[0]} RETURNING 1), freed AS ({free_sql}) "
            'SELECT (SELECT COUNT(*) FROM settled), freed."id", freed."waiting" FROM (SELECT 1) AS one LEFT JOIN freed ON TRUE'
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*settled[1], *free_params])
            updated, slot_pk, waiting = cursor.fetchone()
        if updated:
            self.answered = ((slot_pk, waiting) if slot_pk is not None else None,)
        return updated

    def free(self, session: Session, seat_id: str, token: str) -> bool:
        """``free_slot``, or its rest when the settle freed the slot (once)."""
        answered, self.answered = self.answered, None
        if answered is None or token != self.hold:
            return free_slot(session, seat_id, token)
        return slot_freed(session, seat_id, answered[0])


def record_failed_delivery(delivery: Delivery, error: Refusal) -> Request:
    """A failed request on the mailbox's session naming the member, the post and why
    (spec: "A delivery that fails is recorded"). The reason is the failure's own."""
    refusal = Refusal(error.reason, f"the delivery of post {delivery.post_id} to {delivery.member} failed: {error.detail}")
    logger.warning(
        "delivery failed: mailbox %s, member %s, post %s: %s",
        delivery.mailbox.session_id,
        delivery.member,
        delivery.post_id,
        error.message,
    )
    return do_record_failed_request(
        session=delivery.mailbox,
        action=FAILED_DELIVERY_ACTION,
        input={"postId": delivery.post_id, "member": delivery.member, "delivery": delivery.mode},
        user_id=delivery.mailbox.user_id,
        refusal=refusal,
    )


def _deliver_block(delivery: Delivery, token: str) -> str:
    notify = NOTIFY.get(registry.require(delivery.mailbox.flow_kind))
    if not isinstance(notify, NotifyFanOut):
        _settle(delivery, token, error=Refusal("notify-not-configured", "the mailbox kind has no notify block in this process"))
        return "failed"
    try:
        output = notify.run_block(delivery.mode, delivery.notify_input)
    except Refusal as refusal:
        _settle(delivery, token, error=refusal)
        return "failed"
    except Exception as exc:
        _settle(delivery, token, error=Refusal("notify-failed", failure_text(exc)))
        return "failed"
    _settle(delivery, token, output=_jsonable(output))
    return "done"


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def ensure_conversation(mailbox: Session, seat: Seat) -> Session:
    """The seat's conversation in ``mailbox``: one child session per seat per mailbox,
    created on its first post and reused after (spec "Each woken seat keeps one
    conversation per mailbox"). Its id is ``<mailbox id>:<seat id>``, its owner the
    mailbox's principal, its kind the seat's.

    Raises:
        Refusal("session-not-addressable"): the id is held by a session on another kind.
    """
    return ensure_child_session(
        mailbox,
        conversation_id(mailbox.session_id, seat.seat_id),
        kind=seat.kind,
        state={"seat": seat.seat_id, "mailboxId": mailbox.session_id},
    )


def _deliver_wake(delivery: Delivery, token: str) -> str:
    seat = delivery.seat
    if seat is None:
        _settle(delivery, token, error=Refusal("seat-not-found", f'the seat "{delivery.member}" is no longer hired'))
        return "failed"
    if not seat_hears(seat):
        _settle(delivery, token, error=Refusal("cannot-hear", f"the {seat.kind} kind no longer hears posts"))
        return "failed"
    if external_dispatcher():
        _settle(
            delivery,
            token,
            error=Refusal(
                "external-dispatcher", "this deployment hands dispatch to an external queue whose workers share no lease backend."
            ),
        )
        return "failed"
    try:
        with transaction.atomic():
            conversation = ensure_conversation(delivery.mailbox, seat)
    except Refusal as refusal:
        _settle(delivery, token, error=refusal)
        return "failed"
    # One turn of a seat at a time in its conversation (seats.turns): a seat still
    # answering the last post gets this one once it is done, through the task queue.
    rule = SlotRule.leased(conversation, seat.seat_id, task=DELIVER_TASK, model=Delivery, pk=delivery.pk, token=token)
    post_turn = POST_TURN.get(registry.require(seat.kind))
    if post_turn is not None:
        start = _post_turn_start(post_turn, delivery, seat, conversation, token)
    else:
        start = _dispatched_start(delivery, seat, conversation)
    plan: TurnPlan[Any, str] = TurnPlan(
        start=start,
        settle=_turn_settled(delivery, token),
        slot=rule,
        waiting="waiting",
        # A dispatched onMailboxPost's request rolls back with the settle it failed.
        on_error=_abort_when_lost if post_turn is not None else None,
    )
    return drive_turn(TurnSpec.planned("delivery-other-kind", plan))


@dataclass
class _DispatchedPost:
    """A kind of your own's turn on a post: its ``onMailboxPost`` runs as an ordinary
    dispatched action when the turn finishes, in the transaction that settles the
    delivery, so a crash re-runs it whole or not at all."""

    delivery: Delivery
    seat: Seat
    conversation: Session
    reply: str = ""
    error: Refusal | None = None
    request: Request | None = None

    def finish(self, *, output: dict | None = None) -> None:
        """Dispatch ``onMailboxPost`` and note its request on the delivery; a failed
        request is the turn's error."""
        delivery = self.delivery
        request = dispatch(
            org=delivery.organization,
            kind=self.seat.kind,
            session_id=self.conversation.session_id,
            action=ON_MAILBOX_POST,
            payload=delivery.notify_input,
            user_id=delivery.mailbox.user_id,
            parent_session=delivery.mailbox,
        )
        Delivery.objects.filter(pk=delivery.pk).update(turn_request=request, conversation=self.conversation)
        self.request = request
        if request.status != Request.Status.COMPLETED:
            error = request.error or {"reason": "internal-error", "message": "internal-error: the turn failed"}
            self.error = Refusal(error["reason"], error["message"].partition(": ")[2])


def _dispatched_start(delivery: Delivery, seat: Seat, conversation: Session) -> Callable[[], Callable[[], Turn]]:
    def start() -> Callable[[], Turn]:
        return lambda: _DispatchedPost(delivery, seat, conversation)

    return start


def answer_slot(delivery: Delivery) -> AnswerSlot | None:
    """The delivery's answer slot: for a routed post, ``{postId, token}`` (the turn's
    reply is the post's answer, handed over keyed by ``token``, ``dlv<id>``); for a room
    post, ``{postId, token}`` with the seat's recorded ``answerToken``, which the answer
    hands back (spec "A room per project"); None otherwise."""
    token = delivery.notify_input.get("answerToken")
    if token:
        return AnswerSlot(postId=delivery.post_id, token=token)
    if not delivery.notify_input.get("routed"):
        return None
    return AnswerSlot(postId=delivery.post_id, token=f"dlv{delivery.pk}")


def _turn_note(delivery: Delivery, token: str, conversation: Session) -> StartNote:
    """Record the started turn (and its conversation) on the delivery, while the claim
    ``token`` still holds it, as a turn's ``on_started`` hook that the start writes in
    its own statement on PostgreSQL (``workforce.sessions.StartNote``); LeaseLost when
    another task took the delivery over (the UPDATE matched no row)."""
    return StartNote(sql=_note_turn_sql(), params=(conversation.pk, token, delivery.pk), missed=_lease_lost)


def _lease_lost() -> None:
    raise LeaseLost()


@cache
def _note_turn_sql() -> str:
    """``_turn_note``'s UPDATE (``StartNote.sql``): ``{request}``, then the
    conversation's pk, the claim's token and the delivery's pk."""
    turn, conversation = (quote(concrete_field(Delivery, name).column) for name in ("turn_request", "conversation"))
    return (
        f"UPDATE {quote(Delivery._meta.db_table)} SET {turn} = {{request}}, {conversation} = %s "
        f"WHERE {quote('claim_token')} = %s AND {quote('id')} = %s"
    )


def _post_turn_start(
    post_turn: PostTurn, delivery: Delivery, seat: Seat, conversation: Session, token: str
) -> Callable[[], Callable[[], Turn]]:
    """The start of a seat's turn through a kind's ``post_turn`` with no ``begin``: the
    facet starts (in a transaction of its own) and runs the turn, outside any."""

    noted = _turn_note(delivery, token, conversation)

    def note_turn(request: Request) -> None:
        noted(request)
        # The turn was started by the post (a mailbox line's or a room line's): its runs
        # are listed under the post's request (GET /api/sessions/{id}/runs?startedBy=).
        Request.objects.filter(pk=request.pk).update(parent_request_id=post_request_of(delivery))

    def run() -> Turn:
        return post_turn(
            seat=seat,
            mailbox=delivery.mailbox,
            conversation=conversation,
            notify_input=delivery.notify_input,
            key=f"dlv{delivery.pk}",
            answer=answer_slot(delivery),
            on_started=note_turn,
        )

    return lambda: run


# ----------------------------------------------------------------------------- sweeping


@dataclass
class SweepResult:
    """What one sweep did: deliveries handed to the cluster again, and given up."""

    requeued: list[int] = field(default_factory=list)
    abandoned: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)  # held ones with room to run (mailboxes.fairness)

    def __bool__(self) -> bool:
        """True when the sweep did anything (the sweeper logs it then)."""
        return bool(self.requeued or self.abandoned or self.released)


def do_sweep_deliveries(*, now=None) -> SweepResult:
    """Recover deliveries the broker or a crashed worker dropped. Idempotent; safe to run
    from several processes at once (each re-enqueue is a conditional UPDATE).

    - running with a lapsed lease after ``max_delivery_attempts()`` claims: failed
      (``delivery-abandoned``) and recorded on the mailbox's session, or done when its
      answer line is stored (``answer_stored``);
    - otherwise enqueued again only when its task is known lost
      (``workforce.leases.requeue_lost``): a lapsed claim not enqueued since, at once
      (the next claim aborts the dead turn); a delivery enqueued and not yet claimed
      when the queue has passed it or holds nothing, no sooner than
      ``requeue_delay(requeues)`` after its last enqueue. A delivery still waiting in a
      backlog is left alone;
    - held deliveries with room to run are released (``mailboxes.fairness``): what a race
      between two releases, or a process that died between a settle and its release, left.
    """
    now = now or timezone.now()
    result = SweepResult()
    lapsed = Delivery.objects.filter(status=Delivery.Status.RUNNING, lease_until__lt=now)
    for delivery in lapsed.filter(attempts__gte=max_delivery_attempts()).select_related("mailbox"):
        with transaction.atomic():
            # Its answer line is stored (its turn stopped after it): done, not given up.
            answered = answer_stored(delivery)
            updated = Delivery.objects.filter(
                pk=delivery.pk, status=Delivery.Status.RUNNING, lease_until__lt=now, claim_token=delivery.claim_token
            ).update(
                status=Delivery.Status.DONE if answered else Delivery.Status.FAILED,
                finished_at=now,
                error=None
                if answered
                else Refusal("delivery-abandoned", f"given up after {delivery.attempts} attempts").as_error(),
            )
            if updated and delivery.turn_request_id:  # its turn's worker is gone: the run ended
                Request.objects.filter(pk=delivery.turn_request_id, status=Request.Status.RUNNING).update(
                    status=Request.Status.ABORTED,
                    finished_at=now,
                    error=Refusal("aborted", "the task running this turn stopped before it finished.").as_error(),
                )
            if updated and answered:
                if delivery.notify_input.get("routed"):
                    do_finish_fan_out(delivery.mailbox, delivery.post_id, now=now)
            elif updated:
                record_failed_delivery(
                    delivery, Refusal("delivery-abandoned", f"its turn never finished in {delivery.attempts} attempts")
                )
                if delivery.notify_input.get("routed"):
                    do_finish_fan_out(delivery.mailbox, delivery.post_id, now=now)
                result.abandoned.append(delivery.pk)
    lost, waiting_again = lapsed_claim_q(now)
    done = requeue_lost(
        Delivery,
        lost=lost,
        # A held delivery (enqueued_at NULL) was never enqueued: released below, not requeued.
        waiting=Q(status=Delivery.Status.PENDING, enqueued_at__isnull=False) | waiting_again,
        send=lambda pk: enqueue(DELIVER_TASK, pk),
        task=DELIVER_TASK,
        now=now,
    )
    result.requeued = done.all
    result.released = [pk for ids in do_release_held_everywhere(now=now).values() for pk in ids]
    return result
