"""Routing policies (spec 004 "Choosing how it routes", "What it records").

Who gets a post, per the conversation's ``routing:``:

- ``judgment`` (default): the coordinator's own turn decides (``coordinators.judgment``);
- ``best-fit``: the hold (a delegate still working your last post gets the next one,
  no call), else one evaluator call over the delegates' notes or descriptions, else the
  fallback, else the coordinator's own turn, else nobody (``best_fit_pick``,
  ``hold``);
- ``round-robin``: the next delegate in the list after the one the person's last post
  went to; an answer, the next after its author (``round_robin``);
- ``everyone``: every delegate (``everyone``; and ``everyone_pass_on`` for rounds).

Every policy checks each delegate when the post arrives: one that was fired or whose
flow can't take a delegated post is skipped, and the record says why. Every decision
leaves one ``coordinator-route`` item (``Record``). Everything here except
``best_fit_pick`` runs inside a transaction with the conversation's row lock held
(``Desk``); ``best_fit_pick`` calls the evaluator and runs outside any transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from seats.models import Seat
from seats.queries import reachable_seats
from workforce.contracts import in_callers_transaction
from workforce.dispatch import enqueue, external_dispatcher
from workforce.llm.evaluation import (
    Choice,
    EvaluationCall,
    EvaluationError,
    Question,
    evaluate,
)
from workforce.llm.resolver import resolve_evaluation_model
from workforce.models import Request, Session
from workforce.sessions import emit_item

from .config import CoordinatorSetup, policy_of, rounds_of, takes_posts
from .constants import (
    ALREADY_HANDED,
    BY_EVALUATED,
    BY_EVERYONE,
    BY_FALLBACK,
    BY_HELD,
    BY_ROUND_ROBIN,
    BY_UNPLACED,
    COORDINATOR_ROUTE,
    DELIVERED,
    FAILED,
    NOBODY_REACHABLE,
    ROUTE_BLOCK,
    ROUTE_QUESTION,
    ROUTE_QUESTION_TEXT,
    SKIPPED,
    cannot_take_post,
    judgment_agent_name,
    no_worker_on_roster,
    nothing_to_pass_on,
    rounds_full_note,
    turn_text,
)
from .models import Answer, Conversation, DelegatedPost, Job, Post, Round
from .opening import open_round
from .queries import list_delegates, round_answers

logger = logging.getLogger(__name__)

DELIVER_TASK = "coordinators.tasks.deliver_delegated_post"
JOB_TASK = "coordinators.tasks.run_job"
MESSAGE = "message"
EXTERNAL_DISPATCHER = (
    "external-dispatcher: this deployment hands dispatch to an external queue whose workers share no lease backend, "
    "so nothing can be handed to a delegate's session."
)


# ----------------------------------------------------------------------------- records


@dataclass
class Record:
    """One routing decision: the ``coordinator-route`` item's data.

    ``delegates`` holds ``{worker, outcome, reason?}`` per delegate the decision
    touched (outcome ``delivered``, ``skipped`` or ``failed``); ``none`` says why nobody
    was delivered to, when nobody was; ``note`` says why this round's answers go no
    further (the conversation already had 50 rounds open).
    """

    post_id: str
    round: int
    policy: str
    by: str
    delegates: list[dict] = field(default_factory=list)
    none: str | None = None
    note: str | None = None

    def delivered(self) -> list[str]:
        """The workers handed the post."""
        return [d["worker"] for d in self.delegates if d["outcome"] == DELIVERED]

    def as_item(self) -> dict:
        """``{postId, round, policy, by, delegates, none?, note?}``."""
        data: dict = {
            "postId": self.post_id,
            "round": self.round,
            "policy": self.policy,
            "by": self.by,
            "delegates": list(self.delegates),
        }
        if self.none is not None:
            data["none"] = self.none
        if self.note is not None:
            data["note"] = self.note
        return data


def entry(worker: str, outcome: str, reason: str | None = None) -> dict:
    """One delegate in a record."""
    return {"worker": worker, "outcome": outcome, "reason": reason} if reason else {"worker": worker, "outcome": outcome}


# ----------------------------------------------------------------------------- the desk


@dataclass
class Desk:
    """Where a decision is made: the conversation (its session's row lock held), the
    request decisions are recorded on, the flow's setup, the coordinator's seat (None
    when it was fired) and its ``routing:``/``rounds:``."""

    conv: Conversation
    request: Request | None
    setup: CoordinatorSetup
    coordinator: Seat | None
    now: datetime
    records: list[Record] = field(default_factory=list)
    opened: dict = field(default_factory=dict)  # (post pk, round) -> Round, read once per decision

    @property
    def session(self) -> Session:
        return self.conv.session

    @property
    def owner(self) -> str:
        return self.conv.session.user_id

    @property
    def policy(self) -> str:
        return policy_of(self.coordinator)

    @property
    def rounds(self) -> int:
        return rounds_of(self.coordinator) if self.coordinator is not None else 0

    def emit(self, component: str, data: dict, *, type: str = "component"):
        """An item on the conversation's session, on this desk's request."""
        return emit_item(self.session, component, data, type=type, request=self.request)

    def record(self, record: Record) -> Record:
        """Leave the decision's one ``coordinator-route`` item; a decision about a
        person's post (round 0) also notes where it went on the post (best fit's hold
        reads it)."""
        self.emit(COORDINATOR_ROUTE, record.as_item())
        self.records.append(record)
        if record.round == 0:
            delivered = record.delivered()
            Post.objects.filter(conversation=self.conv, post_id=record.post_id).update(
                route_by=record.by, route_worker=delivered[0] if len(delivered) == 1 else ""
            )
        return record


def coordinator_seat(conv: Conversation) -> Seat | None:
    """The conversation's coordinator as its owner reaches it, or None (fired)."""
    return reachable_seats(conv.session.organization_id, conv.session.user_id, [conv.worker]).get(conv.worker)


def lock_conversation(session: Session) -> Session:
    """Take the conversation session's row lock until the transaction ends and return
    the row (``FOR NO KEY UPDATE``: it serializes the conversation's writers without
    waiting on rows that merely reference the session)."""
    return Session.objects.select_for_update(no_key=True).get(pk=session.pk)


def make_desk(conv: Conversation, request: Request | None, setup: CoordinatorSetup, *, now: datetime | None = None) -> Desk:
    """A Desk for ``conv`` (call with the session's row lock held)."""
    return Desk(conv=conv, request=request, setup=setup, coordinator=coordinator_seat(conv), now=now or timezone.now())


# ----------------------------------------------------------------------------- what is handed


@dataclass(frozen=True)
class Handing:
    """What a delivery hands a delegate: in ``round`` of ``post``, ``text`` written by
    ``writer`` (the person's user id, or the delegates whose answers it passes on).
    ``exclude``: delegates never handed it (an answer's own author)."""

    post: Post
    round: int
    writer: str
    text: str
    exclude: frozenset = frozenset()

    def message(self, coordinator: str) -> str:
        """``<from>, through <coordinator>: <post>``."""
        return turn_text(self.writer, coordinator, self.text)


def handing_for_post(post: Post) -> Handing:
    """The person's post, in round 0."""
    return Handing(post=post, round=0, writer=post.author, text=post.text)


def handing_for_answer(answer: Answer) -> Handing:
    """An answer going back out (best fit, round robin): in the next round, never to its
    own author."""
    return Handing(
        post=answer.post, round=answer.round + 1, writer=answer.worker, text=answer.text, exclude=frozenset({answer.worker})
    )


def join_names(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def passing_on(post: Post, next_round: int, answers: list[Answer], recipient: str) -> Handing | None:
    """What ``recipient`` gets in ``next_round`` under everyone (and a judgment
    hand-off after round ``next_round - 1``): the other delegates' answers from the
    round before, in one delivery. None when it has no other answer to get."""
    others = [a for a in answers if a.worker != recipient]
    if not others:
        return None
    writer = join_names(list(dict.fromkeys(a.worker for a in others)))
    text = others[0].text if len(others) == 1 else "\n\n".join(f"{a.worker}: {a.text}" for a in others)
    return Handing(post=post, round=next_round, writer=writer, text=text)


def delegate_problem(worker: str, seat: Seat | None, setup: CoordinatorSetup) -> str | None:
    """Why ``worker`` can't take a delegated post now (the record's reason), or None:
    it is no longer on the roster (fired), or its flow can't take a delegated post."""
    if seat is None:
        return no_worker_on_roster(worker)
    if not takes_posts(seat.kind, setup):
        return cannot_take_post(worker, seat.kind)
    return None


# ----------------------------------------------------------------------------- delivering


def ensure_round(desk: Desk, post: Post, number: int) -> Round:
    """Round ``number`` of ``post``, opened on its first delivery (see
    ``coordinators.opening.open_round``); read once per desk."""
    key = (post.pk, number)
    if key not in desk.opened:
        desk.opened[key] = open_round(desk, post, number)
    return desk.opened[key]


def deliver(desk: Desk, handing: Handing, worker: str, seat: Seat, entries: list[dict]) -> tuple[bool, Round | None]:
    """Hand ``handing`` to ``worker``: one DelegatedPost, unique per (post, round,
    worker), whose task is enqueued with the transaction. A second hand-off of the same
    post to the same delegate in the same round is skipped (the database decides).
    Appends the delegate's entry to ``entries``. Under an external dispatcher nothing
    can be handed to a delegate's session: the entry is ``failed``, with why.

    Returns:
        ``(delivered, round)`` (round None when nothing could be handed).
    """
    if external_dispatcher():
        entries.append(entry(worker, FAILED, EXTERNAL_DISPATCHER))
        return False, None
    round_row = ensure_round(desk, handing.post, handing.round)
    try:
        with transaction.atomic():
            delivery = DelegatedPost.objects.create(
                organization_id=desk.conv.organization_id,
                conversation=desk.conv,
                post=handing.post,
                round=handing.round,
                worker=worker,
                kind=seat.kind,
                writer=handing.writer,
                message=handing.message(desk.conv.worker),
                enqueued_at=desk.now,
            )
    except IntegrityError:
        entries.append(entry(worker, SKIPPED, ALREADY_HANDED))
        return False, round_row
    enqueue(DELIVER_TASK, delivery.pk)
    entries.append(entry(worker, DELIVERED))
    return True, round_row


def offer(desk: Desk, handing: Handing, worker: str, seat: Seat | None, entries: list[dict]) -> tuple[bool, Round | None] | None:
    """``deliver`` to ``worker`` when it can take the post (``delegate_problem``);
    else append its ``skipped`` entry, with why, to ``entries`` and return None."""
    problem = delegate_problem(worker, seat, desk.setup)
    if problem or seat is None:  # (a seat that is None is a problem)
        entries.append(entry(worker, SKIPPED, problem))
        return None
    return deliver(desk, handing, worker, seat, entries)


def note_for(rounds: Sequence[Round | None]) -> str | None:
    """The record's note when any round it delivered into wasn't opened."""
    unopened = [r for r in rounds if r is not None and r.status == Round.Status.UNOPENED]
    return rounds_full_note(unopened[0].number) if unopened else None


def queue_job(desk: Desk, post: Post, number: int, kind: str, source: Answer | None = None) -> Job:
    """A decision that needs a model (best fit's call, the coordinator's own turn), run
    on the task cluster; enqueued with the transaction."""
    job = Job.objects.create(conversation=desk.conv, post=post, round=number, kind=kind, source=source, enqueued_at=desk.now)
    enqueue(JOB_TASK, job.pk)
    return job


# ----------------------------------------------------------------------------- policies


def round_robin(desk: Desk, handing: Handing) -> Record:
    """Round robin (spec 004 "Choosing how it routes", "Letting delegates answer each
    other"): the person's post (round 0) goes to the next delegate in the list after the
    one the person's last post went to; a delegate's answer going back out goes to the
    next delegate after its author, never to the author. Delegates that can't take it
    are passed over (skipped, with why).

    Only the person's posts move the cursor (``Conversation.rr_last_worker``): routing
    answers on never moves the person's turn, so post 1 to A, A's answer to B in round
    1, and post 2 still goes to B. Concurrent posts go to different delegates: the
    cursor is read and moved under the conversation's row lock."""
    conv = desk.conv
    delegates = [d.worker for d in list_delegates(conv)]
    seats = reachable_seats(conv.session.organization_id, desk.owner, delegates)
    entries: list[dict] = []
    rounds: list[Round | None] = []
    count = len(delegates)
    person = handing.round == 0
    if not person and handing.writer in delegates:
        start = delegates.index(handing.writer) + 1
    elif not person:  # its author was removed since: go on from the person's turn
        start = delegates.index(conv.rr_last_worker) + 1 if conv.rr_last_worker in delegates else 0
    elif conv.rr_last_worker in delegates:
        start = delegates.index(conv.rr_last_worker) + 1
    else:  # the last one was removed: its successor moved into its place
        start = conv.rr_last_index if conv.rr_last_index >= 0 else 0
    for step in range(count):
        index = (start + step) % count
        worker = delegates[index]
        if worker in handing.exclude:
            continue
        offered = offer(desk, handing, worker, seats.get(worker), entries)
        if offered is None:
            continue
        delivered, round_row = offered
        rounds.append(round_row)
        if delivered:
            if person:
                conv.rr_last_worker, conv.rr_last_index = worker, index
                Conversation.objects.filter(pk=conv.pk).update(rr_last_worker=worker, rr_last_index=index)
            break
    return _placed_or_unplaced(
        desk, Record(handing.post.post_id, handing.round, desk.policy, BY_ROUND_ROBIN, entries, note=note_for(rounds))
    )


def everyone(desk: Desk, handing: Handing) -> Record:
    """Everyone: every delegate in the list (but an answer's own author), each checked;
    the ones that can't take it are skipped with why."""
    delegates = [d.worker for d in list_delegates(desk.conv)]
    seats = reachable_seats(desk.conv.session.organization_id, desk.owner, delegates)
    entries: list[dict] = []
    rounds: list[Round | None] = []
    for worker in delegates:
        if worker in handing.exclude:
            continue
        offered = offer(desk, handing, worker, seats.get(worker), entries)
        if offered is not None:
            rounds.append(offered[1])
    return _placed_or_unplaced(
        desk, Record(handing.post.post_id, handing.round, desk.policy, BY_EVERYONE, entries, note=note_for(rounds))
    )


def _placed_or_unplaced(desk: Desk, record: Record) -> Record:
    """Record ``record`` as it is when it delivered to anyone, else as unplaced with
    nobody reachable; for the person's post (round 0) the conversation then says so too
    (spec 004 "Choosing how it routes": round-robin and everyone say the same as best
    fit). An answer routed on to nobody already landed: only its record says so."""
    if not record.delivered():
        record.by, record.none = BY_UNPLACED, NOBODY_REACHABLE
        if record.round == 0:
            say_nobody_took_it(desk, record.post_id, record.round, NOBODY_REACHABLE)
    return desk.record(record)


def everyone_pass_on(desk: Desk, post: Post, closed_round: int) -> Record | None:
    """Everyone, after round ``closed_round`` closed: each delegate gets the other
    delegates' answers from it in one delivery, in the next round. A delegate with no
    other answer to get is skipped. None (no record) when the round had no answers."""
    answers = round_answers(post.pk, closed_round)
    if not answers:
        return None
    next_round = closed_round + 1
    delegates = [d.worker for d in list_delegates(desk.conv)]
    seats = reachable_seats(desk.conv.session.organization_id, desk.owner, delegates)
    entries: list[dict] = []
    rounds: list[Round | None] = []
    for worker in delegates:
        handing = passing_on(post, next_round, answers, worker)
        if handing is None:
            entries.append(entry(worker, SKIPPED, nothing_to_pass_on(closed_round)))
            continue
        offered = offer(desk, handing, worker, seats.get(worker), entries)
        if offered is not None:
            rounds.append(offered[1])
    record = Record(post.post_id, next_round, desk.policy, BY_EVERYONE, entries, note=note_for(rounds))
    if not record.delivered():
        record.by = BY_UNPLACED
        record.none = (
            NOBODY_REACHABLE
            if any(e["reason"] != nothing_to_pass_on(closed_round) for e in entries)
            else (f"No delegate had another delegate's answer from round {closed_round} to get.")
        )
    return desk.record(record)


def hold(desk: Desk, handing: Handing) -> Record | None:
    """Best fit's hold: while a delegate is still working your last post (placed by
    best fit's call, the fallback or a hold), this one goes to it too, with no call.
    Returns the record, or None when nothing holds."""
    conv = desk.conv
    last = Post.objects.filter(conversation=conv, pk__lt=handing.post.pk).order_by("-pk").first()
    if last is None or last.route_by not in (BY_EVALUATED, BY_FALLBACK, BY_HELD) or not last.route_worker:
        return None
    worker = last.route_worker
    working = DelegatedPost.objects.filter(
        post=last, round=0, worker=worker, status__in=(DelegatedPost.Status.PENDING, DelegatedPost.Status.RUNNING)
    ).exists()
    if not working or worker not in {d.worker for d in list_delegates(conv)}:
        return None
    seat = reachable_seats(conv.session.organization_id, desk.owner, [worker]).get(worker)
    if delegate_problem(worker, seat, desk.setup) or seat is None:
        return None
    entries: list[dict] = []
    delivered, round_row = deliver(desk, handing, worker, seat, entries)
    return desk.record(Record(handing.post.post_id, handing.round, desk.policy, BY_HELD, entries, note=note_for([round_row])))


@dataclass
class Pick:
    """Best fit's choice, made outside any transaction: ``worker`` (None: can't place)
    and ``by`` (``evaluated`` or ``fallback``), the delegates it skipped, and why the
    call couldn't place the post (``detail``)."""

    worker: str | None
    by: str
    skipped: list[dict]
    detail: str = ""
    calls: int = 0


def route_timeout() -> float:
    """Seconds best fit's evaluator call may take (``WORKFORCE_ROUTE_TIMEOUT``, default
    ``WORKFORCE_MODEL_TIMEOUT``)."""
    return float(settings.WORKFORCE_ROUTE_TIMEOUT)


def best_fit_pick(conv: Conversation, setup: CoordinatorSetup, handing: Handing) -> Pick:
    """Best fit's placement: one evaluator call (block ``coordinator-route``, question
    ``delegate``) whose choices are the delegates that can take the post and have a
    note or, failing that, a description (the note first; a delegate with neither
    isn't offered); the fallback when the call can't place it (it fails, answers none
    or something that isn't a delegate, or has nobody to pick from). Never the
    handing's excluded author. Runs outside any transaction.

    Returns:
        Pick(worker=None) when neither places it: the coordinator's own turn takes it.
    """
    owner = conv.session.user_id
    delegates = list_delegates(conv)
    seats = reachable_seats(conv.session.organization_id, owner, [d.worker for d in delegates])
    skipped: list[dict] = []
    choices: list[Choice] = []
    usable: set[str] = set()
    for delegate in delegates:
        if delegate.worker in handing.exclude:
            continue
        seat = seats.get(delegate.worker)
        problem = delegate_problem(delegate.worker, seat, setup)
        if problem or seat is None:
            skipped.append(entry(delegate.worker, SKIPPED, problem))
            continue
        usable.add(delegate.worker)
        description = (delegate.note or seat.description or "").strip()
        if description:
            choices.append(Choice(delegate.worker, description))
    calls = 0
    if not choices:
        detail = "no delegate has a note or a description to pick by"
    else:
        question = Question(ROUTE_QUESTION, ROUTE_QUESTION_TEXT, tuple(choices))
        call = EvaluationCall(
            block=ROUTE_BLOCK,
            question=question,
            state={"post": {"from": handing.writer, "text": handing.text}, "round": handing.round},
            focus=handing.text,
            instructions=f"You route posts for the coordinator {conv.worker}. Pick the delegate whose job fits the post.",
            timeout=route_timeout(),
        )
        calls = 1
        try:
            verdict = evaluate(resolve_evaluation_model(setup.route_model, block=ROUTE_BLOCK), call)
        except EvaluationError as exc:
            model = setup.route_model if isinstance(setup.route_model, str) else type(setup.route_model).__name__
            logger.warning(
                "model call failed: coordinator %s, conversation %s, route model %s: %s",
                conv.worker,
                conv.session.session_id,
                model,
                exc,
            )
            detail = f"the evaluator call failed: {exc}"
        else:
            if verdict.choice is not None and question.offers(verdict.choice):
                return Pick(verdict.choice, BY_EVALUATED, skipped, calls=calls)
            detail = (
                "the evaluator answered none of the delegates"
                if verdict.choice is None
                else f'the evaluator answered "{verdict.choice}", which is not a delegate it was offered'
            )
    fallback = conv.fallback
    if fallback and fallback in usable:
        return Pick(fallback, BY_FALLBACK, skipped, detail, calls)
    return Pick(None, BY_UNPLACED, skipped, detail, calls)


@in_callers_transaction
def record_pick(desk: Desk, handing: Handing, pick: Pick) -> Record:
    """Deliver best fit's pick and record it (inside the transaction)."""
    worker = pick.worker
    if worker is None:  # a pick of nobody is recorded with the turn (coordinators.jobs)
        raise ValueError("record_pick takes a pick of a worker")
    entries = list(pick.skipped)
    seat = reachable_seats(desk.conv.session.organization_id, desk.owner, [worker]).get(worker)
    problem = delegate_problem(worker, seat, desk.setup)
    rounds: list[Round | None] = []
    if problem or seat is None:
        entries.append(entry(worker, SKIPPED, problem))
    else:
        rounds.append(deliver(desk, handing, worker, seat, entries)[1])
    record = Record(handing.post.post_id, handing.round, desk.policy, pick.by, entries, note=note_for(rounds))
    if not record.delivered():
        record.none = NOBODY_REACHABLE
    return desk.record(record)


def say_nobody_took_it(desk: Desk, post_id: str, number: int, text: str):
    """The conversation's line that nobody took post ``post_id`` (``Nobody took this
    post: …``): an assistant ``message`` item the coordinator writes itself (``agentName``
    ``coordinator-judgment:<worker>``, with ``postId`` and ``round``), on the desk's
    request."""
    return desk.emit(
        "",
        {
            "role": "assistant",
            "text": text,
            "agentName": judgment_agent_name(desk.conv.worker),
            "postId": post_id,
            "round": number,
        },
        type=MESSAGE,
    )


def record_failed(desk: Desk, handing_post: Post, number: int, by: str, entries: list[dict], none: str) -> Record:
    """Nobody took it: the record, and a line in the conversation that says so."""
    say_nobody_took_it(desk, handing_post.post_id, number, none)
    return desk.record(Record(handing_post.post_id, number, desk.policy, by, entries, none=none))


__all__ = [
    "Desk",
    "Handing",
    "Pick",
    "Record",
    "best_fit_pick",
    "deliver",
    "delegate_problem",
    "everyone",
    "everyone_pass_on",
    "handing_for_answer",
    "handing_for_post",
    "hold",
    "make_desk",
    "passing_on",
    "queue_job",
    "record_pick",
    "round_robin",
]
