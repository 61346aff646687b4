"""A mailbox's notify fan-out (spec "Waking members", "Waking agent seats", "Making a
kind of your own hear posts"): who gets each post, written as one ``Delivery`` per
member inside the post's transaction and run by ``mailboxes.deliveries`` on the task
cluster after the commit (see ``docs/architecture.md``, "A post end to end").

``do_post_line`` calls the kind's notify facet (``workforce.facets.NOTIFY``) inside the
post's transaction. A ``NotifyFanOut`` (``wake_member_seats`` or ``notify_block``)
decides per declared member, the poster included, records one fan-out request
(``notify``) on the mailbox's session, writes one ``Delivery`` per member that gets
something (unique per post and member), released in that INSERT when nothing is held
and the bounds have room, else held and released as the mailbox's and the
organization's bounds allow: one ``deliver_post`` task per released delivery, enqueued
with the commit (``mailboxes.fairness``). A routed post is handed to its one member by
``deliver_routed``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from seats.models import Seat
from seats.queries import fired_seats, reachable_seats
from workforce import rows
from workforce.dispatch import enqueue, external_dispatcher
from workforce.facets import NOTIFY
from workforce.models import Request, Session
from workforce.notify import NotifyInput, RecentEntry, build_notify_input, kind_hears_posts
from workforce.refusals import Refusal
from workforce.sessions import ActionContext, do_record_request, new_request

from .fairness import DELIVER_TASK, do_insert_deliveries, do_release_deliveries
from .models import Delivery

FAN_OUT_ACTION = "notify"


def seat_hears(seat: Seat) -> bool:
    """True when the seat's kind declares the internal action ``onMailboxPost`` (spec
    "Making a kind of your own hear posts": that declaration is all that is looked for)."""
    return kind_hears_posts(seat.kind)


def call_block(block: Callable[[dict], Any] | str, notify_input: NotifyInput) -> Any:
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

    def plan(self, member: str, notify_input: NotifyInput, *, org_id: str, principal: str) -> Plan | None:
        raise NotImplementedError

    def plan_unseated(self, member: str, notify_input: NotifyInput) -> Plan | None:
        """What ``member`` gets when it has no seat; a block that wakes no seat never
        asks."""
        return None

    def plan_without(
        self, member: str, notify_input: NotifyInput, *, org_id: str, principal: str, fired: set[int]
    ) -> Plan | None:
        """``plan`` again for a member whose seat was fired since this process started
        (``fired``: primary keys of seats that are gone); a block that wakes no seat
        never asks."""
        return self.plan_unseated(member, notify_input)

    def run_block(self, mode: str, notify_input: NotifyInput) -> Any:
        raise NotImplementedError

    def __call__(self, ctx: ActionContext, line: Any) -> list[Delivery]:
        return do_fan_out(ctx, line, self)

    def deliver_routed(
        self, ctx: ActionContext, line: Any, member: str, recent: list[RecentEntry], *, seat: Seat | None = None
    ) -> str:
        """Hand a routed post to its one member (called by the mailbox's route once it
        decided; nobody else is told). ``seat``: the member's seat as the route found it
        (it may be one hired since this process started). Returns what the member got:
        ``wake``, ``fallback``, ``call`` or ``none``. See ``do_routed_delivery``."""
        return do_routed_delivery(ctx, line, member, recent, self, seat=seat)


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

    def plan(self, member: str, notify_input: NotifyInput, *, org_id: str, principal: str) -> Plan | None:
        return self._plan_among(self.seats, member, notify_input, org_id=org_id, principal=principal)

    def plan_without(
        self, member: str, notify_input: NotifyInput, *, org_id: str, principal: str, fired: set[int]
    ) -> Plan | None:
        # Where a person's own seat was fired, the one the scope rule reaches next wakes
        # (the organization's or the standard one).
        among = [seat for seat in self.seats if seat.pk not in fired]
        return self._plan_among(among, member, notify_input, org_id=org_id, principal=principal)

    def _plan_among(
        self, among: list[Seat], member: str, notify_input: NotifyInput, *, org_id: str, principal: str
    ) -> Plan | None:
        seat = reachable_seats(org_id, principal, [member], among=among).get(member)
        if seat is not None:
            return self.plan_seat(seat, member, notify_input)
        return self.plan_unseated(member, notify_input)

    def plan_unseated(self, member: str, notify_input: NotifyInput) -> Plan | None:
        return Plan(Delivery.Mode.FALLBACK) if self.fallback is not None else None

    def plan_seat(self, seat: Seat, member: str, notify_input: NotifyInput) -> Plan | None:
        """``plan`` for a member whose seat is already known (a routed post's)."""
        if seat_hears(seat):
            return None if notify_input.get("seatAuthored") else Plan(Delivery.Mode.WAKE, seat)
        return self.plan_unseated(member, notify_input)

    def run_block(self, mode: str, notify_input: NotifyInput) -> Any:
        if mode != Delivery.Mode.FALLBACK or self.fallback is None:
            raise Refusal("notify-not-configured", f"this process has no {mode} block for the mailbox kind")
        return call_block(self.fallback, notify_input)


class NotifyBlock(NotifyFanOut):
    """A plain notify block: runs once per declared member per post, the poster
    included, seat's lines too (it reads ``seatAuthored`` itself)."""

    def __init__(self, block: Callable[[dict], Any] | str):
        self.block = block

    def plan(self, member: str, notify_input: NotifyInput, *, org_id: str, principal: str) -> Plan | None:
        return Plan(Delivery.Mode.CALL)

    def run_block(self, mode: str, notify_input: NotifyInput) -> Any:
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
    NOTIFY.set_on(kind, notify)


@dataclass
class FanOut:
    """One post's fan-out as planned and not written yet (``plan_fan_out``): the
    deliveries (unsaved, held) and the ``notify`` request (unsaved; its primary key is
    set once a statement wrote it)."""

    deliveries: list[Delivery]
    request: Request
    now: datetime


def plan_fan_out(ctx: ActionContext, line: Any, fan_out: NotifyFanOut) -> FanOut:
    """What ``do_fan_out`` writes for ``line``, planned without writing: one Delivery per
    member that gets something and the fan-out request (completed with ``{postId,
    deliveries: [{member, outcome}]}``, or under an external dispatcher failed with
    ``external-dispatcher`` and no delivery). Reads the seats it needs
    (``fired_seats``). ``do_post_line`` plans before the line's statement on PostgreSQL,
    so that statement can carry a request that no delivery's INSERT will.

    Args:
        ctx: the post's ActionContext (the mailbox session, locked).
        line: the line (``line_id``, ``body``, ``principal``, ``author``,
            ``seat_authored``; its ``seq`` is not read, so it may be unwritten).
    """
    mailbox = ctx.session
    members = list((mailbox.state or {}).get("members", []))
    if external_dispatcher():
        refusal = Refusal(
            "external-dispatcher",
            f"post {line.line_id} was written, but no member was woken: this deployment hands dispatch to an "
            "external queue whose workers share no lease backend.",
        )
        request = new_request(
            mailbox,
            action=FAN_OUT_ACTION,
            input={"postId": line.line_id},
            user_id=ctx.user_id,
            error=refusal.as_error(),
            parent=ctx.request,
        )
        return FanOut([], request, timezone.now())
    now = timezone.now()
    outcomes: list[dict] = []
    deliveries: list[Delivery] = []
    planned = []
    for member in members:
        notify_input = build_notify_input(mailbox_id=mailbox.session_id, member=member, line=line)
        planned.append(
            (member, notify_input, fan_out.plan(member, notify_input, org_id=mailbox.organization_id, principal=mailbox.user_id))
        )
    # A person's own seat this process was handed at start may have been fired since
    # (seats.services.do_fire_worker): it has no seat now.
    fired = fired_seats(plan.seat for _, _, plan in planned if plan is not None and plan.seat is not None)
    for member, notify_input, plan in planned:
        if plan is not None and plan.seat is not None and plan.seat.pk in fired:
            plan = fan_out.plan_without(
                member, notify_input, org_id=mailbox.organization_id, principal=mailbox.user_id, fired=fired
            )
        outcomes.append({"member": member, "outcome": plan.mode if plan else "none"})
        if plan is not None:
            deliveries.append(_delivery(mailbox, line.line_id, member, plan, notify_input, now))
    request = new_request(
        mailbox,
        action=FAN_OUT_ACTION,
        input={"postId": line.line_id},
        user_id=ctx.user_id,
        output={"postId": line.line_id, "deliveries": outcomes},
        parent=ctx.request,
    )
    return FanOut(deliveries, request, now)


def do_fan_out(ctx: ActionContext, line: Any, fan_out: NotifyFanOut, *, planned: FanOut | None = None) -> list[Delivery]:
    """Plan and hand out one post's deliveries; runs inside the post's transaction.

    Records one ``notify`` request on the mailbox's session (the fan-out: each post on a
    mailbox with a notify block uses two requests of its history window), whose output
    lists ``{member, outcome}`` with outcome ``wake``, ``fallback``, ``call`` or
    ``none``. Writes one Delivery per member that gets something in one INSERT, which
    releases what the bounds allow when nothing is held, else they are held and the
    release statement runs (``mailboxes.fairness.do_insert_deliveries``: oldest first,
    one ``deliver_post`` task each, enqueued with the commit); on PostgreSQL that INSERT
    also writes the request (a CTE). Under an external dispatcher nothing is handed
    out: the fan-out request is failed with ``external-dispatcher`` and the post stays.

    Args:
        ctx: the post's ActionContext (the mailbox session, locked).
        line: the committed-to-be line (``line_id``, ``body``, ``principal``,
            ``author``, ``seat_authored``).
        planned: ``plan_fan_out(ctx, line, fan_out)``'s answer when the caller planned
            already (default: planned here); a request already written (the line's
            statement carried it) is not written again.

    Returns:
        The deliveries written (none under an external dispatcher).
    """
    if planned is None:
        planned = plan_fan_out(ctx, line, fan_out)
    if planned.deliveries:
        # Their INSERT, each one released in it when nothing is held and the bounds have
        # room, else held and released as the bounds allow (mailboxes.fairness); the
        # request rides that statement on PostgreSQL.
        do_insert_deliveries(planned.deliveries, now=planned.now, request=planned.request)
    elif planned.request.pk is None:
        rows.insert(planned.request)  # a post's fan-out writes one: the INSERT without the ORM's compile
    return planned.deliveries


def do_routed_delivery(
    ctx: ActionContext, line: Any, member: str, recent: list[RecentEntry], fan_out: NotifyFanOut, *, seat: Seat | None = None
) -> str:
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
        seat: the member's seat as the route reached it; a fan-out that wakes seats
            wakes that one (it may be a seat hired since this process started, which can
            take a post as the fallback: spec "How a post finds its member").

    Returns:
        ``wake``, ``fallback``, ``call`` (what the member gets) or ``none``.
    """
    mailbox = ctx.session
    notify_input = build_notify_input(mailbox_id=mailbox.session_id, member=member, line=line, routed=True, recent=recent)
    if seat is not None and isinstance(fan_out, WakeMemberSeats):
        plan = fan_out.plan_seat(seat, member, notify_input)
    else:
        plan = fan_out.plan(member, notify_input, org_id=mailbox.organization_id, principal=mailbox.user_id)
    if plan is None:
        return "none"
    now = timezone.now()
    delivery = _delivery(mailbox, line.line_id, member, plan, notify_input, now)
    do_insert_deliveries([delivery], now=now)  # released in its INSERT, or held until its bounds allow (mailboxes.fairness)
    return plan.mode


def _delivery(mailbox: Session, post_id: str, member: str, plan: Plan, notify_input: NotifyInput, now) -> Delivery:
    """Post ``post_id``'s delivery to ``member`` as ``plan`` says, held (not saved; no task
    yet: ``mailboxes.fairness.do_insert_deliveries`` writes it, released when the bounds
    allow, or ``do_release_deliveries`` stamps ``enqueued_at`` and enqueues it). ``now``
    is unused, kept for callers that pass the post's time."""
    return Delivery(
        organization_id=mailbox.organization_id,
        mailbox=mailbox,
        post_id=post_id,
        member=member,
        mode=plan.mode,
        seat=plan.seat,
        notify_input=notify_input,
        enqueued_at=None,
    )


def do_wake_seats(
    ctx: ActionContext,
    post_id: str,
    fan_out: NotifyFanOut,
    *,
    seats: list[str],
    notify_input: Callable[[str], NotifyInput],
) -> list[Delivery]:
    """Wake each of ``seats`` once for the post ``post_id`` (a room's post; spec "A room
    per project": "A post wakes each seat once, as the person who posted"), inside the
    post's transaction: the seat the session's owner reaches, when its kind hears posts
    (``fan_out.plan``), gets one ``wake`` delivery with ``notify_input(seat)``. Records
    one ``notify`` request on ``ctx.session`` listing ``{member, outcome}``.

    Idempotent: a delivery already written for ``(post, seat)`` is kept with its input
    (its answer token), so a fan-out run again wakes each seat once; a delivery that is
    still pending is enqueued again (a redelivered task claims nothing twice).

    Returns:
        The post's pending deliveries (none under an external dispatcher: the fan-out
        request is failed with ``external-dispatcher`` and the post stays).
    """
    session = ctx.session
    if external_dispatcher():
        refusal = Refusal(
            "external-dispatcher",
            f"post {post_id} was written, but no seat was woken: this deployment hands dispatch to an "
            "external queue whose workers share no lease backend.",
        )
        do_record_request(
            session,
            action=FAN_OUT_ACTION,
            input={"postId": post_id},
            user_id=ctx.user_id,
            error=refusal.as_error(),
            parent=ctx.request,
        )
        return []
    now = timezone.now()
    outcomes: list[dict] = []
    planned: list[Delivery] = []
    for seat_id in seats:
        data = notify_input(seat_id)
        plan = fan_out.plan(seat_id, data, org_id=session.organization_id, principal=session.user_id)
        if plan is not None and plan.mode == Delivery.Mode.WAKE:
            outcomes.append({"member": seat_id, "outcome": plan.mode})
            planned.append(_delivery(session, post_id, seat_id, plan, data, now))
        else:
            outcomes.append({"member": seat_id, "outcome": "none"})
    Delivery.objects.bulk_create(planned, ignore_conflicts=True)
    do_record_request(
        session,
        action=FAN_OUT_ACTION,
        input={"postId": post_id},
        user_id=ctx.user_id,
        output={"postId": post_id, "deliveries": outcomes},
        parent=ctx.request,
    )
    pending = list(
        Delivery.objects.filter(post_id=post_id, member__in=[d.member for d in planned], status=Delivery.Status.PENDING).order_by(
            "pk"
        )
    )
    for delivery in pending:
        if delivery.enqueued_at is not None:  # released before: its task again (a redelivered one claims nothing)
            enqueue(DELIVER_TASK, delivery.pk)
    do_release_deliveries(session.organization_id, now=now)  # the held ones, as the bounds allow
    return pending
