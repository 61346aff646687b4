"""How mail becomes work (spec "How mail becomes work"): admitting a mail's run, and the
run itself, a turn of the recipient's seat (``seats.turns``), run kind ``mail``.

Admission (``admit_mail_run``) writes one ``MailRun`` per mail that came with
``mail:new``: ``refused`` when the recipient's WORKER.md ``run: {triggers: [...]}``
does not include ``mail`` (ledgered ``run.denied``, reason ``trigger-not-allowed``),
else ``pending`` with a ``mail.tasks.run_mail`` task enqueued. The run
(``do_run_mail``) claims its row (``workforce.leases.claim_lease``: a redelivered task
claims nothing), moves the mail to ``mail:working``, and runs the seat's turn in the
agent's mail session ``mail:<slug>`` (its history is the agent's earlier mail runs):
the action ``onMail``, input ``{thread, runKind: "mail"}``, the turn text
``<sender> in <thread>: <subject>`` and the mail, then what was delivered to it
without ``mail:new`` since its last run. The model is offered the seat's own tools and
``mail_reply``/``mail_close``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from seats.agent import agent_tools
from seats.models import Seat
from seats.queries import conversation_history
from seats.turns import SlotRule, TurnPlan, TurnSpec, drive_turn, run_turn, start_turn
from seats.workers import run_triggers
from workforce.dispatch import enqueue
from workforce.facets import Turn
from workforce.framing import quoted, quoted_name
from workforce.leases import LeaseLost, claim_lease, lapsed_claim_q, requeue_lost
from workforce.leases import max_attempts as max_run_attempts
from workforce.models import Organization, Request, Session
from workforce.refusals import Refusal, failure_text
from workforce.sessions import do_abort_request

from .constants import MAIL_RUN_ACTION, RUN_DENIED, RUN_FAILED, RUN_KIND_MAIL
from .index import UNKNOWN_SENDER
from .ledger import ledger
from .models import MailRun, Thread
from .queries import unseen_threads
from .services import agent_principal, do_mark_working, do_return_mail, recipient_seat
from .tools import THREAD_EXTRA, mail_run_tools

logger = logging.getLogger(__name__)

RUN_TASK = "mail.tasks.run_mail"
# A mail indexed new with no run is admitted by the sweep only this long after it was sent:
# before that, its event may still be on its way (a forge's webhook).
SWEEP_GRACE_SECONDS = 30
# The turn failures a mail run is run again for while it has claims left: the model's
# (what the model client's own retries did not get through), the turn's time limit, and a
# vault that could not mark the mail working.
RETRIED_REASONS = frozenset({"model-error", "turn-timeout", "vault-unavailable"})


def admit_mail_run(thread: Thread) -> MailRun:
    """Admit (or refuse) the run of a mail that arrived with ``mail:new``, once per mail:
    a second call answers the first one's row. Call inside a transaction."""
    existing = MailRun.objects.filter(thread=thread).first()
    if existing is not None:
        return existing
    error = None
    try:
        seat = recipient_seat(thread.organization, thread.recipient)
    except Refusal as refusal:
        seat, error = None, refusal
    if seat is not None and RUN_KIND_MAIL not in run_triggers(seat.config or {}):
        error = Refusal(
            "trigger-not-allowed",
            f"{thread.recipient}'s run.triggers does not include {RUN_KIND_MAIL}; the mail waits in its vault.",
        )
    status = MailRun.Status.REFUSED if error else MailRun.Status.PENDING
    try:
        with transaction.atomic():
            run = MailRun.objects.create(
                organization_id=thread.organization_id,
                thread=thread,
                recipient=thread.recipient,
                status=status,
                error=error.as_error() if error else None,
                enqueued_at=None if error else timezone.now(),
                finished_at=timezone.now() if error else None,
            )
    except IntegrityError:  # told twice at once: the first one admitted it
        return MailRun.objects.get(thread=thread)
    if error is not None:
        ledger(
            thread.organization,
            RUN_DENIED,
            agent_principal(thread.recipient),
            thread.thread_id,
            runKind=RUN_KIND_MAIL,
            reason=error.reason,
            error=error.message,
        )
        logger.info("mail run of %s refused: %s", thread.thread_id, error.message)
    else:
        enqueue(RUN_TASK, run.pk)
    return run


def mail_session(org: Organization, seat: Seat) -> Session:
    """The agent's mail session ``mail:<slug>``, one per agent per organization, on its
    seat's kind, owned by the office (``WORKFORCE_OPEN_USER``)."""
    session, _ = Session.objects.get_or_create(
        organization=org,
        session_id=f"{RUN_KIND_MAIL}:{seat.seat_id}",
        defaults={
            "flow_kind": seat.kind,
            "user_id": settings.WORKFORCE_OPEN_USER,
            "state": {"seat": seat.seat_id, "runKind": RUN_KIND_MAIL},
        },
    )
    return session


def _mail_text(thread: Thread) -> str:
    first = next((m for m in thread.messages.all() if m.position == 0), None)
    return first.body if first is not None else ""


def _turn_line(thread: Thread) -> list[str]:
    text = _mail_text(thread)
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    sender = quoted_name(thread.sender)
    if not thread.subject or first.startswith(thread.subject.rstrip("…")):
        return [f"{sender} in {thread.thread_id}: {quoted(text)}"]  # the subject is the text's first line
    return [f"{sender} in {thread.thread_id}: {quoted(thread.subject)}", "", quoted(text)]


def mail_turn_text(thread: Thread, unseen: list[Thread]) -> str:
    """What the agent is prompted with: ``<sender> in <thread>: <subject>``, a blank line
    and the mail's text (``<sender> in <thread>: <text>`` when the subject is the text's
    first line), then each mail delivered to it without ``mail:new`` that no run showed
    yet, the same way under ``Also in your inbox, delivered without waking you:``.

    What a sender wrote (the subject, the text) is one physical line: text that is not
    one plain line is a JSON string literal (``workforce.framing``), so a mail cannot add
    a line that reads as the office's framing."""
    lines = _turn_line(thread)
    for other in unseen:
        lines += ["", "Also in your inbox, delivered without waking you:", *_turn_line(other)]
    return "\n".join(lines)


def _settle(
    run: MailRun, token: str, *, error: Refusal | None = None, request: Request | None = None, retry: bool = False
) -> None:
    """The run done, failed with ``error``, or (``retry``) pending again and enqueued
    with the commit, keeping ``error`` as its last failure; only while the claim
    ``token`` holds (else LeaseLost)."""
    if retry:
        fields: dict = {"status": MailRun.Status.PENDING, "claim_token": "", "lease_until": None, "enqueued_at": timezone.now()}
    else:
        fields = {"status": MailRun.Status.FAILED if error else MailRun.Status.DONE, "finished_at": timezone.now()}
    updated = MailRun.objects.filter(pk=run.pk, claim_token=token, status=MailRun.Status.RUNNING).update(
        error=error.as_error() if error else None,
        **fields,
        **({"request": request} if request is not None else {}),
    )
    if not updated:
        raise LeaseLost()


def _failed(run: MailRun, token: str, error: Refusal, request: Request | None) -> str:
    """Inside the transaction that ends the run: a run whose turn failed. Its mail goes
    back to ``mail:new`` once this commits (``do_return_mail``; the mail sweep repairs
    what a vault that failed then left), the failure is ledgered (``run.failed``:
    ``{runKind, reason, error, attempt, retried, requestId}``), and a failure in
    ``RETRIED_REASONS`` is run again while the run has claims left
    (``max_run_attempts()``). Returns ``"retried"`` or ``"failed"``."""
    retry = error.reason in RETRIED_REASONS and run.attempts < max_run_attempts()
    _settle(run, token, error=error, request=request, retry=retry)
    thread = run.thread
    ledger(
        run.organization,
        RUN_FAILED,
        agent_principal(thread.recipient),
        thread.thread_id,
        runKind=RUN_KIND_MAIL,
        reason=error.reason,
        error=error.message,
        attempt=run.attempts,
        retried=retry,
        requestId=request.request_id if request is not None else None,
    )
    logger.warning(
        "mail run %s of %s failed (attempt %s%s): %s",
        run.pk,
        thread.thread_id,
        run.attempts,
        ", run again" if retry else "",
        error.message,
    )
    transaction.on_commit(lambda: _back_to_new(run.pk, enqueue_again=retry))
    return "retried" if retry else "failed"


def _back_to_new(run_pk: int, *, enqueue_again: bool) -> None:
    """After a failed run committed: its mail back to ``mail:new``, then, for a run to
    run again, its task enqueued (its claim then marks the mail working again)."""
    run = MailRun.objects.select_related("thread", "organization").filter(pk=run_pk).first()
    if run is None:
        return
    try:
        do_return_mail(run.organization, run.thread)
    except Refusal as refusal:
        logger.warning("%s stays mail:working for now (the mail sweep moves it): %s", run.thread.thread_id, refusal.message)
    if enqueue_again:
        enqueue(RUN_TASK, run_pk)


def do_run_mail(run_pk: int) -> str:
    """Run one admitted mail run, once (the ``run_mail`` task's body). Never raises.

    A turn that fails sends the mail back to ``mail:new`` with the failure ledgered
    (``run.failed``), and a model failure runs the mail again while it has claims left
    (``_failed``); a turn that replied on (or closed) its mail before it failed did the
    run's work: the run is done, its failed request listed for operators.

    Returns ``"done"``, ``"failed"``, ``"retried"`` (pending again, enqueued),
    ``"waiting"`` (its agent is running a turn in its mail session: the run is enqueued
    again when that turn ends), ``"not-claimed"`` or ``"lease-lost"``.
    """
    now = timezone.now()
    token = claim_lease(MailRun, run_pk, now=now)
    if token is None:
        return "not-claimed"
    run = MailRun.objects.select_related("thread", "organization", "request").get(pk=run_pk)
    if run.request is not None and run.request.status == Request.Status.RUNNING:
        do_abort_request(
            run.request.pk, "the task running this mail stopped before it finished; the mail was run again.", now=now
        )
    thread, org = run.thread, run.organization
    try:
        try:
            seat = recipient_seat(org, thread.recipient)
        except Refusal as refusal:
            with transaction.atomic():
                return _failed(run, token, refusal, None)
        with transaction.atomic():
            session = mail_session(org, seat)
        # One turn at a time per seat per conversation: a second mail to a busy agent
        # hands its claim back and runs when the turn ahead of it ends.
        rule = SlotRule.leased(session, seat.seat_id, task=RUN_TASK, model=MailRun, pk=run.pk, token=token)
        mail_turn = _MailTurn(run, token, thread, org, seat, session)
        plan: TurnPlan[Turn, str] = TurnPlan(start=mail_turn.start, settle=mail_turn.settle, slot=rule, waiting="waiting")
        return drive_turn(TurnSpec.planned("mail", plan))
    except LeaseLost:
        logger.warning("mail run %s: the claim lapsed and another task took it over", run_pk)
        return "lease-lost"
    except Exception as exc:  # a bug: record it on the run, keep the cluster going
        logger.exception("mail run %s failed", run_pk)
        try:
            with transaction.atomic():
                return _failed(run, token, Refusal("internal-error", failure_text(exc)), None)
        except LeaseLost:
            return "lease-lost"


@dataclass
class _Unstarted:
    """A mail run's turn that never started: the vault refused to mark the mail working
    (``do_mark_working``), so there is no request, and the run fails with that refusal."""

    error: Refusal | None
    reply: str = ""
    request: Request | None = None

    def finish(self, *, output: dict | None = None) -> None:
        """Nothing: no turn was started."""


class _MailTurn:
    """A mail run's turn, for ``seats.turns.drive_turn`` (kind ``mail``). Its start
    waits for the run (``run_model``): the mail is moved to ``mail:working`` in the
    vault (a call to the mail store, kept out of the slot's transaction; a refusal
    there fails the run with no turn), then the ``onMail`` request starts, then the
    model runs."""

    def __init__(self, run: MailRun, token: str, thread: Thread, org: Organization, seat: Seat, session: Session) -> None:
        self.run, self.token, self.thread, self.org, self.seat, self.session = run, token, thread, org, seat, session
        self.unseen: list[Thread] = []

    def start(self) -> Callable[[], Turn]:
        """Inside the slot's transaction: nothing yet (see the class)."""
        return self.run_model

    def run_model(self) -> Turn:
        """Outside any transaction: mark the mail working, start the turn (noted on the
        run while its claim holds) and run the model."""
        run, token, org, seat, session = self.run, self.token, self.org, self.seat, self.session
        try:
            if self.thread.state == Thread.State.NEW:
                self.thread = do_mark_working(org, self.thread)
        except Refusal as refusal:
            return _Unstarted(error=refusal)
        thread = self.thread
        self.unseen = unseen = unseen_threads(org, thread.recipient, exclude=thread)
        text = mail_turn_text(thread, unseen)

        def note(request: Request) -> None:
            if not MailRun.objects.filter(pk=run.pk, claim_token=token).update(request=request):
                raise LeaseLost()

        log = start_turn(
            session,
            org=org,
            action=MAIL_RUN_ACTION,
            input={"thread": thread.thread_id, "runKind": RUN_KIND_MAIL},
            user_id=session.user_id,
            prompt={"role": "user", "text": text, "thread": thread.thread_id, "runKind": RUN_KIND_MAIL},
            on_started=note,
        )
        result = run_turn(
            seat,
            log,
            text=text,
            history=conversation_history(session, speaker=seat.seat_id, exclude_request_id=log.request.pk),
            tools=lambda: agent_tools(seat) + mail_run_tools(),
            extras={THREAD_EXTRA: thread.thread_id, "idempotency_prefix": f"mail{run.pk}"},
            reply_data={"thread": thread.thread_id},
        )
        result.output = {"thread": thread.thread_id, "runKind": RUN_KIND_MAIL}
        return result

    def settle(self, turn: Turn) -> str:
        """The run done, or its failure handled (``_failed``); what the turn showed
        marked seen. A turn that failed after its mail was replied on or closed did the
        run's work: the run is done (its request stays failed, with the model's error)."""
        if self.unseen and turn.request is not None:
            Thread.objects.filter(pk__in=[t.pk for t in self.unseen]).update(seen_at=timezone.now())
        error = turn.error
        if error is not None:
            state = Thread.objects.filter(pk=self.thread.pk).values_list("state", flat=True).first()
            if state not in (Thread.State.REPLIED, Thread.State.CLOSED):
                return _failed(self.run, self.token, error, turn.request)
        _settle(self.run, self.token, request=turn.request)
        return "done"


def do_sweep_mail(*, now=None) -> list[int]:
    """Recover mail the office was not told of or whose run was dropped: a mail indexed
    ``new`` with no run is admitted now (its vault's event was lost with its process);
    a run whose task is known lost is enqueued again (``workforce.leases.requeue_lost``);
    a run out of claims is failed (``run-abandoned``, ledgered ``run.failed``), or done
    when its mail was replied on or closed before its worker stopped; a mail
    left ``mail:working`` by a run that failed goes back to ``mail:new``
    (``do_return_mail``: its vault was unavailable when the run ended, or the process
    died first). Idempotent. Returns the runs enqueued again."""
    now = now or timezone.now()
    for thread in Thread.objects.filter(
        state=Thread.State.NEW, run__isnull=True, sent_at__lt=now - timedelta(seconds=SWEEP_GRACE_SECONDS)
    ).exclude(sender=UNKNOWN_SENDER):  # no sender the office recorded: it starts no run (mail.events)
        with transaction.atomic():
            admit_mail_run(thread)
    abandoned = MailRun.objects.filter(status=MailRun.Status.RUNNING, lease_until__lt=now, attempts__gte=max_run_attempts())
    for run in abandoned.select_related("thread", "organization", "request"):
        with transaction.atomic():
            if not MailRun.objects.filter(pk=run.pk, claim_token=run.claim_token, status=MailRun.Status.RUNNING).exists():
                continue
            if run.request is not None and run.request.status == Request.Status.RUNNING:
                do_abort_request(run.request.pk, "the task running this mail stopped before it finished.", now=now)
            if run.thread.state in (Thread.State.REPLIED, Thread.State.CLOSED):  # its work landed first
                _settle(run, run.claim_token or "", request=run.request)
                continue
            _failed(run, run.claim_token or "", Refusal("run-abandoned", "its turn never finished"), run.request)
    for thread in Thread.objects.filter(state=Thread.State.WORKING, run__status=MailRun.Status.FAILED).select_related(
        "organization"
    ):
        try:
            do_return_mail(thread.organization, thread)
        except Refusal as refusal:
            logger.warning("%s stays mail:working for now: %s", thread.thread_id, refusal.message)
    lost, waiting_again = lapsed_claim_q(now)
    done = requeue_lost(
        MailRun,
        lost=lost,
        waiting=Q(status=MailRun.Status.PENDING) | waiting_again,
        send=lambda pk: enqueue(RUN_TASK, pk),
        task=RUN_TASK,
        now=now,
    )
    return done.all
