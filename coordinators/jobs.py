"""Decisions that need a model (spec 004 "Choosing how it routes"): best fit's evaluator
call and the coordinator's own turn, run on the task cluster by ``do_run_job`` with the
model called outside any transaction and the outcome recorded once.

- ``place`` (best fit): one evaluator call picks the delegate; the fallback takes what it
  can't place; with no fallback (or one that can't be reached) the coordinator's own
  turn takes it, as under judgment; if that fails too, nobody takes it and the
  conversation says so: ``Nobody took this post: best fit couldn't place it, and the
  coordinator's own turn failed: <error>.``
- ``judgment``: the coordinator's own turn on a post (round 0), or on a closed round's
  answers (its hand-offs go out in the next round).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from seats.queries import reachable_seats
from seats.turns import SlotRule, TurnPlan, TurnSpec, drive_turn
from workforce.leases import LeaseLost, claim_lease
from workforce.models import Request
from workforce.refusals import Refusal
from workforce.sessions import do_abort_request, do_record_request

from . import policies, rounds
from .config import current_setup
from .constants import (
    ANSWERED_ITSELF,
    BY_JUDGMENT,
    BY_UNPLACED,
    DELIVERED,
    ROUTE_ACTION,
    nobody_best_fit,
    nobody_judgment,
)
from .judgment import TurnOutcome, run_own_turn
from .models import Conversation, Job
from .policies import Handing, Pick, Record, entry
from .queries import round_answers

logger = logging.getLogger(__name__)


class JobLeaseLost(Exception):
    """Our claim on a job lapsed and another task took it over."""


def handing_of(job: Job) -> Handing:
    """What the job places: the person's post (round 0) or the answer it routes on."""
    if job.source is not None:
        return policies.handing_for_answer(job.source)
    return policies.handing_for_post(job.post)


def do_run_job(job_id: int) -> str:
    """Run job ``job_id`` once (the ``run_job`` task's body). Never raises.

    The job runs through ``seats.turns.drive_turn`` (kind ``coordinator``) and takes
    the coordinator's turn slot in the conversation first: while another of its turns (or another job's call) runs
    there, the job hands its claim back and waits, and runs again when that one ends.

    Returns:
        The record's ``by`` (``evaluated``, ``fallback``, ``judgment``, ``unplaced``),
        ``"waiting"``, ``"not-claimed"`` or ``"lease-lost"``.
    """
    token = claim_lease(Job, job_id, stamp_started=False)
    if token is None:
        return "not-claimed"
    job = Job.objects.select_related("conversation__session__organization", "post", "source", "request").get(pk=job_id)
    if job.request_id and job.request.status == Request.Status.RUNNING:  # a turn a crashed worker left behind
        do_abort_request(job.request_id)
    run = _JobRun(job, token)
    # One turn of the coordinator at a time in its conversation (seats.turns): a turn
    # still running on the last post or round gets this one after it. Taken before best
    # fit's call, so a job that waits has made no call yet and a post costs at most one
    # evaluator call per round.
    rule = SlotRule.leased(
        job.conversation.session, job.conversation.worker, task=policies.JOB_TASK, model=Job, pk=job.pk, token=token
    )
    plan: TurnPlan[_JobTurn, str] = TurnPlan(
        start=lambda: run.run, settle=lambda turn: _record(job, token, turn.pick, turn.outcome), slot=rule, waiting="waiting"
    )
    try:
        return drive_turn(TurnSpec.planned("coordinator", plan))
    except (JobLeaseLost, LeaseLost):
        if run.outcome is not None:
            do_abort_request(run.outcome.request.pk)
        logger.warning("coordinator job %s: the claim lapsed and another task took it over", job_id)
        return "lease-lost"
    except Exception:
        logger.exception("coordinator job %s failed", job_id)
        if run.outcome is not None:
            Request.objects.filter(pk=run.outcome.request.pk, status=Request.Status.RUNNING).update(
                status=Request.Status.FAILED, finished_at=timezone.now()
            )
        return "failed"


@dataclass
class _JobTurn:
    """What a job's run decided, as the turn ``seats.turns.drive_turn`` finishes: best
    fit's ``pick`` and, when nobody was picked, the coordinator's own turn
    (``outcome``). ``finish`` writes nothing: the record (``_record``, the settle) ends
    the own turn with its hand-offs in the same transaction."""

    pick: Pick | None
    outcome: TurnOutcome | None
    reply: str = ""
    error: Refusal | None = None

    @property
    def request(self) -> Request | None:
        """The own turn's ``judgment`` request (None: best fit placed the post)."""
        return self.outcome.request if self.outcome is not None else None

    def finish(self, *, output: dict | None = None) -> None:
        """Nothing: ``record_turn`` finishes the own turn with its record."""


class _JobRun:
    """One run of a job, outside any transaction: best fit's call (a ``place`` job),
    then, when it placed nothing, the coordinator's own turn."""

    def __init__(self, job: Job, token: str) -> None:
        self.job = job
        self.token = token
        self.outcome: TurnOutcome | None = None

    def run(self) -> _JobTurn:
        job, token = self.job, self.token
        conv = job.conversation
        setup = current_setup(conv.session.flow_kind)
        pick = None
        if job.kind == Job.Kind.PLACE:
            pick = policies.best_fit_pick(conv, setup, handing_of(job))
        if pick is not None and pick.worker is not None:
            return _JobTurn(pick, None)
        self.outcome = outcome = run_own_turn(
            conv,
            policies.coordinator_seat(conv),
            setup,
            job.post,
            job.round,
            on_started=lambda request: Job.objects.filter(pk=job.pk, claim_token=token).update(request=request),
        )
        return _JobTurn(pick, outcome, reply=outcome.reply, error=outcome.error)


def _record(job: Job, token: str, pick, outcome: TurnOutcome | None) -> str:
    with transaction.atomic():
        session = policies.lock_conversation(job.conversation.session)
        conv = Conversation.objects.get(pk=job.conversation_id)
        conv.session = session
        if not Job.objects.filter(pk=job.pk, claim_token=token, status=Job.Status.RUNNING).update(
            status=Job.Status.DONE, finished_at=timezone.now()
        ):
            raise JobLeaseLost()
        request = outcome.request if outcome is not None else _route_request(conv, job)
        desk = policies.make_desk(conv, request, current_setup(session.flow_kind))
        rounds.close_due_rounds(desk)
        handing = handing_of(job)
        if pick is not None and pick.worker is not None:
            record = policies.record_pick(desk, handing, pick)
        elif outcome is not None:
            record = record_turn(
                desk, job, outcome, skipped=list(pick.skipped) if pick is not None else [], best_fit=pick is not None
            )
        else:  # run_job records a pick, or runs the turn first
            raise ValueError(f"job {job.pk}: neither a pick nor a turn to record")
        Job.objects.filter(pk=job.pk).update(request=request)
        if outcome is None:
            Request.objects.filter(pk=request.pk).update(output=record.as_item())
        rounds.check_round(desk, job.post, job.round)
    return record.by


def _route_request(conv: Conversation, job: Job) -> Request:
    session = conv.session
    return do_record_request(
        session,
        action=ROUTE_ACTION,
        input={"postId": job.post.post_id, "round": job.round},
        user_id=session.user_id,
        started_at=job.created_at,
    )


def record_turn(desk, job: Job, outcome: TurnOutcome, *, skipped: list[dict], best_fit: bool) -> Record:
    """Record the coordinator's own turn (inside the transaction): its hand-offs are
    delivered, its reply lands under ``coordinator-judgment:<worker>``, and the record
    says ``judgment``; a failed turn hands nothing on, and nobody takes the post."""
    post, number = job.post, job.round
    entries = list(skipped) + list(outcome.skipped)
    if outcome.error is not None:
        outcome.turn.finish()
        error = outcome.error.message.rstrip(".")
        none = nobody_best_fit(error) if best_fit else nobody_judgment(error)
        return policies.record_failed(desk, post, number, BY_UNPLACED, entries, none)
    answers = round_answers(post.pk, number - 1) if number > 0 else []
    seats_rows = []
    for worker in outcome.handoffs:
        handing = policies.handing_for_post(post) if number == 0 else policies.passing_on(post, number, answers, worker)
        seat = reachable_seats(desk.conv.session.organization_id, desk.owner, [worker]).get(worker)
        problem = policies.delegate_problem(worker, seat, desk.setup) if handing is not None else None
        if handing is None or problem or seat is None:
            entries.append(entry(worker, "skipped", problem or "It has nothing to get."))
            continue
        seats_rows.append(policies.deliver(desk, handing, worker, seat, entries)[1])
    # The turn's end: its reply under coordinator-judgment:<worker>, the request completed.
    outcome.turn.finish(output={"reply": outcome.reply, "handedOff": [e["worker"] for e in entries if e["outcome"] == DELIVERED]})
    record = Record(post.post_id, number, desk.policy, BY_JUDGMENT, entries, note=policies.note_for(seats_rows))
    if not record.delivered():
        record.none = ANSWERED_ITSELF
    return desk.record(record)


def do_abandon_job(job_id: int) -> bool:
    """Settle a job that ran out of attempts: nobody takes its post, and the record
    says so. Returns True when it did."""
    job = Job.objects.select_related("conversation__session", "post").filter(pk=job_id, status=Job.Status.RUNNING).first()
    if job is None:
        return False
    with transaction.atomic():
        session = policies.lock_conversation(job.conversation.session)
        if not Job.objects.filter(pk=job.pk, claim_token=job.claim_token, status=Job.Status.RUNNING).update(
            status=Job.Status.DONE, finished_at=timezone.now()
        ):
            return False
        conv = Conversation.objects.get(pk=job.conversation_id)
        conv.session = session
        desk = policies.make_desk(conv, _route_request(conv, job), current_setup(session.flow_kind))
        error = f"it never finished in {job.attempts} attempts"
        none = nobody_best_fit(error) if job.kind == Job.Kind.PLACE else nobody_judgment(error)
        policies.record_failed(desk, job.post, job.round, BY_UNPLACED, [], none)
        rounds.check_round(desk, job.post, job.round)
    return True


__all__ = ["do_abandon_job", "do_run_job", "record_turn"]
