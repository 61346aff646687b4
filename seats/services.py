"""Write side of seats: hiring, the notify fan-out, deliveries, the agent's woken turn
and the sweeper (issue 3; spec "Waking members", "Waking agent seats", "Making a kind of
your own hear posts", "A seat answering in the mailbox").

The path of a post to a woken seat:

1. ``do_post_line`` (mailboxes) calls the kind's notify facet inside the post's
   transaction. A ``NotifyFanOut`` (``wake_member_seats`` or ``notify_block``) decides per
   declared member, the poster included, records one fan-out request (``notify``) on the
   mailbox's session, writes one ``Delivery`` per member that gets something (unique per
   post and member) and enqueues one django-q2 task per delivery after the commit.
2. ``seats.tasks.deliver_post(delivery_id)`` runs ``do_deliver`` on the cluster: it
   claims the delivery with a conditional UPDATE (pending, or running with a lapsed
   lease), so a redelivered task does nothing, then runs the seat's turn in its own
   request on the seat's conversation (a child session of the mailbox, one per seat per
   mailbox) and settles the delivery in the same transaction that settles the turn.
3. A delivery that fails is a failed request on the mailbox's session; the others run;
   the post stays. ``do_sweep_deliveries`` re-enqueues what a crashed worker or a lossy
   broker dropped.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from workforce.dispatch import dispatch, dispatch_once, enqueue, external_dispatcher
from workforce.flows import registry
from workforce.leases import LeaseLost, claim_lease, lapsed_claim_q, lease_seconds, requeue_lost
from workforce.leases import max_attempts as max_delivery_attempts  # claims a delivery gets
from workforce.llm import model_problem
from workforce.models import Organization, Request, Session
from workforce.notify import ON_MAILBOX_POST, build_notify_input, recent_text, turn_text
from workforce.refusals import Refusal
from workforce.sessions import (
    ActionContext,
    do_abort_request,
    do_record_failed_request,
    do_record_request,
    emit_item,
    ensure_child_session,
)
from workforce.tools import ToolContext

from .boards import board_hire_problems
from .models import Delivery, Seat
from .queries import conversation_id, list_conversation_messages, resolve_seat
from .turn import TurnResult, offered_tools, run_turn
from .workers import WorkerManifest, read_workforce

logger = logging.getLogger(__name__)

DELIVER_TASK = "seats.tasks.deliver_post"
FAN_OUT_ACTION = "notify"
FAILED_DELIVERY_ACTION = "deliverPost"
MAILBOX_KIND = "mailbox"


# ----------------------------------------------------------------------------- hiring


class HireRefused(Exception):
    """Hiring stopped before writing anything. ``problems`` lists ``(worker id,
    sentence)`` for every worker that cannot be hired."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = [f"  {worker}: {message}" for worker, message in problems]
        super().__init__(f"refused to hire {len({w for w, _ in problems})} worker(s)\n" + "\n".join(lines))


class WorkerTreeError(Exception):
    """The tree's workers did not load or could not be hired; the message names every
    problem (``lines``)."""

    def __init__(self, root: str, lines: list[str]):
        self.root = root
        self.lines = lines
        super().__init__(f"workforce tree {root}:\nworkers: {len(lines)} problem(s)\n" + "\n".join(f"  {l}" for l in lines))


def hire_problems(workers: Iterable[WorkerManifest]) -> list[tuple[str, str]]:
    """Why each worker cannot be hired: its flow is not a registered worker kind, its
    ``tools:`` names a tool the kind does not offer, its ``model:`` is unknown, its
    ``drains:``/``boardTools:`` name boards its kind can't hold
    (``seats.boards.board_hire_problems``), its kind's ``validate_worker`` facet refuses
    it (a coordinator's keys), or its id is declared twice. Empty when all can be hired."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    workers = list(workers)
    for worker in workers:
        if worker.id in seen:
            problems.append((worker.id, f'the worker id "{worker.id}" is declared twice'))
        seen.add(worker.id)
        flow = registry.get(worker.flow)
        if flow is None or not flow.facets.get("worker"):
            what = "was not registered" if flow is None else "is not a kind a worker runs on"
            problems.append((worker.id, f'flow: names the kind "{worker.flow}", which {what}'))
        else:
            catalog = flow.facets.get("tools") or {}
            for tool in worker.tools:
                if tool not in catalog:
                    offered = ", ".join(sorted(catalog)) or "none"
                    problems.append(
                        (worker.id, f'tools: names "{tool}", which the {worker.flow} kind does not offer (it offers {offered})')
                    )
            problems.extend(board_hire_problems(worker, flow))  # drains:/boardTools: need a kind that can hold a board
            # A kind's own checks of what its workers declare (the coordinator's delegates:,
            # routing:, fallback:, rounds:): ``validate_worker(worker, workers) -> [sentence]``.
            validate = flow.facets.get("validate_worker")
            if validate is not None:
                problems.extend((worker.id, message) for message in validate(worker, workers))
        if worker.model:
            problem = model_problem(worker.model)
            if problem:
                problems.append((worker.id, f"model: {problem}"))
    return problems


def _seat_fields(worker: WorkerManifest) -> dict:
    return {
        "kind": worker.flow,
        "description": worker.description,
        "model": worker.model,
        "tools": worker.tools,
        "instructions": worker.instructions,
        "config": worker.config,
        "source": worker.path,
    }


def hire_workforce(
    workers: Iterable[WorkerManifest],
    *,
    scope: str = Seat.Scope.SHARED,
    org: Organization | None = None,
    owner_user_id: str = "",
) -> list[Seat]:
    """Make one seat per worker (the spec's ``hireWorkforce``): idempotent.

    A worker already hired in that scope keeps its row (updated when its file changed);
    a second call with the same files writes nothing. Seats are rows (admin: Seats).

    Args:
        workers: manifests from ``read_workforce``.
        scope: ``"shared"`` (every organization; the tree's workers), ``"org"`` (one
            organization's: pass ``org``) or ``"own"`` (one user's: ``org`` and
            ``owner_user_id``).

    Returns:
        The seats, in the order of ``workers``.

    Raises:
        HireRefused: any worker cannot be hired (see ``hire_problems``); nothing written.
        ValueError: ``scope`` does not match ``org``/``owner_user_id``.
    """
    workers = list(workers)
    if scope == Seat.Scope.SHARED and (org is not None or owner_user_id):
        raise ValueError("a shared seat has no organization and no owner")
    if scope == Seat.Scope.ORG and (org is None or owner_user_id):
        raise ValueError("an organization's seat needs org and no owner")
    if scope == Seat.Scope.OWN and (org is None or not owner_user_id):
        raise ValueError("a user's own seat needs org and owner_user_id")
    if scope not in Seat.Scope.values:
        raise ValueError(f"unknown scope {scope!r}")
    problems = hire_problems(workers)
    if problems:
        raise HireRefused(problems)
    for attempt in range(2):
        rows = {
            seat.seat_id: seat
            for seat in Seat.objects.filter(
                scope=scope, organization=org, owner_user_id=owner_user_id, seat_id__in=[w.id for w in workers]
            )
        }
        to_create: list[Seat] = []
        to_update: list[Seat] = []
        for worker in workers:
            fields = _seat_fields(worker)
            row = rows.get(worker.id)
            if row is None:
                row = Seat(seat_id=worker.id, scope=scope, organization=org, owner_user_id=owner_user_id, **fields)
                to_create.append(row)
                rows[worker.id] = row
            elif any(getattr(row, k) != v for k, v in fields.items()):
                for key, value in fields.items():
                    setattr(row, key, value)
                to_update.append(row)
        if not to_create and not to_update:
            break
        try:
            with transaction.atomic():
                for row in to_create:
                    row.save()
                for row in to_update:
                    row.save()
            break
        except IntegrityError:  # another process hired the same worker at the same moment
            if attempt:
                raise
    return [rows[w.id] for w in workers]


def do_hire_tree_workers(root: str | os.PathLike) -> list[Seat]:
    """Read the tree's workers and hire them as shared seats (what ``serve`` does).

    Raises:
        WorkerTreeError: a worker folder failed to load or a worker cannot be hired
            (every problem named); nothing is hired then.
        workforce.tree.WorkforceRootError: the root itself is unreadable.
    """
    workers, errors = read_workforce(root)
    lines = [f"{e.path}: [{e.kind}] {e.message}" for e in errors]
    lines.extend(f"{worker}: {message}" for worker, message in hire_problems(workers))
    if lines:
        raise WorkerTreeError(str(root), lines)
    return hire_workforce(workers)


def seats_to_wake(hired: Iterable[Seat]) -> list[Seat]:
    """``hired`` plus every seat hired in a user's or an organization's scope, which
    ``resolve_seat`` prefers to a shared one: what ``serve`` hands ``wake_member_seats``."""
    return list(hired) + list(Seat.objects.exclude(scope=Seat.Scope.SHARED).order_by("pk"))


# ----------------------------------------------------------------------------- notify


def seat_hears(seat: Seat) -> bool:
    """True when the seat's kind declares the internal action ``onMailboxPost`` (spec
    "Making a kind of your own hear posts": that declaration is all that is looked for)."""
    flow = registry.get(seat.kind)
    return flow is not None and ON_MAILBOX_POST in flow.internal_actions


def call_block(block: Callable[[dict], Any] | str, notify_input: dict) -> Any:
    """Run a notify or fallback block: a callable ``(MailboxNotifyInput) -> JSON`` or
    the dotted path of one."""
    fn = import_string(block) if isinstance(block, str) else block
    return fn(dict(notify_input))


@dataclass
class Plan:
    """What one member gets for one post: ``mode`` (``wake``/``fallback``/``call``) and,
    for ``wake``, the seat."""

    mode: str
    seat: Seat | None = None


class NotifyFanOut:
    """A mailbox kind's notify facet: called as ``notify(ctx, line)`` inside the post's
    transaction, it plans one delivery per declared member and fans them out (see the
    module docstring). Subclasses say what each member gets (``plan``) and run the
    blocks that are not a seat's turn (``run_block``)."""

    def plan(self, member: str, notify_input: dict, *, org_id: str, principal: str) -> Plan | None:
        raise NotImplementedError

    def run_block(self, mode: str, notify_input: dict) -> Any:
        raise NotImplementedError

    def __call__(self, ctx: ActionContext, line: Any) -> list[Delivery]:
        return do_fan_out(ctx, line, self)

    def deliver_routed(self, ctx: ActionContext, line: Any, member: str, recent: list[dict]) -> str:
        """Hand a routed post to its one member (called by the mailbox's route once it
        decided; nobody else is told). Returns what the member got: ``wake``,
        ``fallback``, ``call`` or ``none``. See ``do_routed_delivery``."""
        return do_routed_delivery(ctx, line, member, recent, self)


class WakeMemberSeats(NotifyFanOut):
    """What ``wake_member_seats`` returns. Per member, for each post:

    - the line is not a seat's and the member's seat hears a post: the seat runs its turn
      (``wake``);
    - the line is a seat's (``seatAuthored``): a member whose seat hears gets nothing;
    - a member whose seat cannot hear, or who has no seat in ``seats``, gets ``fallback``
      when one was given, else nothing. Never both.
    """

    def __init__(self, seats: Iterable[Seat], fallback: Callable[[dict], Any] | str | None = None):
        self.seats = list(seats)
        self.fallback = fallback

    def plan(self, member: str, notify_input: dict, *, org_id: str, principal: str) -> Plan | None:
        seat = resolve_seat(self.seats, member, org_id=org_id, user_id=principal)
        if seat is not None and seat_hears(seat):
            return None if notify_input.get("seatAuthored") else Plan(Delivery.Mode.WAKE, seat)
        return Plan(Delivery.Mode.FALLBACK) if self.fallback is not None else None

    def run_block(self, mode: str, notify_input: dict) -> Any:
        if mode != Delivery.Mode.FALLBACK or self.fallback is None:
            raise Refusal("notify-not-configured", f"this process has no {mode} block for the mailbox kind")
        return call_block(self.fallback, notify_input)


class NotifyBlock(NotifyFanOut):
    """A plain notify block: runs once per declared member per post, the poster
    included, seat's lines too (it reads ``seatAuthored`` itself)."""

    def __init__(self, block: Callable[[dict], Any] | str):
        self.block = block

    def plan(self, member: str, notify_input: dict, *, org_id: str, principal: str) -> Plan | None:
        return Plan(Delivery.Mode.CALL)

    def run_block(self, mode: str, notify_input: dict) -> Any:
        return call_block(self.block, notify_input)


def wake_member_seats(seats: Iterable[Seat], *, fallback: Callable[[dict], Any] | str | None = None) -> WakeMemberSeats:
    """The notify block that wakes the hired seats a post reaches (spec "Waking agent
    seats"). Put it in the mailbox kind's ``notify`` facet.

    Args:
        seats: the seats hired (``hire_workforce``); a seat hired later is not in the
            list until the process boots again. Where one seat id appears in several
            scopes, the mailbox principal's own wins, then its organization's, then a
            shared one.
        fallback: a block ``(MailboxNotifyInput) -> JSON`` (or its dotted path) run for
            each member whose seat cannot hear a post, on every post.
    """
    return WakeMemberSeats(seats, fallback)


def notify_block(block: Callable[[dict], Any] | str) -> NotifyBlock:
    """A notify facet that runs ``block(MailboxNotifyInput)`` once per declared member
    per post, each in its own delivery on the cluster (spec "Waking members")."""
    return NotifyBlock(block)


def configure_notify(kind: str, notify: NotifyFanOut | None) -> None:
    """Put ``notify`` in mailbox kind ``kind``'s notify facet (``None`` clears it).

    Raises:
        Refusal("flow-not-found"): no such kind.
    """
    registry.require(kind).facets["notify"] = notify


def do_fan_out(ctx: ActionContext, line: Any, fan_out: NotifyFanOut) -> list[Delivery]:
    """Plan and hand out one post's deliveries; runs inside the post's transaction.

    Records one ``notify`` request on the mailbox's session (the fan-out: each post on a
    mailbox with a notify block uses two requests of its history window), whose output
    lists ``{member, outcome}`` with outcome ``wake``, ``fallback``, ``call`` or
    ``none``. Writes one Delivery per member that gets something, in one INSERT, and
    enqueues one ``deliver_post`` task each after the commit. Under an external
    dispatcher nothing is handed out: the fan-out request is failed with
    ``external-dispatcher`` and the post stays.

    Args:
        ctx: the post's ActionContext (the mailbox session, locked).
        line: the committed-to-be line (``line_id``, ``body``, ``principal``,
            ``author``, ``seat_authored``).

    Returns:
        The deliveries written (none under an external dispatcher).
    """
    mailbox = ctx.session
    members = list((mailbox.state or {}).get("members", []))
    if external_dispatcher():
        refusal = Refusal(
            "external-dispatcher",
            f"post {line.line_id} was written, but no member was woken: this deployment hands dispatch to an "
            "external queue whose workers share no lease backend.",
        )
        do_record_request(mailbox, action=FAN_OUT_ACTION, input={"postId": line.line_id}, user_id=ctx.user_id,
                          error=refusal.as_error(), parent=ctx.request)
        return []
    now = timezone.now()
    outcomes: list[dict] = []
    deliveries: list[Delivery] = []
    for member in members:
        notify_input = build_notify_input(mailbox_id=mailbox.session_id, member=member, line=line)
        plan = fan_out.plan(member, notify_input, org_id=mailbox.organization_id, principal=mailbox.user_id)
        outcomes.append({"member": member, "outcome": plan.mode if plan else "none"})
        if plan is not None:
            deliveries.append(_delivery(mailbox, line, member, plan, notify_input, now))
    Delivery.objects.bulk_create(deliveries)
    do_record_request(
        mailbox,
        action=FAN_OUT_ACTION,
        input={"postId": line.line_id},
        user_id=ctx.user_id,
        output={"postId": line.line_id, "deliveries": outcomes},
        parent=ctx.request,
    )
    for delivery in deliveries:
        enqueue(DELIVER_TASK, delivery.pk)
    return deliveries


def do_routed_delivery(ctx: ActionContext, line: Any, member: str, recent: list[dict], fan_out: NotifyFanOut) -> str:
    """One delivery of a routed post, to the member the route chose (spec "Routing a
    mailbox": "Only that member receives the post"). Runs inside the route's
    transaction; the delivery's task is enqueued with it.

    The delivery's MailboxNotifyInput carries ``routed: true`` and ``recent`` (the
    mailbox's lines before the post, ``[{from, text}]``, at most 20). A seat of the
    built-in agent kind then answers in the mailbox; a kind of your own gets the input
    and its reply is not posted for it.

    Args:
        ctx: the route's context (the mailbox session, the route request).
        line: the client post; member: the chosen member; recent: as above.

    Returns:
        ``wake``, ``fallback``, ``call`` (what the member gets) or ``none``.
    """
    mailbox = ctx.session
    notify_input = build_notify_input(mailbox_id=mailbox.session_id, member=member, line=line, routed=True, recent=recent)
    plan = fan_out.plan(member, notify_input, org_id=mailbox.organization_id, principal=mailbox.user_id)
    if plan is None:
        return "none"
    delivery = _delivery(mailbox, line, member, plan, notify_input, timezone.now())
    delivery.save(force_insert=True)
    enqueue(DELIVER_TASK, delivery.pk)
    return plan.mode


def _delivery(mailbox: Session, line: Any, member: str, plan: Plan, notify_input: dict, now) -> Delivery:
    """One post's delivery to ``member`` as ``plan`` says, enqueued ``now`` (not saved)."""
    return Delivery(
        organization_id=mailbox.organization_id,
        mailbox=mailbox,
        post_id=line.line_id,
        member=member,
        mode=plan.mode,
        seat=plan.seat,
        notify_input=notify_input,
        enqueued_at=now,
    )


# ----------------------------------------------------------------------------- deliveries


def do_deliver(delivery_id: int) -> str:
    """Run one delivery, once (the ``deliver_post`` task's body). Never raises.

    Claims the delivery with a conditional UPDATE (pending, or running with a lapsed
    lease, and fewer than ``max_delivery_attempts()`` claims); a delivery that is done,
    failed or held by a live claim is left alone, so a redelivered task never runs a
    seat's turn twice. A turn left running by a crashed worker is marked ``aborted``
    before the delivery runs again.

    Returns:
        ``"done"``, ``"failed"``, ``"not-claimed"`` or ``"lease-lost"``.
    """
    now = timezone.now()
    token = claim_lease(Delivery, delivery_id, now=now)
    if token is None:
        return "not-claimed"
    delivery = Delivery.objects.select_related("mailbox", "seat", "turn_request").get(pk=delivery_id)
    if delivery.turn_request_id and delivery.turn_request.status == Request.Status.RUNNING:
        do_abort_request(delivery.turn_request_id,
                         "the task running this turn stopped before it finished; the post was delivered again.", now=now)
    try:
        if delivery.mode == Delivery.Mode.WAKE:
            return _deliver_wake(delivery, token)
        return _deliver_block(delivery, token)
    except LeaseLost:
        logger.warning("delivery %s: the claim lapsed and another task took it over", delivery_id)
        return "lease-lost"
    except Exception as exc:  # a bug: record it on the mailbox, keep the cluster going
        logger.exception("delivery %s failed", delivery_id)
        error = Refusal("internal-error", f"{type(exc).__name__}: {exc}")
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


def _settle(delivery: Delivery, token: str, *, output: Any = None, error: Refusal | None = None) -> None:
    """Mark the delivery done (or failed, recording the failure on the mailbox's
    session), if our claim still holds. Call inside a transaction to make it atomic with
    what the delivery wrote. Raises LeaseLost when the claim lapsed."""
    with transaction.atomic():
        updated = Delivery.objects.filter(pk=delivery.pk, claim_token=token, status=Delivery.Status.RUNNING).update(
            status=Delivery.Status.FAILED if error else Delivery.Status.DONE,
            finished_at=timezone.now(),
            output=output,
            error=error.as_error() if error else None,
        )
        if not updated:
            raise LeaseLost()
        if error is not None:
            record_failed_delivery(delivery, error)


def record_failed_delivery(delivery: Delivery, error: Refusal) -> Request:
    """A failed request on the mailbox's session naming the member, the post and why
    (spec: "A delivery that fails is recorded"). The reason is the failure's own."""
    refusal = Refusal(
        error.reason, f"the delivery of post {delivery.post_id} to {delivery.member} failed: {error.detail}"
    )
    logger.warning("delivery failed: mailbox %s, member %s, post %s: %s", delivery.mailbox.session_id,
                   delivery.member, delivery.post_id, error.message)
    return do_record_failed_request(
        session=delivery.mailbox,
        action=FAILED_DELIVERY_ACTION,
        input={"postId": delivery.post_id, "member": delivery.member, "delivery": delivery.mode},
        user_id=delivery.mailbox.user_id,
        refusal=refusal,
    )


def _deliver_block(delivery: Delivery, token: str) -> str:
    notify = registry.require(delivery.mailbox.flow_kind).facets.get("notify")
    if not isinstance(notify, NotifyFanOut):
        _settle(delivery, token, error=Refusal("notify-not-configured", "the mailbox kind has no notify block in this process"))
        return "failed"
    try:
        output = notify.run_block(delivery.mode, delivery.notify_input)
    except Refusal as refusal:
        _settle(delivery, token, error=refusal)
        return "failed"
    except Exception as exc:
        _settle(delivery, token, error=Refusal("notify-failed", f"{type(exc).__name__}: {exc}"))
        return "failed"
    _settle(delivery, token, output=_jsonable(output))
    return "done"


def _jsonable(value: Any) -> Any:
    import json

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
        mailbox, conversation_id(mailbox.session_id, seat.seat_id), kind=seat.kind,
        state={"seat": seat.seat_id, "mailboxId": mailbox.session_id},
    )


def _deliver_wake(delivery: Delivery, token: str) -> str:
    seat = delivery.seat
    if seat is None:
        _settle(delivery, token, error=Refusal("seat-not-found", f'the seat "{delivery.member}" is no longer hired'))
        return "failed"
    if not seat_hears(seat):
        _settle(delivery, token, error=Refusal("cannot-hear", f'the {seat.kind} kind no longer hears posts'))
        return "failed"
    if external_dispatcher():
        _settle(delivery, token, error=Refusal(
            "external-dispatcher", "this deployment hands dispatch to an external queue whose workers share no lease backend."))
        return "failed"
    try:
        with transaction.atomic():
            conversation = ensure_conversation(delivery.mailbox, seat)
    except Refusal as refusal:
        _settle(delivery, token, error=refusal)
        return "failed"
    runner = registry.require(seat.kind).facets.get("post_turn")
    if runner is not None:
        return runner(delivery=delivery, seat=seat, conversation=conversation, token=token)
    # A kind of your own: its onMailboxPost runs as an ordinary dispatched action, and the
    # delivery is settled in the same transaction, so a crash re-runs it whole or not at all.
    with transaction.atomic():
        request = dispatch(
            org=delivery.organization,
            kind=seat.kind,
            session_id=conversation.session_id,
            action=ON_MAILBOX_POST,
            payload=delivery.notify_input,
            user_id=delivery.mailbox.user_id,
            parent_session=delivery.mailbox,
        )
        Delivery.objects.filter(pk=delivery.pk).update(turn_request=request, conversation=conversation)
        if request.status == Request.Status.COMPLETED:
            _settle(delivery, token, output={"requestId": request.request_id})
            return "done"
        error = request.error or {"reason": "internal-error", "message": "internal-error: the turn failed"}
        _settle(delivery, token, error=Refusal(error["reason"], error["message"].partition(": ")[2]))
        return "failed"


# ----------------------------------------------------------------------------- the agent's turn


MESSAGE = "message"
TOOL_CALL = "tool-call"


def _emit(conversation: Session, component: str, data: dict, *, type: str, request: Request) -> None:
    with transaction.atomic():
        emit_item(conversation, component, data, type=type, request=request)


def agent_tools(seat: Seat) -> list:
    """What a seat of an agent kind is offered: its kind's catalog filtered by the
    seat's ``tools:``, plus what the kind's capabilities always give."""
    flow = registry.require(seat.kind)
    return offered_tools(seat, flow.facets.get("tools") or {}, flow.facets.get("capabilities") or [])


def run_agent_post_turn(*, delivery: Delivery, seat: Seat, conversation: Session, token: str) -> str:
    """The built-in agent kind's woken turn (its ``post_turn`` facet), run by
    ``do_deliver`` with the delivery claimed.

    Records the turn as an ``onMailboxPost`` request on the conversation (running,
    with the turn text as a user message item), runs the model outside any transaction,
    and settles turn and delivery together: completed with the reply as an assistant
    message item (``agentName`` the seat id), or failed with the provider's error, which
    is then also a failed request on the mailbox's session. Tool posts are dispatched
    with keys derived from the delivery, so a turn run again after a crash hands each
    post over once.

    Returns:
        ``"done"`` or ``"failed"``. Raises LeaseLost when the claim lapsed meanwhile.
    """
    notify_input = delivery.notify_input
    text = turn_text(notify_input)
    principal = delivery.mailbox.user_id
    routed = bool(notify_input.get("routed"))
    with transaction.atomic():
        request = do_record_request(conversation, action=ON_MAILBOX_POST, input=notify_input, user_id=principal, running=True)
        emit_item(
            conversation, "", {"role": "user", "text": text, "postId": delivery.post_id, "mailboxId": delivery.mailbox.session_id},
            type=MESSAGE, request=request,
        )
        if not Delivery.objects.filter(pk=delivery.pk, claim_token=token).update(turn_request=request, conversation=conversation):
            raise LeaseLost()
    tool_ctx = ToolContext(
        org=delivery.organization,
        seat_id=seat.seat_id,
        session=conversation,
        request=request,
        extras={"idempotency_prefix": f"dlv{delivery.pk}", "post_id": delivery.post_id,
                "mailbox_id": delivery.mailbox.session_id},
    )
    if routed:
        tool_ctx.extras["answer_post_id"] = delivery.post_id
    result = run_turn(
        seat=seat,
        text=text,
        history=list_conversation_messages(conversation, exclude_request_id=request.pk),
        tools=agent_tools(seat),
        tool_ctx=tool_ctx,
        on_tool_call=lambda record: _emit(conversation, TOOL_CALL, record, type="component", request=request),
        context=routed_context(notify_input) if routed else None,
    )
    if routed:
        check_routed_reply(result, tool_ctx, seat, delivery.post_id)
    try:
        with transaction.atomic():
            _finish_turn(conversation, request, seat, result)
            if routed and result.error is None and result.reply.strip():
                hand_over_answer(
                    org=delivery.organization, mailbox=delivery.mailbox, post_id=delivery.post_id, body=result.reply,
                    seat_id=seat.seat_id, parent_request=request, idempotency_key=f"dlv{delivery.pk}:answer:reply",
                )
            if result.error is None:
                _settle(delivery, token, output={"requestId": request.request_id})
            else:
                _settle(delivery, token, error=result.error)
    except LeaseLost:
        do_abort_request(request.pk, "another task took this delivery over")
        raise
    return "done" if result.error is None else "failed"


def routed_context(notify_input: dict) -> list[dict]:
    """What a routed member's model sees with the post, for that one answer (spec "What
    the member sees when it answers"): one message listing the mailbox's last lines
    before the post. Never stored in the member's conversation."""
    return [{"role": "user", "content": recent_text(notify_input.get("recent") or [], notify_input["mailboxId"])}]


def check_routed_reply(result: TurnResult, tool_ctx: ToolContext, seat: Seat, post_id: str) -> None:
    """A routed turn whose reply is empty fails (``empty-reply``), unless the
    post-to-mailbox tool already handed an answer over in that turn (spec "The answer
    lands in the mailbox"). Sets ``result.error``; posts nothing."""
    if result.error is None and not result.reply.strip() and not tool_ctx.extras.get("answer_handed"):
        result.error = Refusal(
            "empty-reply", f"{seat.seat_id} answered the routed post {post_id} with nothing; nothing was posted."
        )


def hand_over_answer(
    *, org: Organization, mailbox: Session, post_id: str, body: str, seat_id: str,
    parent_request: Request | None, idempotency_key: str | None = None,
) -> Request | None:
    """Hand a routed member's answer to its mailbox's internal ``answer`` entry, by
    dispatch (author = the seat's id). With ``idempotency_key`` a repeated hand-over
    (a redelivered task) answers the first one's request. The mailbox decides whether
    it lands (one answer line per post); a refusal is a failed request on the mailbox's
    session and the seat is not told. Returns the mailbox's request, or None when the
    dispatch itself was refused (logged)."""
    kwargs = dict(
        org=org, kind=mailbox.flow_kind, session_id=mailbox.session_id, action="answer",
        payload={"postId": post_id, "body": body, "author": seat_id}, user_id=mailbox.user_id,
        parent_request=parent_request,
    )
    try:
        if idempotency_key:
            return dispatch_once(idempotency_key=idempotency_key, **kwargs)
        return dispatch(**kwargs)
    except Refusal as refusal:
        logger.warning("the answer of %s to post %s was not handed over: %s", seat_id, post_id, refusal.message)
        return None


def _finish_turn(conversation: Session, request: Request, seat: Seat, result: TurnResult) -> None:
    """Write the turn's end onto its request (and the reply as an item)."""
    if result.error is None and result.reply:
        emit_item(conversation, "", {"role": "assistant", "text": result.reply, "agentName": seat.seat_id},
                  type=MESSAGE, request=request)
    request.finished_at = timezone.now()
    if result.error is None:
        request.status = Request.Status.COMPLETED
        request.output = {"reply": result.reply, "toolCalls": [c["name"] for c in result.tool_calls]}
    else:
        request.status = Request.Status.FAILED
        request.error = result.error.as_error()
    request.save(update_fields=["status", "output", "error", "finished_at"])


def run_agent_turn_inline(ctx: ActionContext, data: dict) -> dict:
    """The agent kind's ``onMailboxPost`` when another flow dispatches it directly (not
    through a delivery): the turn runs inside the action's request and transaction.

    Raises:
        Refusal("seat-not-found"): the session is not a seat's conversation.
        Refusal: the turn failed (``model-error``, ...); nothing it wrote stays.
    """
    session = ctx.session
    seat_id = (session.state or {}).get("seat") or session.session_id.rpartition(":")[2]
    from .queries import access_seat

    seat = access_seat(ctx.org, session.user_id, seat_id)
    text = turn_text(data)
    routed = bool(data.get("routed"))
    history = list_conversation_messages(session, exclude_request_id=ctx.request.pk)
    ctx.emit("", {"role": "user", "text": text, "postId": data["postId"], "mailboxId": data["mailboxId"]}, type=MESSAGE)
    tool_ctx = ToolContext(org=ctx.org, seat_id=seat.seat_id, session=session, request=ctx.request,
                           extras={"post_id": data["postId"], "mailbox_id": data["mailboxId"]})
    if routed:
        tool_ctx.extras["answer_post_id"] = data["postId"]
    result = run_turn(
        seat=seat, text=text, history=history, tools=agent_tools(seat), tool_ctx=tool_ctx,
        on_tool_call=lambda record: ctx.emit(TOOL_CALL, record),
        context=routed_context(data) if routed else None,
    )
    if routed:
        check_routed_reply(result, tool_ctx, seat, data["postId"])
    if result.error is not None:
        raise result.error
    if result.reply:
        ctx.emit("", {"role": "assistant", "text": result.reply, "agentName": seat.seat_id}, type=MESSAGE)
    if routed and result.reply.strip():
        mailbox = Session.objects.filter(organization=ctx.org, session_id=data["mailboxId"]).first()
        if mailbox is not None:
            hand_over_answer(org=ctx.org, mailbox=mailbox, post_id=data["postId"], body=result.reply,
                             seat_id=seat.seat_id, parent_request=ctx.request)
    return {"reply": result.reply, "toolCalls": [c["name"] for c in result.tool_calls]}


# ----------------------------------------------------------------------------- sweeping


@dataclass
class SweepResult:
    """What one sweep did: deliveries handed to the cluster again, and given up."""

    requeued: list[int] = field(default_factory=list)
    abandoned: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        """True when the sweep did anything (the sweeper logs it then)."""
        return bool(self.requeued or self.abandoned)


def do_sweep_deliveries(*, now=None) -> SweepResult:
    """Recover deliveries the broker or a crashed worker dropped. Idempotent; safe to run
    from several processes at once (each re-enqueue is a conditional UPDATE).

    - running with a lapsed lease after ``max_delivery_attempts()`` claims: failed
      (``delivery-abandoned``) and recorded on the mailbox's session;
    - otherwise enqueued again only when its task is known lost
      (``workforce.leases.requeue_lost``): a lapsed claim not enqueued since, at once
      (the next claim aborts the dead turn); a delivery enqueued and not yet claimed
      when the queue has passed it or holds nothing, no sooner than
      ``requeue_delay(requeues)`` after its last enqueue. A delivery still waiting in a
      backlog is left alone.
    """
    now = now or timezone.now()
    result = SweepResult()
    lapsed = Delivery.objects.filter(status=Delivery.Status.RUNNING, lease_until__lt=now)
    for delivery in lapsed.filter(attempts__gte=max_delivery_attempts()).select_related("mailbox"):
        with transaction.atomic():
            updated = Delivery.objects.filter(
                pk=delivery.pk, status=Delivery.Status.RUNNING, lease_until__lt=now, claim_token=delivery.claim_token
            ).update(
                status=Delivery.Status.FAILED,
                finished_at=now,
                error=Refusal("delivery-abandoned", f"given up after {delivery.attempts} attempts").as_error(),
            )
            if updated:
                record_failed_delivery(
                    delivery, Refusal("delivery-abandoned", f"its turn never finished in {delivery.attempts} attempts")
                )
                result.abandoned.append(delivery.pk)
    lost, waiting_again = lapsed_claim_q(now)
    done = requeue_lost(
        Delivery, lost=lost, waiting=Q(status=Delivery.Status.PENDING) | waiting_again,
        send=lambda pk: enqueue(DELIVER_TASK, pk), task=DELIVER_TASK, now=now,
    )
    result.requeued = done.all
    return result
