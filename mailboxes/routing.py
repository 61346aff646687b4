"""Routing a mailbox (spec "Routing a mailbox", "How a post finds its member", "What the
route remembers", "The answer lands in the mailbox", "What routing can't do").

A mailbox kind is *built with a route* when its ``route`` facet holds a ``MailboxRoute``
(``configure_route("mailbox", route_by_purpose(seats, model=...))``, which the
composition root does at boot). Then, for every line posted on a mailbox of that kind:

1. **The ledger** (``RouteLedger``, the spec's ``mailboxRouteLedger``) is updated inside
   the post's transaction, under the mailbox's row lock, whether or not the mailbox
   declares ``routing:``: the last 20 lines, and the last client post.
2. **A client post on a mailbox that declares** ``routing:`` gets a ``Route`` row and a
   route task (``mailboxes.tasks.route_post``), enqueued with the post; nobody else is
   woken for it. A seat's line (``seatAuthored``) is never routed: it goes to the kind's
   notify block as usual, which wakes nobody for it.
3. **The route task** (``do_route_post``) decides, once: the member still on the last
   client post (``held``, no model call); else one evaluator call (block
   ``mailbox-route``, question ``member``; ``evaluated``); else the fallback
   (``fallback``, with the reason), or nobody (``failed``, with the reason). The model is
   called outside any transaction. It records the decision (one ``mailbox-route`` item
   and one ``route`` request on the mailbox's session) and hands the post to the chosen
   member only, through the notify facet's ``deliver_routed`` with ``routed: true`` and
   the recent lines. The fan-out is the ``route`` request, written running with the
   post (the poster's) and completed when the member's delivery settles; cancelled
   (``workforce.cancelling``) before the route is recorded, it wakes nobody (``failed``,
   reason ``cancelled`` when it was cancelled before the evaluator was asked); after,
   the member still answers and the request stays ``aborted``.
4. **The answer** comes back through the internal ``answer`` entry
   (``mailboxes.services.do_answer_post``): at most one answer line per post, enforced
   by a unique constraint.

The seats a route reads are the hired seats the composition root hands in; which of
them a mailbox's principal reaches is ``seats.queries.reachable_seats``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from seats.models import Seat
from seats.queries import reachable_rows, reachable_seats
from workforce import rows
from workforce.contracts import in_callers_transaction
from workforce.dispatch import enqueue, external_dispatcher
from workforce.facets import NOTIFY, ROUTE
from workforce.flows import registry
from workforce.leases import requeue_lost
from workforce.llm.evaluation import (
    Choice,
    EvaluationCall,
    EvaluationError,
    Question,
    evaluate,
)
from workforce.llm.resolver import resolve_evaluation_model
from workforce.models import Request, Session
from workforce.notify import kind_hears_posts, recent_entry
from workforce.refusals import Refusal, failure_text
from workforce.sessions import ActionContext, do_record_request, emit_item

from .lines import LedgerAppend
from .models import Line, Route, RouteLedger
from .queries import access_mailbox_state, list_window_lines
from .roster import current_roster

logger = logging.getLogger(__name__)

ROUTE_ITEM = "mailbox-route"
ROUTE_BLOCK = "mailbox-route"
ROUTE_QUESTION = "member"
ROUTE_QUESTION_TEXT = "Which member should answer this post?"
ROUTE_ACTION = "route"
ROUTE_TASK = "mailboxes.tasks.route_post"
LEDGER_LINES = 20
ROUTING_KEYS = ("fallback",)

# Why the fallback took a post, or why nobody could (a mailbox-route item's ``reason``).
NO_CHOICES = "no-choices"
EVALUATOR_FAILED = "evaluator-failed"
NO_CHOICE = "no-choice"
CHOICE_NOT_OFFERED = "choice-not-offered"
FALLBACK_UNREACHABLE = "fallback-unreachable"
FALLBACK_CANNOT_HEAR = "fallback-cannot-hear"
FALLBACK_NOT_A_MEMBER = "fallback-not-a-member"
ROUTE_NOT_CONFIGURED = "route-not-configured"
FAN_OUT_CANCELLED = "cancelled"  # the fan-out was cancelled before its route was recorded

# ----------------------------------------------------------------------------- the route


@dataclass(frozen=True)
class RouteDecision:
    """Where one client post went: ``member`` (None when nobody could take it), ``by``
    (``held``, ``evaluated``, ``fallback``, ``failed``), and for ``fallback``/``failed``
    the ``reason`` code and a ``detail`` sentence."""

    member: str | None
    by: str
    reason: str = ""
    detail: str = ""
    seat: Seat | None = None  # the member's seat as the route reached it (not recorded)

    def as_item(self, post_id: str) -> dict:
        """The ``mailbox-route`` item's data: ``{postId, member, by, reason?, detail?}``."""
        data: dict = {"postId": post_id, "member": self.member, "by": self.by}
        if self.reason:
            data["reason"] = self.reason
            data["detail"] = self.detail
        return data


class MailboxRoute:
    """A mailbox kind's route facet. Subclasses decide where a post goes (``decide``);
    this class keeps the ledger and runs the shared procedure."""

    def fallback_problem(self, member: str) -> str | None:
        """Why ``member`` cannot be a routed mailbox's fallback (checked when the roster
        is bound), or None. The base class knows no seats and accepts anyone."""
        return None

    def takes_post(self, ctx: ActionContext, line: Line) -> bool:
        """True when ``on_line`` will take ``line`` (a client line on a mailbox that
        declares ``routing:``), known before the line is written: ``do_post_line`` plans
        a fan-out the route does not take before the line's statement."""
        return not line.seat_authored and declared_routing(ctx.session.session_id) is not None

    def ledger_append(self, line: Line, *, routed: bool) -> LedgerAppend | None:
        """The ledger's append for the line's own statement (``insert_line(ledger=)``) on
        PostgreSQL, made before the line is written (``line`` unsaved); ``routed``: this
        post goes to the route (``takes_post``), which needs the ledger's lines as they
        were. None on SQLite, where ``on_line`` keeps the ledger by itself."""
        if connection.vendor != "postgresql":
            return None
        entry = ledger_entry(line)
        del entry["seq"]  # not handed out yet: the statement adds it
        return LedgerAppend(entry=entry, keep=LEDGER_LINES, client=not line.seat_authored, recent=routed)

    def on_line(self, ctx: ActionContext, line: Line, *, folded: LedgerAppend | None = None) -> bool:
        """Called by ``do_post_line`` for every line, inside the post's transaction with
        the mailbox's row lock held. Updates the ledger (unless the line's statement
        already appended to it: ``folded``, from ``ledger_append``); for a client post on
        a mailbox that declares ``routing:``, writes its Route and enqueues the route task.

        Returns:
            True when the route took the post (the notify block must not run for it).
        """
        recent, previous_id = record_line(ctx.session, line, folded=folded)
        if not self.takes_post(ctx, line):
            return False
        routing = declared_routing(ctx.session.session_id)
        assert routing is not None  # takes_post: the mailbox declares one
        if external_dispatcher():
            refusal = Refusal(
                "external-dispatcher",
                f"post {line.line_id} was written, but no member was picked or woken: this deployment hands "
                "dispatch to an external queue whose workers share no lease backend.",
            )
            _record_route_request(ctx.session, line.line_id, error=refusal.as_error(), parent=ctx.request)
            return True
        # The fan-out is a request of the poster's from now on, running until its member's
        # delivery settles, so the poster can cancel it (workforce.cancelling).
        fan_out = do_record_request(
            ctx.session,
            action=ROUTE_ACTION,
            input={"postId": line.line_id},
            user_id=ctx.user_id,
            parent=ctx.request,
            running=True,
        )
        route = Route.objects.create(
            session=ctx.session,
            post=line,
            previous_id=previous_id,
            recent=recent,
            fallback=routing["fallback"],
            request=fan_out,
            enqueued_at=timezone.now(),
        )
        enqueue(ROUTE_TASK, route.pk)
        return True

    def decide(self, route: Route) -> RouteDecision:
        """Where ``route``'s post goes. Called outside any transaction (it may call a
        model). Never raises for a model's failure: that is a decision too."""
        raise NotImplementedError


class RouteByPurpose(MailboxRoute):
    """What ``route_by_purpose`` returns: see ``decide``."""

    def __init__(self, seats: Iterable[Any] | None, model: Any):
        self.seats = list(seats) if seats is not None else None
        self.model = model
        # Seats hired after this moment are "hired while the app runs" (spec "How a post
        # finds its member"): read from the database, with no description for the route.
        self.built_at = timezone.now()

    def fallback_problem(self, member: str) -> str | None:
        """None when some hired seat called ``member`` can hear a post; a sentence
        otherwise. With no seats handed in (``seats=None``) nothing can be checked."""
        if self.seats is None:
            return None
        found = [s for s in self.seats if s.seat_id == member]
        if not found:
            return f'fallback "{member}" has no hired seat; the fallback has to be a member whose hired seat can hear a post'
        if not any(kind_hears_posts(s.kind) for s in found):
            kinds = ", ".join(sorted({s.kind for s in found}))
            return (
                f'fallback "{member}" runs on the {kinds} kind, which can\'t hear a post; the fallback has to be a '
                "member whose hired seat can hear a post"
            )
        return None

    def reached(self, session: Session, members: Iterable[str]) -> dict[str, tuple[Seat, str]]:
        """``{member: (seat, description)}``: each member's seat as the mailbox's
        principal reaches it now (``reachable_seats``), in one query.

        The seats are those the route was built with that are still hired (one of a
        person's own fired since is gone) and those hired since it was built (a person's
        own, hired while the app runs: spec "How a post finds its member"). A seat the
        route was built with keeps its description; one hired since has none for the
        route, so it is never a choice, but it can take a post as the fallback or hold
        the next. With no seats handed in (``seats=None``) every hired seat counts, with
        its description."""
        members = set(members)
        org_id, user_id = session.organization_id, session.user_id
        rows = list(reachable_rows(org_id, user_id).filter(seat_id__in=members)) if members else []
        if self.seats is None:
            return {
                m: (seat, seat.description or "") for m, seat in reachable_seats(org_id, user_id, members, among=rows).items()
            }
        hired = {row.pk for row in rows}
        known = {seat.pk for seat in self.seats}
        among = [seat for seat in self.seats if seat.pk is None or seat.pk in hired]
        later = {row.pk for row in rows if row.pk not in known and row.hired_at > self.built_at}
        among += [row for row in rows if row.pk in later]
        found = reachable_seats(org_id, user_id, members, among=among)
        return {m: (seat, "" if seat.pk in later else (getattr(seat, "description", "") or "")) for m, seat in found.items()}

    def held_member(self, route: Route) -> str | None:
        """The member still on the last client post, or None (spec step 1): the post
        before this one was routed by the evaluator or the fallback, its route is
        recorded, and no answer to it has landed."""
        previous = route.previous
        if previous is None:
            return None
        before = Route.objects.filter(post=previous).values("member", "by", "decided_at").first()
        if before is None or before["decided_at"] is None or not before["member"]:
            return None
        if before["by"] not in (Route.By.EVALUATED, Route.By.FALLBACK):
            return None
        if Line.objects.filter(answer_to=previous).exists():
            return None
        return before["member"]

    def choices(self, session: Session, reached: dict[str, tuple[Seat, str]] | None = None) -> list[Choice]:
        """The evaluator's choices (spec step 2): the members whose seat (as the
        mailbox's principal reaches it, ``reached``) can hear a post and has a
        description, each described by that description, in roster order."""
        members = access_mailbox_state(session)["members"]
        if reached is None:
            reached = self.reached(session, members)
        found = []
        for member in members:
            seat, description = reached.get(member, (None, ""))
            if seat is not None and description.strip() and kind_hears_posts(seat.kind):
                found.append(Choice(member, description.strip()))
        return found

    def decide(self, route: Route) -> RouteDecision:
        """The hold, then one evaluator call, then the fallback (spec "How a post finds
        its member"). Reasons: ``no-choices`` (no member has a description; no call),
        ``evaluator-failed`` (the call failed, including a model that can't evaluate),
        ``no-choice`` (the evaluator answered none), ``choice-not-offered`` (it answered
        something outside the choices); and when nobody could take it,
        ``fallback-unreachable`` / ``fallback-cannot-hear``."""
        session = route.session
        members = access_mailbox_state(session)["members"]
        reached = self.reached(session, [*members, route.fallback])
        held = self.held_member(route)
        if held is not None and held in reached:
            return RouteDecision(held, Route.By.HELD, seat=reached[held][0])
        choices = self.choices(session, reached)
        if not choices:
            return self.fallback(
                route,
                NO_CHOICES,
                "no member's seat can hear a post and has a description, so nothing was asked",
                reached=reached,
            )
        question = Question(ROUTE_QUESTION, ROUTE_QUESTION_TEXT, tuple(choices))
        post = recent_entry(route.post)
        recent = [recent_entry(entry) for entry in route.recent]
        call = EvaluationCall(
            block=ROUTE_BLOCK,
            question=question,
            state={"recent": recent, "post": post},
            focus=post["text"],
            context=tuple(entry["text"] for entry in recent),
            instructions=_route_instructions(session),
            timeout=route_timeout(),
        )
        try:
            verdict = evaluate(resolve_evaluation_model(self.model, block=ROUTE_BLOCK), call)
        except EvaluationError as exc:
            model = self.model if isinstance(self.model, str) else type(self.model).__name__
            logger.warning("model call failed: mailbox %s, route model %s: %s", route.session.session_id, model, exc)
            return self.fallback(route, EVALUATOR_FAILED, f"the evaluator call failed: {exc}", reached=reached)
        if verdict.choice is None:
            return self.fallback(route, NO_CHOICE, "the evaluator answered none of the members", reached=reached)
        if not question.offers(verdict.choice):
            offered = ", ".join(question.values())
            return self.fallback(
                route,
                CHOICE_NOT_OFFERED,
                f'the evaluator answered "{verdict.choice}", which is not one of {offered}',
                reached=reached,
            )
        return RouteDecision(verdict.choice, Route.By.EVALUATED, seat=reached[verdict.choice][0])

    def fallback(
        self, route: Route, reason: str, detail: str, *, reached: dict[str, tuple[Seat, str]] | None = None
    ) -> RouteDecision:
        """The fallback takes the post, or nobody can: the principal reaches no seat of
        the fallback's, or that seat can't hear a post, or the fallback is not among the
        members the mailbox was opened with (a file edited after it was opened names a
        new member as its fallback: spec "Opening it", edits to ``members:`` do not reach
        an open mailbox, so nobody is woken)."""
        member = route.fallback
        if member not in access_mailbox_state(route.session)["members"]:
            return RouteDecision(
                None,
                Route.By.FAILED,
                FALLBACK_NOT_A_MEMBER,
                f'{detail}; and the fallback "{member}" is not a member of {route.session.session_id} as it was '
                "opened (members: added to its file after it opened do not reach it), so nobody answers",
            )
        if reached is None:
            reached = self.reached(route.session, [member])
        seat = reached.get(member, (None, ""))[0]
        if seat is None:
            return RouteDecision(
                None,
                Route.By.FAILED,
                FALLBACK_UNREACHABLE,
                f'{detail}; and {route.session.user_id} can reach no seat of the fallback "{member}", so nobody answers',
            )
        if not kind_hears_posts(seat.kind):
            return RouteDecision(
                None,
                Route.By.FAILED,
                FALLBACK_CANNOT_HEAR,
                f'{detail}; and the fallback "{member}" runs on the {seat.kind} kind, which can\'t hear a post',
            )
        return RouteDecision(member, Route.By.FALLBACK, reason, detail, seat=seat)


def route_by_purpose(seats: Iterable[Any] | None, *, model: Any) -> RouteByPurpose:
    """The route that sends each client post to the one member whose job fits it (the
    spec's ``routeByPurpose(seats, { model })``).

    Args:
        seats: the hired seats (``seats.hiring.hire_workforce``; the composition root
            passes what the notify block wakes). A seat hired later is not in the list
            until the process boots again, and never a choice: it has no description.
            ``None``: seats not known here (the fallback check at bind is skipped).
        model: the evaluator: a model id the resolver knows (``embedded/lexical``,
            ``openai/<name>``; one that can't evaluate fails every call, so every post
            goes to the fallback), or an evaluation model object. One model per kind.
    """
    return RouteByPurpose(seats, model)


def configure_route(kind: str, route: MailboxRoute | None) -> None:
    """Build mailbox kind ``kind`` with ``route`` (its ``route`` facet; ``None`` removes
    it). Bind the roster after this: binding reads the facet to accept ``routing:``
    and to check each fallback against the route's seats.

    Raises:
        Refusal("flow-not-found"): no such kind.
    """
    ROUTE.set_on(kind, route)


def declared_routing(mailbox_id: str) -> dict | None:
    """The ``routing:`` the served roster bound for ``mailbox_id`` (read from the file
    at this start), or None when it declares none."""
    bound = current_roster().mailbox(mailbox_id)
    return bound.routing if bound is not None and bound.routing else None


def route_timeout() -> float:
    """Seconds the evaluator call may take (``WORKFORCE_ROUTE_TIMEOUT``, default
    ``WORKFORCE_MODEL_TIMEOUT``)."""
    return float(settings.WORKFORCE_ROUTE_TIMEOUT)


def _route_instructions(session: Session) -> str:
    state = session.state or {}
    return (
        f"You route posts in the mailbox {session.session_id} ({state.get('description', '')}). "
        "Pick the member whose job fits the post; the recent lines show what the post may refer to."
    )


# ----------------------------------------------------------------------------- the ledger


# Each routed post copies the ledger's 20 lines into its route and its delivery, so a
# line's text is kept in the ledger up to this length (the transcript keeps it whole).
LEDGER_TEXT_CHARS = 2_000


def ledger_text(body: str) -> str:
    """``body`` as the ledger keeps it: whole up to 2,000 characters, else its head and
    a note of how much was left out."""
    if len(body) <= LEDGER_TEXT_CHARS:
        return body
    return f"{body[:LEDGER_TEXT_CHARS]}… [{len(body) - LEDGER_TEXT_CHARS} more characters in the transcript]"


def ledger_entry(line: Line) -> dict:
    """A line as the ledger keeps it: ``{id, seq, from, text}`` plus ``seatAuthored:
    true`` on a seat's line; ``text`` is cut at 2,000 characters (``ledger_text``)."""
    entry = {"id": line.line_id, "seq": line.seq, "from": line.author or line.principal, "text": ledger_text(line.body)}
    if line.seat_authored:
        entry["seatAuthored"] = True
    return entry


def record_line(session: Session, line: Line, *, folded: LedgerAppend | None = None) -> tuple[list[dict], int | None]:
    """Add ``line`` to ``session``'s ledger (inside the post's transaction, the
    mailbox's row lock held): one read of the ledger row and one write, no line read
    back (the last client post is kept by its primary key). On PostgreSQL none when the
    line's own statement appended (``folded``: its ``LedgerAppend``, whose ``appended``
    is then what this returns; ``recent`` is only filled when it was asked for, the
    routed path); that statement appends only when the line follows the last one
    recorded, and the read and write here do the rest.

    When the mailbox has no ledger yet, or the line's seq does not follow the last one
    recorded (lines were posted while the kind ran without a route), the ledger starts
    from the lines still inside the history window, and the line holds nothing.

    Returns:
        ``(recent, previous_id)``: the ledger's lines before ``line`` (at most 20) and
        the primary key of the last client post before it (None after a fresh start).
    """
    if folded is not None and folded.appended is not None:
        return folded.appended
    # No fold (SQLite), or it wrote nothing (no ledger yet, or a gap): read and write here.
    ledger = rows.select_one(RouteLedger, '"session_id" = %s', [session.pk])
    fresh = ledger is None
    if ledger is None or ledger.last_seq != line.seq - 1:
        earlier = [entry for entry in list_window_lines(session) if entry.seq < line.seq]
        lines = [ledger_entry(entry) for entry in earlier[-LEDGER_LINES:]]
        previous_id = None
        ledger = ledger or RouteLedger(session=session)
    else:
        lines = list(ledger.lines)
        previous_id = ledger.last_post_id
    recent = lines[-LEDGER_LINES:]
    ledger.lines = (recent + [ledger_entry(line)])[-LEDGER_LINES:]
    ledger.last_seq = line.seq
    if not line.seat_authored:
        ledger.last_post_id = line.pk
    if not fresh:
        rows.update(ledger, ("lines", "last_seq", "last_post_id", "updated_at"))
    else:
        ledger.save(force_insert=fresh)
    return recent, previous_id


def read_route_ledger(session: Session) -> dict | None:
    """The mailbox's ``mailboxRouteLedger``: ``{"lines": [...], "lastPost": {"id",
    "member", "by"} | None}``, or None when it keeps none (a kind without a route)."""
    ledger = RouteLedger.objects.filter(session=session).select_related("last_post").first()
    if ledger is None:
        return None
    last = None
    if ledger.last_post is not None:
        route = Route.objects.filter(post=ledger.last_post).values("member", "by").first()
        last = {
            "id": ledger.last_post.line_id,
            "member": route["member"] if route else None,
            "by": (route["by"] or None) if route else None,
        }
    return {"lines": list(ledger.lines), "lastPost": last}


# ----------------------------------------------------------------------------- deciding


def do_route_post(route_id: int) -> str:
    """Decide route ``route_id`` once and hand its post to the chosen member (the route
    task's body). Never raises.

    The decision is made outside any transaction (the evaluator may be slow), then
    recorded with a conditional UPDATE: a redelivered task, or two at once, record it
    once, so each client post leaves exactly one ``mailbox-route`` item and one
    ``route`` request on the mailbox's session. The chosen member (only it) is then
    handed the post through the kind's notify facet (``deliver_routed``), in the same
    transaction.

    Returns:
        ``"held"``, ``"evaluated"``, ``"fallback"``, ``"failed"`` or ``"not-claimed"``.
    """
    route = Route.objects.select_related("session", "post", "previous", "request").filter(pk=route_id).first()
    if route is None or route.decided_at is not None:
        return "not-claimed"
    started = timezone.now()
    flow = registry.get(route.session.flow_kind)
    router = ROUTE.get(flow)
    if route.request is not None and route.request.status == Request.Status.ABORTED:
        # A safe point: a fan-out cancelled before it was decided asks no evaluator.
        decision = RouteDecision(None, Route.By.FAILED, FAN_OUT_CANCELLED, "the fan-out was cancelled before a member was picked")
    elif not isinstance(router, MailboxRoute):
        decision = RouteDecision(
            None, Route.By.FAILED, ROUTE_NOT_CONFIGURED, "this process runs the mailbox kind without a route"
        )
    else:
        try:
            decision = router.decide(route)
        except Exception as exc:  # a bug must not lose the post: nobody takes it, and it says why
            logger.exception("routing post %s failed", route.post.line_id)
            decision = RouteDecision(None, Route.By.FAILED, "internal-error", failure_text(exc))
    return _record_decision(route, decision, started, flow)


def _record_decision(route: Route, decision: RouteDecision, started, flow) -> str:
    session = route.session
    with transaction.atomic():
        now = timezone.now()
        claimed = Route.objects.filter(pk=route.pk, decided_at__isnull=True).update(
            member=decision.member, by=decision.by, reason=decision.reason, detail=decision.detail, decided_at=now
        )
        if not claimed:
            return "not-claimed"
        output = decision.as_item(route.post.line_id)
        if route.request_id is None:  # a route written before fan-outs were requests of their own
            request = _record_route_request(session, route.post.line_id, output=output, started=started)
        else:
            # Locked: a cancel either committed before (nobody is woken, the fallback
            # included) or waits for this commit (the member is woken and answers, and
            # the fan-out ends aborted). Spec "What routing can't do".
            request = Request.objects.select_for_update().get(pk=route.request_id)
        cancelled = request.status == Request.Status.ABORTED
        emit_item(session, ROUTE_ITEM, output, request=request)
        delivered = "none"
        notify = NOTIFY.get(flow)
        if not cancelled and decision.member and notify is not None and hasattr(notify, "deliver_routed"):
            ctx = ActionContext(org=session.organization, session=session, request=request, user_id=session.user_id, flow=flow)
            recent = [recent_entry(entry) for entry in route.recent]
            delivered = notify.deliver_routed(ctx, route.post, decision.member, recent, seat=decision.seat) or "none"
        fields: dict[str, Any] = {"output": {**output, "delivery": delivered}}
        if delivered == "none" and request.status == Request.Status.RUNNING:
            fields.update(status=Request.Status.COMPLETED, finished_at=timezone.now())  # nobody to wait for
        Request.objects.filter(pk=request.pk).update(**fields)
        Route.objects.filter(pk=route.pk).update(request=request, delivery=delivered)
    return decision.by


@in_callers_transaction
def do_finish_fan_out(mailbox: Session, post_id: str, *, now=None) -> bool:
    """Complete the fan-out request of routed post ``post_id`` on ``mailbox`` once its
    member's delivery settled (done or failed); a cancelled one stays aborted. Call
    inside the transaction that settles the delivery. Returns True when it completed it."""
    request_ids = Route.objects.filter(session=mailbox, post__line_id=post_id).values("request_id")
    return bool(
        Request.objects.filter(pk__in=request_ids, status=Request.Status.RUNNING).update(
            status=Request.Status.COMPLETED, finished_at=now or timezone.now()
        )
    )


def _record_route_request(session: Session, post_id: str, *, output=None, error=None, started=None, parent=None) -> Request:
    return do_record_request(
        session,
        action=ROUTE_ACTION,
        input={"postId": post_id},
        user_id=session.user_id,
        output=output,
        error=error,
        parent=parent,
        started_at=started,
    )


def do_sweep_routes(*, now=None) -> list[int]:
    """Enqueue again every undecided route whose task is known lost
    (``workforce.leases.requeue_lost``: the queue has passed it, or holds nothing, and
    ``requeue_delay(requeues)`` has passed since its last enqueue); a route still waiting
    in a backlog is left alone. Idempotent: each re-enqueue is a conditional UPDATE.
    Returns the route ids enqueued."""
    return requeue_lost(
        Route,
        waiting=Q(decided_at__isnull=True),
        send=lambda pk: enqueue(ROUTE_TASK, pk),
        task=ROUTE_TASK,
        now=now,
    ).all
