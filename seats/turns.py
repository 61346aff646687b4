"""One seat's turn and its turn log: the one way every caller wakes an agent (see
``docs/architecture.md``, "A post end to end" and "One path for every turn").

**One path** (``drive_turn``): every turn, whoever asks for it (the eight callers named
by ``TurnKind``: a mailbox delivery, a delivery to a kind of your own, ``onMailboxPost``
by dispatch, a board row, a delegated post, the coordinator's own turn, a mail run, a
chat), runs claim, slot, start, run, finish, settle in that one function; each caller
hands it a ``TurnSpec`` saying only what differs (what it claims, the slot it takes, how
its turn starts, how its answer lands and its work settles). A change that applies to
every turn is an edit there.

A turn has three parts, written in the same shape whoever runs it:

1. **start** (``start_turn``, with ``in_action`` when an action's request is already
   running): a running request on the session the turn is recorded in, and the turn's
   text as a user ``message`` item (left out when the text is already in the session,
   as a coordinator's post is);
2. **the model** (``run_turn``): the seat's instructions as the system prompt, the
   history the caller read (``seats.queries.conversation_history``), the turn text;
   each tool call a ``tool-call`` component item as it finishes. Model calls happen
   outside any database transaction, so a slow model never holds a lock (an action's
   handler, ``onMailboxPost`` by dispatch, hands its model to ``do_run_action`` to run
   after the action's transaction commits: ``workforce.sessions.AfterCommit``);
3. **finish** (``TurnResult.finish``, called by ``drive_turn`` inside the transaction
   that settles the caller's work item): the reply as an assistant ``message`` item
   (its ``postedBy`` the seat whose turn it was: docs/architecture.md "Who said what"),
   then the request completed with its output, or failed with the turn's error. A
   request that belongs to an action run (``start_turn(in_action=...)``) is settled by
   that run instead.

A turn fails, with a named reason, when the provider fails or times out
(``model-error``) or cuts its answer off at the output limit (``model-truncated``:
``ModelError.reason``), the turn passes its deadline (``turn-timeout``), the model keeps
calling tools past ``WORKFORCE_TURN_MAX_STEPS`` (``turn-step-limit``), or it answers
nothing at all (``empty-reply``); a tool call past ``WORKFORCE_TURN_MAX_TOOL_CALLS`` is
refused ``tool-call-limit`` to the model. A turn whose request was cancelled
(``workforce.cancelling``) stops at its next safe point (before a model call, between
tool calls, before it settles) with the ``cancelled`` refusal, and its request stays
``aborted``.

**One turn at a time per seat per conversation** (spec "Waking agent seats": the second
post a seat hears lands in the same conversation, so it remembers the thread).
``drive_turn`` takes the seat's ``TurnSlot`` in the session its turn is recorded in
before it starts the turn (``take_slot``, in the transaction that starts it), and frees
it in the transaction that writes the turn's end (``free_slot``); a board drain's step
is one ``drive_turn`` whose slot is taken before anything is claimed
(``TurnSpec.slot``) and held for all its rows. A caller that finds the slot
taken hands its claim back and leaves a ``TurnWait``: its task, enqueued again when the
slot is freed (a dispatch, which cannot wait, is refused ``seat-busy``). Nothing blocks
a worker and nothing is lost; a holder that died frees the slot when its hold lapses
(the ``turn slots`` sweep then wakes who waits). The slot is a row taken and freed in
short transactions under its row lock, so the rule holds across processes and
machines, and no transaction stays open while the model runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Generic, Literal, Protocol, TypeVar, cast, get_args

from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from workforce.cancelling import cancelled_refusal, is_cancelled
from workforce.dispatch import enqueue
from workforce.extras import TurnExtras
from workforce.holders import holder_alive, is_outage, new_token
from workforce.leases import give_back_lease, lease_seconds
from workforce.llm import ModelCall, ModelError, current_resolver
from workforce.models import Item, LeasedWork, Organization, Request, Session
from workforce.posted_by import PostedBy, seat_posted_by
from workforce.prepared import update_rows, update_statement
from workforce.previews import TextPreview
from workforce.refusals import Refusal, failure_text
from workforce.sessions import (
    ActionContext,
    StartNote,
    do_record_request,
    do_record_running_request_with_item,
    do_update_then_emit_item,
    emit_item,
    emit_item_reading_cancel,
)
from workforce.tools import Tool, ToolContext, ToolResult, refuse, refused
from workforce.wire import check_storable, text_problem

from .models import Seat, TurnSlot, TurnWait
from .tool_servers import LISTING_DEADLINE, refuse_unoffered

logger = logging.getLogger(__name__)

MESSAGE = "message"
SEAT_EXTRA: Final = "seat"  # ToolContext.extras: the Seat whose turn calls the tool
TOOL_CALL = "tool-call"


def model_timeout() -> float:
    """Seconds one model call may take (``WORKFORCE_MODEL_TIMEOUT``, default 60)."""
    return float(settings.WORKFORCE_MODEL_TIMEOUT)


def turn_timeout() -> float:
    """Seconds a whole turn may take (``WORKFORCE_TURN_TIMEOUT``, default 100); kept below
    the task cluster's ``timeout`` by a system check."""
    return float(settings.WORKFORCE_TURN_TIMEOUT)


def max_steps() -> int:
    """Model calls a turn may make (``WORKFORCE_TURN_MAX_STEPS``, default 8)."""
    return int(settings.WORKFORCE_TURN_MAX_STEPS)


def max_tool_calls() -> int:
    """Tool calls a turn may make (``WORKFORCE_TURN_MAX_TOOL_CALLS``, default 16); each
    call past it is refused ``tool-call-limit`` without running."""
    return int(settings.WORKFORCE_TURN_MAX_TOOL_CALLS)


def offered_tools(seat: Seat, catalog: dict[str, Tool], capabilities: Sequence[Callable[[Seat], list[Tool]]] = ()) -> list[Tool]:
    """The tools a seat's model is offered: the catalog's tools its ``tools:`` names, in
    that order, then what each capability always gives. A tool the worker does not
    name is never offered."""
    tools = [catalog[name] for name in seat.tools if name in catalog]
    for capability in capabilities:
        tools.extend(capability(seat))
    return tools


# ----------------------------------------------------------------------------- one turn at a time


@dataclass(frozen=True)
class Wake:
    """How a caller that found its seat busy is run again: the django-q2 task ``task``
    (a dotted path) with ``args`` (ids and JSON only), e.g.
    ``Wake("mailboxes.tasks.deliver_post", (42,))``."""

    task: str
    args: tuple = ()

    @property
    def key(self) -> str:
        """A digest of the task and its arguments: one wait per caller per slot."""
        return hashlib.sha256(json.dumps([self.task, list(self.args)]).encode()).hexdigest()


def slot_hold_seconds() -> float:
    """How long a turn slot is held before it lapses: a second less than a claim's lease
    (``workforce.leases.lease_seconds()``, the cluster's ``timeout`` plus a margin), and
    still past the moment the cluster kills a task. A holder that died has lost its slot
    by the time another task can claim its work again."""
    return lease_seconds() - 1


def take_turn_slot(
    session: Session,
    seat_id: str,
    *,
    wake: Wake,
    on_wait: Callable[[], object] | None = None,
    now: datetime | None = None,
) -> str | None:
    """Take seat ``seat_id``'s turn slot in ``session`` for one turn, or leave a wait,
    in one short transaction of its own (``take_slot`` inside it).

    Returns:
        The hold's token (give it to ``free_turn_slot``), or None when the slot is taken.
    """
    with transaction.atomic():
        return take_slot(session, seat_id, wake=wake, on_wait=on_wait, now=now)


def take_slot(
    session: Session,
    seat_id: str,
    *,
    wake: Wake,
    on_wait: Callable[[], object] | None = None,
    now: datetime | None = None,
) -> str | None:
    """Take seat ``seat_id``'s turn slot in ``session`` inside the caller's transaction
    (call it in one: the slot's row lock is held until it ends), or leave a wait.

    A slot that is free, or whose holder's hold lapsed (``lease_until`` passed), is taken
    for ``slot_hold_seconds()`` by one UPDATE … RETURNING, which also reads whether the
    slot has waits (``TurnSlot.waiting``); only then is ``wake``'s own wait, if any,
    dropped. A slot another turn holds (or one not made yet) is read under its row lock:
    a held one gets a ``TurnWait`` for ``wake`` (once per caller) and ``on_wait()`` runs
    in the same transaction: the caller hands its claim back there, so the task the
    holder enqueues when it frees the slot finds the work claimable. An exception
    ``on_wait`` raises (a claim already lost) propagates (the caller's transaction rolls
    the wait back).

    Returns:
        The hold's token, or None when the slot is taken.
    """
    now = now or timezone.now()
    token = new_token()  # the holder's process identity: freed at once if it dies (workforce.holders)
    row = _take_free(session.pk, seat_id, token, now)
    if row is None:
        slot = _locked_slot(session, seat_id)
        if not slot.claim_token or slot.lease_until is None or slot.lease_until < now or holder_alive(slot.claim_token) is False:
            TurnSlot.objects.filter(pk=slot.pk).update(
                claim_token=token, lease_until=now + timedelta(seconds=slot_hold_seconds()), taken_at=now
            )
            row = (slot.pk, slot.waiting)
    if row is not None:
        slot_pk, waiting = row
        if waiting > 0 and TurnWait.objects.filter(slot_id=slot_pk, key=wake.key).delete()[0]:
            TurnSlot.objects.filter(pk=slot_pk).update(waiting=Greatest(F("waiting") - 1, 0))
        return token
    if not TurnWait.objects.filter(slot=slot, key=wake.key).exists():
        TurnWait.objects.create(slot=slot, key=wake.key, task=wake.task, args=list(wake.args))
        TurnSlot.objects.filter(pk=slot.pk).update(waiting=F("waiting") + 1)
    if on_wait is not None:
        on_wait()
    logger.info("seat %s is busy in session %s: %s%s waits for its turn", seat_id, session.session_id, wake.task, wake.args)
    return None


def _take_free(session_pk: int, seat_id: str, token: str, now: datetime) -> tuple[int, int] | None:
    """One UPDATE … RETURNING: take the slot when it exists and is free or lapsed;
    ``(pk, waiting)`` of the row taken, or None (missing, or held)."""
    ops = connection.ops
    table = ops.quote_name(TurnSlot._meta.db_table)
    stamp = ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE {table} SET "claim_token" = %s, "lease_until" = %s, "taken_at" = %s '
            'WHERE "session_id" = %s AND "seat_id" = %s AND ("claim_token" = \'\' OR "lease_until" IS NULL OR "lease_until" < %s) '
            'RETURNING "id", "waiting"',
            [
                token,
                ops.adapt_datetimefield_value(now + timedelta(seconds=slot_hold_seconds())),
                stamp,
                session_pk,
                seat_id,
                stamp,
            ],
        )
        row = cursor.fetchone()
    return (row[0], row[1]) if row else None


def _locked_slot(session: Session, seat_id: str) -> TurnSlot:
    slot = TurnSlot.objects.select_for_update().filter(session=session, seat_id=seat_id).first()
    if slot is not None:
        return slot
    try:
        with transaction.atomic():
            TurnSlot.objects.create(session=session, seat_id=seat_id)
    except IntegrityError:  # another task made it at the same moment
        pass
    return TurnSlot.objects.select_for_update().get(session=session, seat_id=seat_id)


def free_turn_slot(session: Session, seat_id: str, token: str) -> bool:
    """Free the slot held with ``token`` in a transaction of its own (``free_slot``
    inside it). Returns True when this hold was freed."""
    with transaction.atomic():
        return free_slot(session, seat_id, token)


def free_slot(session: Session, seat_id: str, token: str) -> bool:
    """Free the slot held with ``token`` inside the caller's transaction (a hold that
    lapsed and was taken over is left alone) and enqueue the oldest wait's task with
    it. One UPDATE … RETURNING frees the slot and reads, from the locked row, whether
    anyone waits (``TurnSlot.waiting``: a wait written while this UPDATE waited for the
    row's lock is counted in the row it returns); only then are the waits read.
    Returns True when this hold was freed."""
    with connection.cursor() as cursor:
        cursor.execute(*free_slot_statement(session, seat_id, token))
        row = cursor.fetchone()
    return slot_freed(session, seat_id, row)


def free_slot_statement(session: Session, seat_id: str, token: str, *, only_if: str = "") -> tuple[str, list]:
    """``(sql, params)`` of ``free_slot``'s UPDATE … RETURNING ``"id", "waiting"``, for
    a caller that runs it inside a statement of its own (a CTE: a delivery's settle on
    PostgreSQL, ``mailboxes.deliveries``), then hands the row it answered (or None) to
    ``slot_freed`` in the same transaction. ``only_if``: one more SQL condition (no
    parameters) the UPDATE needs, e.g. ``EXISTS (SELECT 1 FROM settled)``."""
    table = connection.ops.quote_name(TurnSlot._meta.db_table)
    extra = f" AND {only_if}" if only_if else ""
    return (
        f'UPDATE {table} SET "claim_token" = \'\', "lease_until" = NULL '
        f'WHERE "session_id" = %s AND "seat_id" = %s AND "claim_token" = %s{extra} RETURNING "id", "waiting"',
        [session.pk, seat_id, token],
    )


def slot_freed(session: Session, seat_id: str, row: Sequence[Any] | None) -> bool:
    """The rest of ``free_slot`` once its UPDATE (``free_slot_statement``) answered
    ``row`` (``(id, waiting)``, or None when it freed nothing), inside the same
    transaction: the oldest wait enqueued when the row says anyone waits; when it freed
    nothing, the slot read under its row lock and its oldest wait woken if nobody holds
    it. Returns True when this hold was freed."""
    if row is not None:
        if row[1] > 0:
            _wake_next(TurnSlot(pk=row[0], session_id=session.pk, seat_id=seat_id))
        return True
    # Not ours any more (the hold lapsed and was taken over) or gone: wake the next
    # waiter only when nobody holds it now.
    slot = TurnSlot.objects.select_for_update().filter(session=session, seat_id=seat_id).first()
    if slot is not None and not slot.claim_token:
        _wake_next(slot)
    return False


def _wake_next(slot: TurnSlot) -> TurnWait | None:
    wait = TurnWait.objects.filter(slot_id=slot.pk).order_by("created_at", "pk").first()
    if wait is None or not TurnWait.objects.filter(pk=wait.pk).delete()[0]:
        if wait is None:  # the count ran ahead of the rows: put it right
            TurnSlot.objects.filter(pk=slot.pk).update(waiting=0)
        return None
    TurnSlot.objects.filter(pk=slot.pk).update(waiting=Greatest(F("waiting") - 1, 0))
    enqueue(wait.task, *wait.args)
    return wait


def do_sweep_turn_waits(*, now: datetime | None = None) -> list[int]:
    """Wake the callers that wait on a slot nobody holds any more: its holder died (its
    hold lapsed) or the task it enqueued was lost. Enqueues one wait per such slot (its
    oldest), each under the slot's row lock; safe from several processes at once.

    Returns:
        The ids of the waits enqueued.
    """
    now = now or timezone.now()
    idle = Q(slot__claim_token="") | Q(slot__lease_until__isnull=True) | Q(slot__lease_until__lt=now)
    woken = []
    for slot_id in TurnWait.objects.filter(idle).values_list("slot_id", flat=True).distinct().order_by("slot_id"):
        with transaction.atomic():
            slot = TurnSlot.objects.select_for_update().filter(pk=slot_id).first()
            if slot is None or (slot.claim_token and slot.lease_until is not None and slot.lease_until >= now):
                continue
            wait = _wake_next(slot)
            if wait is not None:
                woken.append(wait.pk)
    return woken


# ----------------------------------------------------------------------------- the turn log


@dataclass
class TurnLog:
    """Where one turn is recorded: ``request`` on ``session`` (in ``org``).

    ``owns_request`` is False when the request belongs to an action run (an internal
    action dispatched to the seat's kind): that run settles the request's status, and
    the log only adds the turn's items to it.
    """

    org: Organization
    session: Session
    request: Request
    owns_request: bool = True
    # The cancel flag as the last tool-call item's own statement read it (PostgreSQL):
    # the next safe point uses it instead of reading again, and forgets it.
    cancel_read: bool | None = field(default=None, repr=False, compare=False)

    def message(self, data: dict) -> Item:
        """One model message item (``{"role", "text", ...}``), in its own transaction, or
        in the caller's (no SAVEPOINT: the item is the caller's to keep or roll back)."""
        with transaction.atomic(savepoint=False):
            return emit_item(self.session, "", data, type=MESSAGE, request=self.request)

    def tool_call(self, record: dict) -> Item:
        """One ``tool-call`` component item (``{name, arguments, result}``), in its own
        transaction (or the caller's, without a SAVEPOINT). On PostgreSQL its statement
        also reads the request's cancel flag (``emit_item_reading_cancel``), kept in
        ``cancel_read`` for the turn's next safe point (``_stop_if_cancelled``), which
        comes right after with no call in between."""
        with transaction.atomic(savepoint=False):
            item, self.cancel_read = emit_item_reading_cancel(self.session, TOOL_CALL, record, request=self.request)
        return item


def start_turn(
    session: Session,
    *,
    prompt: dict | None,
    action: str = "",
    input: Mapping[str, Any] | None = None,
    user_id: str = "",
    org: Organization | None = None,
    on_started: Callable[[Request], None] | None = None,
    started_at: datetime | None = None,
    parent: Request | int | None = None,
    savepoint: bool = True,
    in_action: ActionContext | None = None,
) -> TurnLog:
    """Start a turn, the one way every caller does: a running request ``action`` on
    ``session`` and the ``prompt`` message item (``{"role": "user", "text": ...}`` plus
    the caller's keys; None when the turn's text is already in the session), in one
    transaction with ``on_started(request)`` (a caller notes the request on its work
    item there; an exception it raises rolls the start back). An ``on_started`` that is a
    ``workforce.sessions.StartNote`` is written by the start's own statement when there
    is a prompt (``do_record_running_request_with_item``: on PostgreSQL, one statement).

    Args:
        input: the request's JSON input; user_id: who the turn runs as (the session's
            owner); org: the session's organization, when the caller holds it.
        parent: the request that started the turn (``parent_request``: a post's), or
            its primary key.
        savepoint: False when the caller's own transaction is all the start needs (a
            delivery that claims and starts in one): no SAVEPOINT is taken, and an
            exception rolls the caller's transaction back.
        in_action: the action run the turn runs inside (an internal action dispatched
            to the seat's kind: ``onMailboxPost``, ``onDelegatedPost``): no request is
            recorded, the turn's is ``in_action.request`` (running, settled by that run:
            the log does not own it), and ``session``, ``org`` are the run's; ``action``,
            ``input``, ``user_id``, ``parent``, ``started_at`` are then not used.
    """
    # A turn inside an action's run keeps or loses its start with that run: no SAVEPOINT.
    with transaction.atomic(savepoint=savepoint and in_action is None):
        if in_action is not None:
            request = in_action.request
            org = in_action.org
            if prompt is not None:
                emit_item(session, "", prompt, type=MESSAGE, request=request)
        elif prompt is not None:  # the request and its prompt: one statement on PostgreSQL
            # A hook that can ride that statement does (a delivery noting its turn).
            note = on_started if isinstance(on_started, StartNote) else None
            request, _ = do_record_running_request_with_item(
                session,
                "",
                prompt,
                type=MESSAGE,
                action=action,
                input=input or {},
                user_id=user_id,
                started_at=started_at,
                parent=parent,
                note=note,
            )
            if note is not None:
                on_started = None  # written with the start
        else:
            request = do_record_request(
                session, action=action, input=input or {}, user_id=user_id, running=True, started_at=started_at, parent=parent
            )
        if on_started is not None:
            on_started(request)
    return TurnLog(org=org or session.organization, session=session, request=request, owns_request=in_action is None)


@dataclass
class TurnResult:
    """How a turn ended: ``reply`` (the model's last text), ``tool_calls`` (one record
    ``{name, arguments, result}`` per call, in order) and ``error`` (a Refusal when the
    turn failed); ``log`` is where it is recorded and ``extras`` what its tools shared
    (``ToolContext.extras``); ``posted_by`` the reply item's ``postedBy`` (``run_turn``
    sets the seat whose turn it is; None writes none).

    ``finish`` writes the turn's end; what the kind does when its turn ends (a routed
    answer handed to its mailbox) is in ``after``, run by ``finish`` in the same
    transaction.
    """

    log: TurnLog
    reply: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    error: Refusal | None = None
    extras: TurnExtras = field(default_factory=lambda: TurnExtras())
    agent_name: str = ""
    reply_data: dict[str, Any] = field(default_factory=dict)
    posted_by: PostedBy | None = None
    output: dict[str, Any] | None = None
    after: list[Callable[[TurnResult], None]] = field(default_factory=list)
    preview: TextPreview | None = None  # the answer's text while it is written (workforce.previews)

    @property
    def request(self) -> Request:
        """The turn's request."""
        return self.log.request

    def default_output(self) -> dict:
        """``{"reply", "toolCalls": [names]}`` plus what the caller set in ``output``."""
        return {**(self.output or {}), "reply": self.reply, "toolCalls": [c["name"] for c in self.tool_calls]}

    def finish(self, *, output: dict | None = None) -> None:
        """Write the turn's end (call inside the transaction that settles the caller's
        work item): the reply as an assistant message item (``agentName``,
        ``reply_data`` and ``postedBy``, the seat that ran the turn), when the turn answered; then, when the log owns its request,
        the request completed with ``output`` (default ``default_output()``) or failed
        with ``error``; then the ``after`` hooks. A turn whose request was cancelled
        meanwhile (``workforce.cancelling``) writes no reply and no status: its request
        stays ``aborted`` and ``error`` becomes the ``cancelled`` refusal, which the
        caller settles its work item with, and the hooks see."""
        log = self.log
        if log is None:  # a turn refused before it started: nothing to write
            for hook in self.after:
                hook(self)
            return
        reply = None
        if self.error is None and self.reply.strip():
            reply = {"role": "assistant", "text": self.reply, "agentName": self.agent_name, **self.reply_data}
            if self.posted_by is not None:  # in the item's own statement: no query of its own
                reply["postedBy"] = self.posted_by
        if log.owns_request:
            request = log.request
            request.finished_at = timezone.now()
            if self.error is None:
                request.status = Request.Status.COMPLETED
                request.output = self.default_output() if output is None else output
            else:
                request.status = Request.Status.FAILED
                request.error = self.error.as_error()
            if reply is not None and _settle_with_reply(self, request, reply):
                reply = None  # written with the request's end, in its statement
            elif reply is None:
                _settle_unless_cancelled(self, request)
        elif is_cancelled(log.request.pk):
            self.error = cancelled_refusal()  # the run that owns the request leaves it aborted
        if reply is not None and self.error is None:
            log.message(reply)
        for hook in self.after:
            hook(self)
        if self.preview is not None:  # a done note delivered with this commit: the line replaces the text
            self.preview.end()


# ----------------------------------------------------------------------------- one path for every turn

# Who runs a turn: the eight callers, named in the spec each hands ``drive_turn``.
TurnKind = Literal[
    "delivery",  # a mailbox delivery whose seat's kind starts in the claim's transaction (mailboxes.deliveries)
    "delivery-other-kind",  # a mailbox delivery to a kind with no ``begin`` (its post_turn, or its onMailboxPost)
    "mailbox-post",  # the agent kind's onMailboxPost by dispatch (seats.agent.on_mailbox_post)
    "board-row",  # a claimed board row (seats.drains)
    "delegated-post",  # a coordinator's delegated post (coordinators.delivery)
    "coordinator",  # the coordinator's own turn, or best fit's pick (coordinators.jobs)
    "mail",  # a mail run (mail.runs)
    "chat",  # a chat turn (mail.chat)
]
TURN_KINDS: tuple[TurnKind, ...] = get_args(TurnKind)


class Finishes(Protocol):
    """What a run hands ``drive_turn``'s finishing transaction: a turn (``workforce.facets.Turn``), or a board
    drain step's ``HeldTurns`` (its rows' turns, each finished already)."""

    def finish(self) -> None: ...


T = TypeVar("T", bound=Finishes)
R = TypeVar("R")


@dataclass(frozen=True)
class SlotRule:
    """The turn slot a turn takes: seat ``seat_id``'s in ``session``; when it is taken,
    ``on_wait()`` runs (a caller hands its claim back there, or raises to refuse) and
    ``wake`` is enqueued when it is freed. ``take``/``free``/``free_alone`` are the slot's
    primitives (``take_slot``, ``free_slot``, ``free_turn_slot`` of this module when
    None), for a caller that names its own."""

    session: Session
    seat_id: str
    wake: Wake
    on_wait: Callable[[], None] | None = None
    take: Callable[..., str | None] | None = None
    free: Callable[[Session, str, str], bool] | None = None
    free_alone: Callable[[Session, str, str], bool] | None = None

    @staticmethod
    def leased(session: Session, seat_id: str, *, task: str, model: type[LeasedWork], pk: int, token: str) -> SlotRule:
        """The rule of a caller that runs one claimed ``LeasedWork`` row (a delivery, a
        delegated post, a job, a mail or chat run): when the slot is taken the row's claim
        ``token`` is handed back untouched (``workforce.leases.give_back_lease``) and task
        ``task`` is enqueued with ``pk`` again when the slot is freed."""
        return SlotRule(session, seat_id, Wake(task, (pk,)), on_wait=lambda: _give_back(model, pk, token))


def _give_back(model: type[LeasedWork], pk: int, token: str) -> None:
    give_back_lease(model, pk, token)


@dataclass
class TurnPlan(Generic[T, R]):
    """What one caller's turn does where callers differ, once its work is claimed.

    Attributes:
        slot: the turn slot to take once the work is claimed (``SlotRule``); None when
            the spec took it before the claim (``TurnSpec.slot``), or when a turn of a
            board drain's step runs under the step's hold (``drive_held_turn``).
        start: starts the turn inside the first transaction (with the claim and the
            slot) and returns its run: a callable that runs the model outside any
            transaction and returns the ``Turn`` (``TurnResult``, or the caller's own).
        settle: lands the turn's answer and settles the caller's work item, inside the
            transaction that finishes the turn (after ``turn.finish()``); what it
            returns is ``drive_turn``'s.
        waiting: what ``drive_turn`` returns when the slot was taken.
        on_error: told when the finishing transaction raised (``LeaseLost``: the claim
            lapsed), before the exception propagates (a caller aborts the turn's request).
    """

    start: Callable[[], Callable[[], T]]
    settle: Callable[[T], R]
    slot: SlotRule | None
    waiting: R
    on_error: Callable[[T, Exception], None] | None = None


@dataclass
class TurnSpec(Generic[T, R]):
    """One caller's turn, for ``drive_turn``: ``kind`` says who runs it; ``claim``,
    called first inside the first transaction, claims the caller's work and returns the
    ``TurnPlan``, or the caller's outcome when there is no turn to run (not claimed,
    settled as failed before any turn, or not a turn of this path).

    ``later``: for a caller whose first step runs in a transaction it cannot commit
    itself (an action's handler, ``onMailboxPost`` by dispatch): ``drive_turn`` returns
    ``later(rest)`` right after the first step, ``rest`` being the run, finish and
    settle, for the caller to run once that transaction has committed
    (``workforce.sessions.AfterCommit``), so the model never runs inside it.

    ``slot``: the turn slot, when the seat and the session are known before the claim
    (a board drain's step): taken first, before ``claim()`` is called; when it is taken,
    its ``on_wait`` runs, nothing is claimed and ``waiting`` is returned. The plan then
    names no slot of its own (``TurnPlan.slot`` None)."""

    kind: TurnKind
    claim: Callable[[], TurnPlan[T, R] | R]
    later: Callable[[Callable[[], R]], R] | None = None
    slot: SlotRule | None = None
    waiting: R | None = None

    @staticmethod
    def planned(kind: TurnKind, plan: TurnPlan[T, R], *, later: Callable[[Callable[[], R]], R] | None = None) -> TurnSpec[T, R]:
        """The spec of a caller whose work is claimed already: its claim step is ``plan``."""
        return TurnSpec(kind, lambda: plan, later)


def drive_turn(spec: TurnSpec[T, R]) -> R:
    """Run one turn, whoever asks for it: the one orchestration (see
    ``docs/architecture.md``, "One path for every turn"). Every caller's turn goes through
    it; what differs is in ``spec``.

    1. **claim, slot, start**, in one transaction (the caller's when it holds one open,
       as an action does; else its own): ``spec.claim()``, then the seat's turn slot
       (``take_slot``: a taken slot runs ``on_wait`` and returns ``plan.waiting``), then
       ``plan.start()``. With ``spec.slot`` the slot comes first: a taken one returns
       ``spec.waiting`` before anything is claimed, and a claim that gives no plan frees
       it in the same transaction;
    2. **run**: the turn's model, outside that transaction (with ``spec.later``, the
       caller's: ``later(rest)`` is returned right after step 1, and ``rest`` runs steps
       2 and 3 once the caller's transaction has committed);
    3. **finish, settle**, in one transaction: ``turn.finish()`` (the reply, the request
       settled, the kind's hooks), ``plan.settle(turn)``, and the slot freed
       (``free_slot``, its oldest wait enqueued with the commit).

    A slot not freed there (the finish raised) is freed on its own (``free_turn_slot``;
    a database that fails it leaves the hold to lapse, logged), unless the caller's own
    transaction took it (its rollback or commit decides).

    Returns:
        What ``spec.claim()`` returned when it gave no plan; ``plan.waiting``; what
        ``plan.settle`` returned; or, with ``spec.later``, ``later(rest)``.

    Raises:
        What the steps raise (``LeaseLost``, a caller's Refusal), after ``plan.on_error``;
        ValueError when both the spec and its plan name a slot.
    """
    # The caller's open transaction holds the slot with the start (its rollback or
    # commit decides), unless the rest runs after that transaction committed (``later``).
    joined = connection.in_atomic_block and spec.later is None
    taken: str | None = None
    with transaction.atomic(savepoint=False):
        rule = spec.slot
        if rule is not None:
            taken = _take(rule)
            if taken is None:
                return cast(R, spec.waiting)
        plan = spec.claim()
        if not isinstance(plan, TurnPlan):
            if rule is not None and taken is not None:
                (rule.free or free_slot)(rule.session, rule.seat_id, taken)
            return plan
        if plan.slot is not None:
            if rule is not None:
                raise ValueError(f"a {spec.kind} turn names its slot twice (the spec's and the plan's)")
            rule = plan.slot
            taken = _take(rule)
            if taken is None:
                return plan.waiting
        run = plan.start()
    # Held from here: the start committed with it (or the caller's transaction holds both).
    hold = taken
    if spec.later is not None:
        return spec.later(lambda: _run_and_settle(plan, run, rule, hold, joined=False))
    return _run_and_settle(plan, run, rule, hold, joined=joined)


def _take(rule: SlotRule) -> str | None:
    return (rule.take or take_slot)(rule.session, rule.seat_id, wake=rule.wake, on_wait=rule.on_wait)


@dataclass
class HeldTurns(Generic[R]):
    """What the run of a ``drive_turn`` that holds a slot for several turns returns (a
    board drain's step: ``outcome`` is its drain report): each of those turns ran and
    finished through ``drive_held_turn``, so there is nothing left to finish."""

    outcome: R

    def finish(self) -> None:
        """Nothing: each turn under the hold finished with its own settle."""


def drive_held_turn(plan: TurnPlan[T, R]) -> R:
    """One turn run under a slot the caller's ``drive_turn`` holds for several (the
    rows of a board drain's step, inside the run of the step's ``drive_turn``):
    ``drive_turn``'s own steps for it, ``plan.start()`` in a transaction, then the run
    outside any, then ``turn.finish()`` and ``plan.settle(turn)`` in one. The plan
    names no slot (``plan.slot`` None: the step's hold covers it).

    Returns:
        What ``plan.settle`` returned.

    Raises:
        What the steps raise, after ``plan.on_error``; ValueError when the plan names a
        slot.
    """
    if plan.slot is not None:
        raise ValueError("a turn under a held slot names no slot of its own")
    with transaction.atomic(savepoint=False):
        run = plan.start()
    return _run_and_settle(plan, run, None, None, joined=False)


def _run_and_settle(plan: TurnPlan[T, R], run: Callable[[], T], rule: SlotRule | None, hold: str | None, *, joined: bool) -> R:
    """``drive_turn``'s steps 2 and 3: the run outside any transaction, then finish,
    settle and the slot freed in one; a slot not freed there is freed on its own unless
    the caller's transaction (``joined``) holds it."""
    freed = False
    try:
        turn = run()
        try:
            with transaction.atomic(savepoint=False):
                turn.finish()
                outcome = plan.settle(turn)
                if rule is not None and hold is not None:
                    (rule.free or free_slot)(rule.session, rule.seat_id, hold)
                    freed = True
        except Exception as exc:
            if plan.on_error is not None:
                plan.on_error(turn, exc)
            raise
        return outcome
    finally:
        if rule is not None and hold is not None and not freed and not joined:
            try:
                (rule.free_alone or free_turn_slot)(rule.session, rule.seat_id, hold)
            except DatabaseError:
                logger.warning(
                    "the turn slot of %s in %s was not freed; it lapses", rule.seat_id, rule.session.session_id, exc_info=True
                )


# ----------------------------------------------------------------------------- the model


def run_turn(
    seat: Seat,
    log: TurnLog,
    *,
    text: str,
    history: list[dict],
    tools: list[Tool] | Callable[[], list[Tool]],
    extras: TurnExtras | None = None,
    timeout: float | None = None,
    context: list[dict] | None = None,
    agent_name: str | None = None,
    reply_data: dict | None = None,
) -> TurnResult:
    """Run one turn of ``seat`` on ``text``, recorded in ``log``; never raises for a
    failed turn. Call it outside any transaction; the caller then calls
    ``result.finish()`` inside the transaction that settles its work item.

    Args:
        seat: the hired seat (instructions, model).
        log: where the turn is recorded (``start_turn``).
        text: the turn text (``<writer> in <mailbox>: <body>`` for a woken seat).
        history: earlier chat messages of the conversation, oldest first.
        tools: what the model is offered (see ``offered_tools``), or a function that
            lists it, called once the turn's clock runs: the tool servers it asks for
            their tools are given at most the turn's time, which their answers count
            against.
        extras: the tools' shared ``ToolContext.extras`` (the same dict, so the caller
            reads back what a tool noted in it).
        timeout: seconds the turn may take (default ``turn_timeout()``).
        context: chat messages the model sees right before the turn text, for this
            turn only (a routed member's recent lines); they are not history.
        agent_name: the reply item's ``agentName`` (default the seat's id);
            reply_data: more keys for the reply item.

    Returns:
        TurnResult; ``error`` is set (reason ``model-error``, ``model-truncated``,
        ``turn-timeout``, ``turn-step-limit``, ``empty-reply``) when the turn failed.
    """
    extras = TurnExtras() if extras is None else extras
    result = TurnResult(
        log=log,
        extras=extras,
        agent_name=seat.seat_id if agent_name is None else agent_name,
        reply_data=dict(reply_data or {}),
        # The seat the server ran (never what the model says): the reply item's postedBy.
        posted_by=seat_posted_by(seat.seat_id),
    )
    extras.setdefault(SEAT_EXTRA, seat)  # which seat calls (a person's own speaks only where it is reached)
    deadline = time.monotonic() + (turn_timeout() if timeout is None else timeout)
    tool_ctx = ToolContext(
        org=log.org, seat_id=seat.seat_id, session=log.session, request=log.request, extras=extras, deadline=deadline
    )
    if callable(tools):
        listing = LISTING_DEADLINE.set(deadline)
        try:
            tools = tools()
        finally:
            LISTING_DEADLINE.reset(listing)
    messages: list[dict] = []
    if seat.instructions:
        messages.append({"role": "system", "content": seat.instructions})
    messages.extend(history)
    messages.extend(context or ())
    messages.append({"role": "user", "content": text})
    by_name = {tool.name: tool for tool in tools}
    schemas = [tool.openai_schema() for tool in tools]
    model_id = seat.model_id(settings.WORKFORCE_MODEL)
    result.preview = preview = TextPreview(
        request=log.request,
        session=log.session,
        agent_name=result.agent_name,
        to_parent=lambda: extras.get("preview_parent", True) and not extras.get("answer_handed"),
    )
    log.cancel_read = None  # read by an earlier run's last tool call: not this run's
    try:
        model = current_resolver().resolve(model_id, block=seat.seat_id)
        for _ in range(max_steps()):
            _stop_if_cancelled(log)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Refusal("turn-timeout", f"{seat.seat_id}'s turn passed its deadline before the model answered.")
            reply = model.complete(
                ModelCall(
                    block=seat.seat_id,
                    messages=messages,
                    tools=schemas,
                    timeout=min(model_timeout(), remaining),
                    on_text=preview.writer(),
                )
            )
            if not reply.tool_calls:
                if not reply.text.strip() and not result.tool_calls:
                    raise Refusal("empty-reply", f"{model_id} answered {seat.seat_id}'s turn with nothing.")
                unkeepable = text_problem(reply.text)
                if unkeepable:  # the store cannot keep it: the model's failure, not the settle's
                    raise Refusal(
                        "model-error", f"{model_id}'s answer to {seat.seat_id}'s turn {unkeepable}; nothing was posted."
                    )
                result.reply = reply.text
                return result
            messages.append(
                {
                    "role": "assistant",
                    "content": reply.text or None,
                    "tool_calls": [c.as_message_part() for c in reply.tool_calls],
                }
            )
            for call in reply.tool_calls:
                # Also before the first: a cancel that came during the model call stops
                # the tools it asked for (the reply is never posted).
                _stop_if_cancelled(log)
                if time.monotonic() >= deadline:
                    # A turn's tool calls count against its deadline: none is made past it
                    # (each one is given at most what is left: ToolContext.seconds_left).
                    raise Refusal("turn-timeout", f"{seat.seat_id}'s turn passed its deadline during its tool calls.")
                problem = _unstorable_call(call.name, call.arguments)
                if problem is None:
                    outcome = (
                        _call_tool(by_name.get(call.name), call.name, call.arguments, tool_ctx)
                        if len(result.tool_calls) < max_tool_calls()
                        else refuse(
                            "tool-call-limit", f"a turn makes at most {max_tool_calls()} tool calls; answer with what you have."
                        )
                    )
                    record = {"name": call.name, "arguments": call.arguments, "result": outcome}
                else:  # refused, and recorded without the text the store cannot keep
                    outcome = refused(problem)
                    record = {"name": _UNSTORABLE_NAME, "arguments": None, "result": outcome}
                result.tool_calls.append(record)
                log.tool_call(record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(outcome)})
        raise Refusal("turn-step-limit", f"{seat.seat_id} kept calling tools past {max_steps()} model calls.")
    except ModelError as exc:
        result.error = Refusal(exc.reason, str(exc))
        logger.warning("model call failed: seat %s, model %s: %s", seat.seat_id, model_id, exc)
    except Refusal as refusal:
        result.error = refusal
    return result


# ----------------------------------------------------------------------------- cancelling


def _stop_if_cancelled(log: TurnLog) -> None:
    """A safe point: raise the ``cancelled`` refusal when the turn's request was
    cancelled (``workforce.cancelling``), possibly from another process. Right after a
    tool call the flag its item's statement read (``TurnLog.cancel_read``, PostgreSQL)
    is the answer: only local steps lie between that statement and this point, so a
    read here would see what it saw; it is used once."""
    known, log.cancel_read = log.cancel_read, None
    if known if known is not None else is_cancelled(log.request.pk):
        raise cancelled_refusal()


def _settle_unless_cancelled(result: TurnResult, request: Request) -> None:
    """Write the turn's end on its request unless it was cancelled first: one
    conditional UPDATE (running -> completed/failed), so a cancel and the settle decide
    once. A cancelled request stays aborted and the turn ends with ``cancelled``."""
    fields = {"status": request.status, "output": request.output, "error": request.error, "finished_at": request.finished_at}
    if not update_rows(Request, {"id": request.pk, "status": Request.Status.RUNNING}, **fields):
        request.refresh_from_db(fields=["status", "output", "error", "finished_at"])
        if request.status == Request.Status.ABORTED:
            result.error = cancelled_refusal()


def _settle_with_reply(result: TurnResult, request: Request, reply: dict) -> bool:
    """``_settle_unless_cancelled`` and the reply's message item in one statement on
    PostgreSQL (``workforce.sessions.do_update_then_emit_item``): the item is written
    only when the request was still running. Returns True when both were written; False
    when the request had ended, ``result.error`` then being the ``cancelled`` refusal
    when it was cancelled."""
    fields = {"status": request.status, "output": request.output, "error": request.error, "finished_at": request.finished_at}
    guard = update_statement(Request, {"id": request.pk, "status": Request.Status.RUNNING}, **fields)
    updated, _ = do_update_then_emit_item(guard, result.log.session, "", reply, type=MESSAGE, request=request)
    if updated:
        return True
    request.refresh_from_db(fields=["status", "output", "error", "finished_at"])
    if request.status == Request.Status.ABORTED:
        result.error = cancelled_refusal()
    return False


_UNSTORABLE_NAME = "(unstorable)"


def _unstorable_call(name: str, arguments: dict | None) -> Refusal | None:
    """The one input rule (``workforce.wire``) on a model's tool call, which is input
    too: the refusal when its name or arguments hold a NUL or a lone surrogate (or nest
    too deep), else None."""
    try:
        check_storable({"name": name, "arguments": arguments}, label="the tool call")
    except Refusal as refusal:
        return refusal
    return None


def _call_tool(tool: Tool | None, name: str, arguments: dict | None, ctx: ToolContext) -> ToolResult:
    if tool is None:  # a tool server's tool the seat was not granted: ledgered run.denied
        return refuse_unoffered(name, ctx, ctx.extras.get(SEAT_EXTRA))
    if arguments is None:
        return refuse("invalid-input", f"{name} takes a JSON object.")
    try:
        return tool.call(ctx, arguments)
    except Exception as exc:  # a tool must not take the turn down with it
        if is_outage(exc):
            # ... but a database outage must: the turn runs again once the database is
            # back (workforce.holders.outage_safe), not on as if the tool had answered.
            raise
        logger.exception("tool %s failed for %s", name, ctx.seat_id)
        return refuse("internal-error", failure_text(exc))
