"""Chat beside mail (spec "Mail versus chat"): a person's conversation with one agent,
started by humans only, stored in the office database, run kind ``chat``.

``POST /api/workers/{worker}/chat`` ``{"userId"?, "message"}`` starts a turn of the
worker's seat in the person's chat session ``chat:<worker>:<user>``, a session on the
``chat`` kind, which is private (``private_sessions``: only the person reads it, another
user gets 404) and which no client creates by an action. Admission needs ``chat`` in
the worker's ``run: {triggers: [...]}`` (``trigger-not-allowed``, 409, nothing
written). The turn's request (action ``onChat``, input ``{message, worker, runKind:
"chat"}``) answers 202 at once, running; the turn runs on the task cluster
(``mail.tasks.run_chat``) through ``seats.turns`` with the seat's history in that
session, and the request completes with ``{reply, toolCalls, runKind}``. The person's
message lands in that session as a user message item whose ``postedBy`` is the caller
the API, the page or the MCP server resolved (kept on the ``ChatRun`` until the turn
writes it; docs/architecture.md "Who said what"), and the agent's reply as an assistant
message item whose ``postedBy`` is its seat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from seats.agent import agent_tools
from seats.queries import access_seat, conversation_history
from seats.turns import MESSAGE, SlotRule, TurnLog, TurnPlan, TurnResult, TurnSpec, drive_turn, run_turn, start_turn
from seats.workers import run_triggers
from workforce.backlog import check_backlog
from workforce.dispatch import enqueue
from workforce.facets import CLIENT_CREATES_SESSIONS, PRIVATE_SESSIONS
from workforce.flows import FlowKind, registry
from workforce.leases import LeaseLost, claim_lease, lapsed_claim_q, requeue_lost
from workforce.models import Organization, Request, Session
from workforce.posted_by import PostedBy, as_posted_by
from workforce.refusals import Refusal
from workforce.sessions import check_idempotent_replay, find_idempotent_request
from workforce.wire import check_text

from .models import ChatRun

logger = logging.getLogger(__name__)

CHAT_KIND = "chat"
RUN_KIND_CHAT = "chat"
CHAT_ACTION = "onChat"
CHAT_TASK = "mail.tasks.run_chat"


def build_chat_kind() -> FlowKind:
    """The ``chat`` kind: sessions only the office creates, private to their owner."""
    flow = FlowKind(kind=CHAT_KIND, actions={}, internal_actions={})
    PRIVATE_SESSIONS.set(flow, True)
    CLIENT_CREATES_SESSIONS.set(flow, False)
    return flow


def register() -> FlowKind:
    """Register the ``chat`` kind once per process (``MailConfig.ready``)."""
    return registry.get(CHAT_KIND) or registry.register(build_chat_kind())


def chat_session_id(worker: str, user_id: str) -> str:
    """``chat:<worker>:<user>``: one chat session per person per worker."""
    return f"{CHAT_KIND}:{worker}:{user_id}"


def seat_takes_chat(seat) -> bool:
    """True when the hired ``seat`` may be chatted with: its ``run.triggers`` include
    ``chat`` (else ``do_start_chat`` refuses ``trigger-not-allowed``)."""
    return RUN_KIND_CHAT in run_triggers(seat.config or {})


def takes_chat(org: Organization, user_id: str, worker: str) -> bool:
    """True when ``user_id`` in ``org`` reaches a worker ``worker`` that takes chat
    (what ``do_start_chat`` checks before it starts a turn)."""
    try:
        seat = access_seat(org, user_id, worker)
    except Refusal:
        return False
    return seat_takes_chat(seat)


def do_start_chat(
    org: Organization,
    *,
    user_id: str,
    worker: str,
    message: object,
    posted_by: PostedBy | None,
    idempotency_key: str | None = None,
) -> Request:
    """Start a chat turn of ``worker`` for person ``user_id`` (see the module docstring).

    ``posted_by`` is the caller's ``Principal.posted_by``, never anything a client sent:
    the person's message item carries it as its ``postedBy`` (None: none).

    Returns the turn's request, running. With ``idempotency_key`` (the caller's
    ``Idempotency-Key``, at most 255 characters) the key is kept on that request, as the
    action endpoint keeps it (``workforce.sessions``, one key space per person in the
    organization): a retry with the same key and the same worker and message answers the
    first turn's request (``replayed``), and starts no second turn, also when both
    arrive at once (the key's unique index lets one commit; the other waits for it and
    answers it).

    Raises:
        Refusal("invalid-input"): an empty or too long message, or text the store cannot
            keep in it or in ``worker`` (``workforce.wire``).
        Refusal("recipient-not-found"): no worker ``worker`` the person reaches.
        Refusal("trigger-not-allowed"): the worker's run.triggers lacks ``chat``.
        Refusal("idempotency-key-reused"): the key was used for another call.
        Refusal("backlog-full"): past ``WORKFORCE_BACKLOG_LIMIT`` (``workforce.backlog``);
            nothing was started.
    """
    if not isinstance(message, str) or not message.strip():
        raise Refusal("invalid-input", "message: what to say may not be empty.")
    if len(message) > settings.WORKFORCE_MAX_TEXT_CHARS:
        raise Refusal("invalid-input", f"message: at most {settings.WORKFORCE_MAX_TEXT_CHARS} characters.")
    check_text(message, label="message")
    check_text(worker, label="worker")
    try:
        seat = access_seat(org, user_id, worker)
    except Refusal as refusal:
        raise Refusal("recipient-not-found", f'No agent "{worker}" is hired here.') from refusal
    if not seat_takes_chat(seat):
        raise Refusal("trigger-not-allowed", f"{worker}'s run.triggers does not include {RUN_KIND_CHAT}; it takes no chat.")
    session_id = chat_session_id(worker, user_id)
    input = {"message": message, "worker": worker, "runKind": RUN_KIND_CHAT}
    if idempotency_key:
        replayed = _replay(org, user_id, idempotency_key, session_id, input)
        if replayed is not None:
            return replayed
    check_backlog()  # a new turn for the cluster: refused past the bound, before anything is written
    try:
        with transaction.atomic():
            session, _ = Session.objects.get_or_create(
                organization=org,
                session_id=session_id,
                defaults={"flow_kind": CHAT_KIND, "user_id": user_id, "state": {"seat": worker, "runKind": RUN_KIND_CHAT}},
            )
            log = start_turn(
                session,
                org=org,
                action=CHAT_ACTION,
                input=input,
                user_id=user_id,
                prompt=None,  # written when the turn runs, so one turn's items never interleave another's
                on_started=(lambda request: _keep_key(request, idempotency_key)) if idempotency_key else None,
            )
            run = ChatRun.objects.create(
                organization=org, request=log.request, seat_id=worker, posted_by=posted_by, enqueued_at=timezone.now()
            )
            enqueue(CHAT_TASK, run.pk)
    except IntegrityError:
        # A call with the same key committed first (its UPDATE below waited for it): its
        # turn is the one, this one is rolled back whole.
        replayed = _replay(org, user_id, idempotency_key, session_id, input) if idempotency_key else None
        if replayed is None:
            raise
        return replayed
    return log.request


def _keep_key(request: Request, key: str) -> None:
    """Put the Idempotency-Key on the turn's request, inside the transaction that starts
    it: the key's unique index (``request_unique_idempotency_key``) holds a second
    caller's UPDATE until this one commits, then refuses it (IntegrityError)."""
    request.idempotency_key = key
    Request.objects.filter(pk=request.pk).update(idempotency_key=key)


def _replay(org: Organization, user_id: str, key: str, session_id: str, input: dict) -> Request | None:
    """The request a used ``key`` answers (``workforce.sessions``' rule), or None."""
    existing = find_idempotent_request(org, user_id, key)
    if existing is None:
        return None
    return check_idempotent_replay(existing, session_id=session_id, action=CHAT_ACTION, input=input)


def _settle(run: ChatRun, token: str, error: Refusal | None) -> None:
    if not ChatRun.objects.filter(pk=run.pk, claim_token=token, status=ChatRun.Status.RUNNING).update(
        status=ChatRun.Status.FAILED if error else ChatRun.Status.DONE,
        finished_at=timezone.now(),
        error=error.as_error() if error else None,
    ):
        raise LeaseLost()


def _finish(run: ChatRun, token: str, request: Request, error: Refusal) -> str:
    """A chat turn refused before it ran (its agent is gone): the request and the run
    failed together."""
    with transaction.atomic():
        Request.objects.filter(pk=request.pk).update(
            status=Request.Status.FAILED, error=error.as_error(), finished_at=timezone.now()
        )
        _settle(run, token, error)
    return "failed"


def do_run_chat(run_pk: int) -> str:
    """Run one chat turn, once (the ``run_chat`` task's body). Never raises. Returns
    ``done``, ``failed``, ``waiting`` (the agent is still answering this person's last
    message: the run is enqueued again when that turn ends), ``not-claimed`` or
    ``lease-lost``."""
    token = claim_lease(ChatRun, run_pk)
    if token is None:
        return "not-claimed"
    run = ChatRun.objects.select_related("organization", "request", "request__session").get(pk=run_pk)
    request, session, org = run.request, run.request.session, run.organization
    log = TurnLog(org=org, session=session, request=request)
    try:
        try:
            seat = access_seat(org, session.user_id, run.seat_id)
        except Refusal as refusal:
            return _finish(run, token, request, refusal)
        else:
            # One turn at a time per seat per conversation: a message sent while the agent
            # still answers the last one runs when that turn ends.
            rule = SlotRule.leased(session, seat.seat_id, task=CHAT_TASK, model=ChatRun, pk=run.pk, token=token)

            def start() -> Callable[[], TurnResult]:
                if not request.items.filter(type=MESSAGE).exists():  # once, also when run again after a crash
                    said: dict = {"role": "user", "text": request.input["message"], "runKind": RUN_KIND_CHAT}
                    asked_by = as_posted_by(run.posted_by)  # read with the run: no query of its own
                    if asked_by is not None:
                        said["postedBy"] = asked_by
                    log.message(said)

                def run_model() -> TurnResult:
                    result = run_turn(
                        seat,
                        log,
                        text=request.input["message"],
                        history=conversation_history(session, speaker=seat.seat_id, exclude_request_id=request.pk),
                        tools=lambda: agent_tools(seat),
                        extras={"idempotency_prefix": f"chat{run.pk}"},
                    )
                    result.output = {"runKind": RUN_KIND_CHAT}
                    return result

                return run_model

            def settle(result: TurnResult) -> str:
                _settle(run, token, result.error)
                return "failed" if result.error else "done"

            plan: TurnPlan[TurnResult, str] = TurnPlan(start=start, settle=settle, slot=rule, waiting="waiting")
            return drive_turn(TurnSpec.planned("chat", plan))
    except LeaseLost:
        logger.warning("chat run %s: the claim lapsed and another task took it over", run_pk)
        return "lease-lost"


def do_sweep_chats(*, now=None) -> list[int]:
    """Enqueue again the chat turns whose task is known lost (``requeue_lost``)."""
    now = now or timezone.now()
    lost, waiting_again = lapsed_claim_q(now)
    return requeue_lost(
        ChatRun,
        lost=lost,
        waiting=Q(status=ChatRun.Status.PENDING) | waiting_again,
        send=lambda pk: enqueue(CHAT_TASK, pk),
        task=CHAT_TASK,
        now=now,
    ).all
