"""Write side of coordinators (spec 004): opening conversations, their delegates, posts,
delegates' reports and round deadlines.

- ``do_ensure_worker_session``: a session with a worker (the spec's
  ``ensureWorkerSession``); a session whose state carries ``delegates`` or ``fallback``
  is refused (400).
- conversations and their delegates: ``coordinators.delegates``;
- ``do_post``: the ``run`` action: the post lands, then round robin and everyone
  deliver at once, best fit holds or queues its evaluator call, judgment queues the
  coordinator's own turn.
- ``do_report``: the internal ``onDelegateReport``: a delegate's turn ended; its answer
  lands under its worker id (once per delivery) and goes on, or the failure is noted
  (``coordinators.delivery.report`` sends it).
- ``do_close_round``: the internal ``closeRound``: a round's deadline passed.

Every one of them holds the conversation session's row lock while it writes.
"""

from __future__ import annotations

import logging
from functools import partial

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django_q.models import Schedule

from seats.queries import access_seat, reachable_seats
from workforce.dispatch import dispatch, enqueue
from workforce.leases import lapsed_claim_q, max_attempts, requeue_lost
from workforce.models import Organization, Session
from workforce.posted_by import seat_posted_by
from workforce.refusals import Refusal
from workforce.sessions import CHILD_SEPARATOR, ActionContext
from workforce.wire import MAX_ID_LENGTH, MAX_USER_ID_LENGTH, check_id, check_storable

from . import policies, rounds
from .config import current_setup
from .constants import (
    BEST_FIT,
    CLOSE_ROUND,
    EVERYONE,
    NOT_ON_ROSTER,
    RESERVED_STATE_FIELDS,
    ROUND_ROBIN,
    STATE_FIELD_RESERVED,
    no_worker_on_roster,
    state_field_reserved,
)
from .delegates import open_conversation
from .delivery import do_abandon_delivery
from .jobs import do_abandon_job
from .models import Answer, Conversation, DelegatedPost, Job, Post, Round
from .queries import delegate_session_id

logger = logging.getLogger(__name__)

MESSAGE = "message"


# ----------------------------------------------------------------------------- sessions


def reserved_state_problem(state: dict) -> Refusal | None:
    """The refusal for a session state a caller may not set: ``delegates`` and
    ``fallback`` are written only by the coordinator flow (spec "Changing the
    delegates"). None when the state is fine."""
    for key in RESERVED_STATE_FIELDS:
        if key in state:
            return Refusal(STATE_FIELD_RESERVED, state_field_reserved(key))
    return None


def _check_conversation_ids(session_id: str, chosen: str | None, delegates: list[str]) -> None:
    """Refuse a conversation id, or the id of a delegate's session under it, longer than
    a session id can be (``MAX_ID_LENGTH``, 300 characters), before anything is written:
    a delegate session that can't be stored would fail in the cluster, unanswered.

    Raises:
        Refusal("invalid-input"): naming the id, its length and how long ``sessionId``
            may be.
    """
    fixed = len(session_id) - len(chosen or "")
    if len(session_id) > MAX_ID_LENGTH:
        head = session_id[:fixed] if chosen else session_id[:40]
        room = f", so sessionId can be at most {max(MAX_ID_LENGTH - fixed, 0)}" if chosen else ""
        raise Refusal(
            "invalid-input",
            f"{'sessionId makes the conversation id' if chosen else 'The conversation id'} "
            f"{head}… {len(session_id)} characters long; ids are at most {MAX_ID_LENGTH}{room}.",
        )
    longest = max(delegates, key=len, default="")
    child = delegate_session_id(session_id, longest)
    if longest and len(child) > MAX_ID_LENGTH:
        room = f", so sessionId can be at most {max(MAX_ID_LENGTH - fixed - 1 - len(longest), 0)}" if chosen else ""
        raise Refusal(
            "invalid-input",
            f"{'sessionId' if chosen else 'The conversation id'} leaves no room for the session of delegate {longest} "
            f"({session_id[:fixed] if chosen else session_id[:40]}…{CHILD_SEPARATOR}{longest} would be {len(child)} "
            f"characters; ids are at most {MAX_ID_LENGTH}){room}.",
        )


def do_ensure_worker_session(
    org: Organization, user_id: str, worker: str, *, session_id: str | None = None, state: dict | None = None
) -> tuple[Session, bool]:
    """The caller's session with ``worker`` (the spec's ``ensureWorkerSession``),
    created on first use on the worker's flow kind, with ``state`` (plus ``worker``).

    Args:
        worker: a worker id the caller reaches (own, organization's, shared).
        session_id: a name for a further conversation with the same worker; the session
            is ``<worker>:<user id>:<session_id>`` (default ``<worker>:<user id>``), so a
            caller can never take an id a mailbox or another user's session will need.
            It may not hold ``:``.
        state: the new session's state; ``delegates`` and ``fallback`` are refused.

    Returns:
        ``(session, created)``.

    Raises:
        Refusal("state-field-reserved"): the state carries ``delegates`` or ``fallback`` (400).
        Refusal("invalid-input"): the state is not an object (or not storable), or an
            id is empty, too long or holds ``:``; ``sessionId`` names a worker (the
            file's delegates or one the caller reaches: its id is that delegate's
            session under the default conversation); or the session id, or the session id
            of a delegate the worker's file lists (``<session id>:<delegate>``), would
            be longer than 300 characters.
        Refusal("worker-not-on-roster"): no such worker on the caller's roster (404).
        Refusal("session-not-addressable"): the id is held by another kind or user (409).
    """
    state = {} if state is None else state
    if not isinstance(state, dict):
        raise Refusal("invalid-input", "state must be a JSON object.")
    check_id(user_id, label="userId", max_length=MAX_USER_ID_LENGTH)
    check_storable(state, label="state")
    if session_id is not None:
        check_id(session_id, label="sessionId")
        if CHILD_SEPARATOR in session_id:
            # "<parent>:<child>" ids name sessions the server creates (a seat's conversation).
            raise Refusal("invalid-input", f'sessionId may not contain "{CHILD_SEPARATOR}"; leave it out for the default.')
    problem = reserved_state_problem(state)
    if problem is not None:
        raise problem
    try:
        seat = access_seat(org, user_id, worker)
    except Refusal:
        raise Refusal(NOT_ON_ROSTER, no_worker_on_roster(worker)) from None
    chosen = session_id
    session_id = f"{worker}{CHILD_SEPARATOR}{user_id}" + (f"{CHILD_SEPARATOR}{session_id}" if session_id else "")
    file_delegates = (seat.config or {}).get("delegates") or []
    if (
        chosen is not None
        and (chosen in file_delegates or reachable_seats(org.pk, user_id, [chosen]))
        and not Session.objects.filter(organization=org, session_id=session_id).exists()
    ):
        # "<worker>:<user>:<sessionId>" is the id of the session delegate <sessionId>
        # works the default conversation's posts in ("<conversation>:<delegate>"): a
        # conversation named after a worker would take it, and that delegate could never
        # answer there (spec 004 "Changing the delegates": each delegate works a
        # conversation's posts in a session of its own).
        raise Refusal(
            "invalid-input",
            f'sessionId "{chosen}" names a worker: {session_id} is the session that worker works your '
            f"conversation {worker}{CHILD_SEPARATOR}{user_id}'s posts in as a delegate; choose a sessionId that "
            "names no worker.",
        )
    _check_conversation_ids(session_id, chosen, [w for w in file_delegates if isinstance(w, str)])
    with transaction.atomic():
        session, created = Session.objects.get_or_create(
            organization=org,
            session_id=session_id,
            defaults={"flow_kind": seat.kind, "user_id": user_id, "state": {**state, "worker": worker}},
        )
    if not created and (
        session.flow_kind != seat.kind or session.user_id != user_id or (session.state or {}).get("worker", worker) != worker
    ):
        raise Refusal("session-not-addressable", f'Session "{session_id}" is held by another conversation.')
    return session, created


# ----------------------------------------------------------------------------- posts


def do_post(ctx: ActionContext, message: str) -> dict:
    """The ``run`` action: the person's post lands in the conversation (a user message
    item; its id is the request's), then it is routed by the conversation's
    ``routing:`` (spec "Choosing how it routes"). Round robin and everyone deliver in
    this transaction; best fit holds (no call) or queues its evaluator call; judgment
    queues the coordinator's own turn. Delegates' answers arrive later, each in a
    request of its own.

    Returns:
        ``{"postId", "policy", "round": 0, "route": record | None}`` (``route`` is the
        ``coordinator-route`` item when the decision was made here).

    Raises:
        Refusal: the session is another user's, or names no coordinator; the
            coordinator was fired (``worker-not-on-roster``).
    """
    session = policies.lock_conversation(ctx.session)
    ctx.session = session
    conv = open_conversation(ctx.org, session, ctx.user_id)
    desk = policies.make_desk(conv, ctx.request, current_setup(session.flow_kind))
    if desk.coordinator is None:
        raise Refusal(NOT_ON_ROSTER, no_worker_on_roster(conv.worker))
    rounds.close_due_rounds(desk)
    post = Post.objects.create(
        conversation=conv,
        post_id=ctx.request.request_id,
        author=ctx.user_id,
        text=message,
        posted_by=ctx.posted_by,  # the principal the view resolved: never the input's
        request=ctx.request,
    )
    item: dict = {"role": "user", "text": message, "postId": post.post_id}
    if ctx.posted_by is not None:
        item["postedBy"] = ctx.posted_by
    ctx.emit("", item, type=MESSAGE)
    handing = policies.handing_for_post(post)
    policy = desk.policy
    record = None
    if policy == ROUND_ROBIN:
        record = policies.round_robin(desk, handing)
    elif policy == EVERYONE:
        record = policies.everyone(desk, handing)
    elif policy == BEST_FIT:
        record = policies.hold(desk, handing)
        if record is None:
            policies.queue_job(desk, post, 0, Job.Kind.PLACE)
    else:
        policies.queue_job(desk, post, 0, Job.Kind.JUDGMENT)
    rounds.check_round(desk, post, 0)
    return {"postId": post.post_id, "policy": policy, "round": 0, "route": record.as_item() if record else None}


# ----------------------------------------------------------------------------- reports


def do_report(ctx: ActionContext, data: dict) -> dict:
    """The internal ``onDelegateReport``: delivery ``deliveryId``'s turn ended
    (``outcome`` answered, failed or cancelled). Settles the delivery if the caller's
    claim (``ctx.extras["claim_token"]``) still holds it; then an answer lands in the
    conversation under the delegate's worker id, once per delivery (a one-to-one row),
    and goes back out when its round is open; a reported delivery may close its round.

    Returns:
        ``{"claimed": False}`` when the claim lapsed (nothing written), else
        ``{"claimed": True, "outcome", "landed", "goesFurther"}``.
    """
    session = policies.lock_conversation(ctx.session)
    ctx.session = session
    conv = Conversation.objects.get(session=session)
    conv.session = session
    delivery = DelegatedPost.objects.select_related("post").get(pk=data["deliveryId"], conversation=conv)
    outcome = data["outcome"]
    status = {
        "answered": DelegatedPost.Status.ANSWERED,
        "failed": DelegatedPost.Status.FAILED,
        "cancelled": DelegatedPost.Status.CANCELLED,
    }[outcome]
    desk = policies.make_desk(conv, ctx.request, current_setup(session.flow_kind))
    claimed = DelegatedPost.objects.filter(
        pk=delivery.pk, claim_token=ctx.extras.get("claim_token", ""), status=DelegatedPost.Status.RUNNING
    ).update(status=status, reported=True, finished_at=desk.now, error=data.get("error"))
    if not claimed:
        return {"claimed": False}
    rounds.close_due_rounds(desk)
    post = delivery.post
    result = {"claimed": True, "outcome": outcome, "landed": False, "goesFurther": False}
    if status == DelegatedPost.Status.ANSWERED:
        row = Round.objects.filter(post=post, number=delivery.round).first()
        further = rounds.goes_further(row)
        # The delegate's seat, from the conversation's own delivery row (never the report's input).
        posted_by = seat_posted_by(delivery.worker)
        ctx.emit(
            "",
            {
                "role": "assistant",
                "text": data["text"],
                "agentName": delivery.worker,
                "postId": post.post_id,
                "round": delivery.round,
                "postedBy": posted_by,
            },
            type=MESSAGE,
        )
        answer = Answer.objects.create(
            delivery=delivery,
            conversation=conv,
            post=post,
            round=delivery.round,
            worker=delivery.worker,
            text=data["text"],
            posted_by=posted_by,
            goes_further=further,
            request=ctx.request,
        )
        result.update(landed=True, goesFurther=further)
        if further:
            if desk.policy == BEST_FIT:
                policies.queue_job(desk, post, delivery.round + 1, Job.Kind.PLACE, source=answer)
            elif desk.policy == ROUND_ROBIN:
                policies.round_robin(desk, policies.handing_for_answer(answer))
    rounds.check_round(desk, post, delivery.round)
    return result


# ----------------------------------------------------------------------------- deadlines


def do_close_round(ctx: ActionContext, data: dict) -> dict:
    """The internal ``closeRound``: close round ``roundId`` if it is still open and its
    deadline has passed (and anything else past due in the conversation).

    Returns:
        ``{"closed": [round ids]}``.
    """
    session = policies.lock_conversation(ctx.session)
    ctx.session = session
    conv = Conversation.objects.get(session=session)
    conv.session = session
    desk = policies.make_desk(conv, ctx.request, current_setup(session.flow_kind))
    return {"closed": rounds.close_due_rounds(desk)}


def do_close_round_at_deadline(round_id: int, *, now=None) -> str:
    """The deadline's scheduled check (``coordinators.tasks.close_round_at_deadline``):
    when round ``round_id`` is still open and past its deadline, close it in a request of
    its own on the conversation (``closeRound``). Idempotent.

    Returns:
        ``"closed"``, ``"not-due"`` or ``"not-open"``.
    """
    now = now or timezone.now()
    row = Round.objects.select_related("conversation__session").filter(pk=round_id).first()
    if row is None or row.status != Round.Status.OPEN:
        return "not-open"
    if row.deadline_at and row.deadline_at > now:
        return "not-due"
    session = row.conversation.session
    with transaction.atomic():
        # Closers queue on the conversation's row, as its posts do (and in the same lock
        # order: session, then round), and look again once they hold it: of the timers of
        # several workers, the schedule and the sweep, one records the closeRound.
        Session.objects.select_for_update().filter(pk=session.pk).values_list("pk").first()
        if not Round.objects.filter(pk=round_id, status=Round.Status.OPEN).exists():
            return "not-open"
        request = dispatch(
            org=session.organization,
            kind=session.flow_kind,
            session_id=session.session_id,
            action=CLOSE_ROUND,
            payload={"roundId": round_id},
            user_id=session.user_id,
        )
    closed = (request.output or {}).get("closed") or []
    return "closed" if round_id in closed else "not-open"


# ----------------------------------------------------------------------------- sweeping


ROUND_TIMER_SECONDS = 0.5  # the round timer's shortest wait (a round past its deadline that did not close)


def seconds_to_next_deadline(*, now=None) -> float | None:
    """Seconds until the earliest deadline of an open round (0 or less: passed), or None
    when no round is open: when the cluster's round timer next has work (one indexed
    read)."""
    first = Round.objects.filter(status=Round.Status.OPEN).order_by("deadline_at").values_list("deadline_at", flat=True)[:1]
    for deadline in first:
        if deadline is not None:
            return (deadline - (now or timezone.now())).total_seconds()
    return None


def do_close_overdue_rounds(*, now=None, limit: int = 100) -> list[int]:
    """The cluster's round timer (a timer sweep in one worker per machine, registered by
    the app, which sleeps until ``seconds_to_next_deadline``): close every open round whose deadline has passed, each in a
    ``closeRound`` request of its own on its conversation (``do_close_round_at_deadline``),
    so a round closes within about a second of its deadline (spec 004 "A round closes
    ..."). Idempotent and safe from several workers at once: a round closes once (a
    conditional UPDATE on its status).

    Args:
        limit: at most this many rounds per call, oldest deadline first.

    Returns:
        The ids of the rounds this call closed.
    """
    now = now or timezone.now()
    due = Round.objects.filter(status=Round.Status.OPEN, deadline_at__lte=now).order_by("deadline_at")
    return [pk for pk in due.values_list("pk", flat=True)[:limit] if do_close_round_at_deadline(pk, now=now) == "closed"]


def do_sweep(*, now=None) -> dict:
    """Recover what a crashed worker or a lossy broker dropped (the sweep schedule's
    body). Idempotent; each re-enqueue is a conditional UPDATE.

    - a delivery or job running with a lapsed lease and out of attempts is settled as
      failed, so its round doesn't wait for it;
    - the others are enqueued again only when their task is known lost
      (``workforce.leases.requeue_lost``: a lapsed claim, or a task the queue has passed
      or no longer holds, with backoff); one still waiting in a backlog is left alone;
    - open rounds past their deadline get their check enqueued.

    Returns:
        ``{"deliveries": [ids], "jobs": [ids], "rounds": [ids], "abandoned": [ids]}``.
    """
    now = now or timezone.now()
    result: dict = {"deliveries": [], "jobs": [], "rounds": [], "abandoned": []}
    lost, waiting_again = lapsed_claim_q(now)
    for model, task, key in ((DelegatedPost, policies.DELIVER_TASK, "deliveries"), (Job, policies.JOB_TASK, "jobs")):
        out_of_attempts = model.objects.filter(status="running", lease_until__lt=now, attempts__gte=max_attempts())
        abandon = do_abandon_delivery if model is DelegatedPost else do_abandon_job
        for pk in out_of_attempts.values_list("pk", flat=True):
            if abandon(pk):
                result["abandoned"].append(pk)
        result[key] = requeue_lost(
            model,
            lost=lost,
            waiting=Q(status="pending") | waiting_again,
            send=partial(enqueue, task),
            task=task,
            now=now,
        ).all
    for pk in Round.objects.filter(status=Round.Status.OPEN, deadline_at__lt=now).values_list("pk", flat=True):
        enqueue(rounds.DEADLINE_TASK, pk)
        result["rounds"].append(pk)
    return result


SWEEP_SCHEDULE = "coordinators-sweep"
SWEEP_TASK = "coordinators.tasks.sweep"


def ensure_sweep_schedule(minutes: int = 1) -> None:
    """The django-q2 Schedule that runs ``do_sweep`` every ``minutes`` (created once;
    what boot does)."""
    try:
        with transaction.atomic():
            Schedule.objects.get_or_create(
                name=SWEEP_SCHEDULE,
                defaults={"func": SWEEP_TASK, "schedule_type": Schedule.MINUTES, "minutes": minutes, "repeats": -1},
            )
    except IntegrityError:  # another process created it at the same moment
        pass
