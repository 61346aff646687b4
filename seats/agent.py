"""The built-in ``agent`` kind (spec "The built-in agent kind", "A seat answering in the
mailbox"; 004 "Making your own flow a delegate").

A worker whose file names no ``flow:`` runs on it. Every way the kind is woken runs the
seat's one turn (``seats.turns.run_turn``) and records it in the one turn log; the
caller settles its own work item:

- a mailbox delivery: ``hear_post`` (its ``post_turn`` facet), run by
  ``mailboxes.deliveries.do_deliver`` with the model outside any transaction;
- ``onMailboxPost`` dispatched by another flow (``on_mailbox_post``): the turn starts in
  that action's request and transaction, under the seat's turn slot, and its model runs
  after that transaction commits (``workforce.sessions.AfterCommit``);
- a board row its drain claimed: ``work_board_row`` (its ``board_row_turn`` facet), run
  by ``seats.drains.run_board_row``;
- a coordinator's delegated post: ``on_delegated_post`` (the internal action
  ``onDelegatedPost``), run by ``coordinators.delivery``.

Facets (``workforce.facets``): ``worker``, ``hears_posts``, ``tools`` (the catalog a
worker's ``tools:`` line is read against: ``post-to-mailbox``), ``capabilities``
(``seats.board_tools.board_task_capability``, and ``seats.tool_servers.tool_server_capability``:
the tool servers' tools its ``tools:`` grants), ``post_turn``, ``board_row_turn`` and
``request_on_finished`` (``delegated_post_on_finished``: a coordinator hears at once
when a delegated run ends, cancelled included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from boards.models import BoardTask
from workforce.delegation import DELEGATED_POST_ENTRY, delegated_post_entry, delegated_post_on_finished
from workforce.dispatch import DispatchCall, dispatch, dispatch_once
from workforce.extras import TurnExtras
from workforce.facets import (
    BOARD_ROW_TURN,
    CAPABILITIES,
    HEARS_POSTS,
    POST_TURN,
    REQUEST_ON_FINISHED,
    TOOL_CATALOG,
    WORKER,
    AnswerSlot,
)
from workforce.flows import Action, FlowKind, registry
from workforce.models import Organization, Request, Session
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput, NotifyInput, recent_text, turn_text
from workforce.posted_by import seat_posted_by
from workforce.refusals import Refusal
from workforce.sessions import ActionContext, AfterCommit

from .board_tools import board_task_capability
from .capabilities import AGENT_CATALOG, ANSWER_EXTRA, MAILBOX_EXTRA
from .constants import SEAT_BUSY
from .drains import RUN_TASK_ACTION, row_turn_text
from .models import Seat
from .queries import access_seat, conversation_history
from .tool_servers import tool_server_capability
from .turns import (
    SlotRule,
    TurnLog,
    TurnPlan,
    TurnResult,
    TurnSpec,
    Wake,
    drive_turn,
    offered_tools,
    run_turn,
    start_turn,
)

logger = logging.getLogger(__name__)

KIND = "agent"


def agent_tools(seat: Seat) -> list:
    """What a seat of an agent kind is offered: its kind's catalog filtered by the
    seat's ``tools:``, plus what the kind's capabilities always give."""
    flow = registry.require(seat.kind)
    return offered_tools(seat, TOOL_CATALOG.get(flow) or {}, CAPABILITIES.get(flow) or [])


# ----------------------------------------------------------------------------- a mailbox post


def _post_prompt(text: str, notify_input: NotifyInput) -> dict:
    return {"role": "user", "text": text, "postId": notify_input["postId"], "mailboxId": notify_input["mailboxId"]}


def _post_extras(
    notify_input: NotifyInput, answer: AnswerSlot | None, key: str | None, mailbox: Session | None = None
) -> TurnExtras:
    extras = TurnExtras(post_id=notify_input["postId"], mailbox_id=notify_input["mailboxId"])
    if mailbox is not None:
        extras[MAILBOX_EXTRA] = mailbox
    if key:
        extras["idempotency_prefix"] = key
    if answer is not None:
        extras[ANSWER_EXTRA] = AnswerSlot(postId=answer["postId"], token=answer["token"])  # a copy
    # Only a routed post's answer lands in the mailbox as the turn's text; anything else
    # the seat says there, it posts with a tool.
    extras["preview_parent"] = answer is not None
    return extras


@dataclass
class StartedPostTurn:
    """A woken turn on a mailbox post, started (``begin_post_turn``) and not yet run:
    ``run()`` runs the model outside any transaction and returns the turn."""

    seat: Seat
    mailbox: Session
    log: TurnLog
    text: str
    history: list[dict]
    extras: TurnExtras
    notify_input: NotifyInput
    answer: AnswerSlot | None

    def run(self) -> TurnResult:
        """Run the model on the turn text (``seats.turns.run_turn``: the cancel check
        before each model call and each tool call included) and return the turn, which
        the caller finishes in the transaction that settles its delivery."""
        result = run_turn(
            self.seat,
            self.log,
            text=self.text,
            history=self.history,
            tools=lambda: agent_tools(self.seat),
            extras=self.extras,
            context=routed_context(self.notify_input) if self.answer else None,
        )
        if self.answer is not None:
            _answers_routed_post(result, self.seat, self.mailbox, self.answer)
        return result


def begin_post_turn(
    *,
    seat: Seat,
    mailbox: Session,
    conversation: Session,
    notify_input: NotifyInput,
    key: str,
    answer: AnswerSlot | None,
    on_started,
    org: Organization | None = None,
    parent: Request | int | None = None,
) -> StartedPostTurn:
    """Start the agent kind's woken turn inside the caller's transaction, with no
    SAVEPOINT of its own (a delivery claims, takes the turn slot and starts in one
    transaction): an ``onMailboxPost`` request on ``conversation`` (running, its parent
    ``parent``, the post's request), the turn text as a user message item,
    ``on_started(request)``, and the conversation's history read for the model.

    Args:
        org: the mailbox's organization, when the caller holds it (else read from
            ``mailbox``); parent: the post's request or its primary key; the other
            arguments are ``hear_post``'s.
    """
    text = turn_text(notify_input)
    log = start_turn(
        conversation,
        org=org or mailbox.organization,
        action=ON_MAILBOX_POST,
        input=notify_input,
        user_id=mailbox.user_id,
        prompt=_post_prompt(text, notify_input),
        on_started=on_started,
        parent=parent,
        savepoint=False,
    )
    history = conversation_history(conversation, speaker=seat.seat_id, exclude_request_id=log.request.pk)
    return StartedPostTurn(
        seat=seat,
        mailbox=mailbox,
        log=log,
        text=text,
        history=history,
        extras=_post_extras(notify_input, answer, key, mailbox),
        notify_input=notify_input,
        answer=answer,
    )


class HearPost:
    """The agent kind's ``post_turn`` facet (``hear_post``): a callable that starts and
    runs the turn, and ``begin`` (``begin_post_turn``) for a caller that starts it in its
    own transaction."""

    begin = staticmethod(begin_post_turn)

    def __call__(
        self,
        *,
        seat: Seat,
        mailbox: Session,
        conversation: Session,
        notify_input: NotifyInput,
        key: str,
        answer: AnswerSlot | None,
        on_started,
    ) -> TurnResult:
        """The agent kind's woken turn on a mailbox post, run by the mailbox's delivery
        with the delivery claimed, outside any transaction.

        Starts an ``onMailboxPost`` request on ``conversation`` (running, the turn text as
        a user message item; ``on_started(request)`` in the same transaction), runs the
        model, and returns the turn. The delivery then calls ``turn.finish()`` in the
        transaction that settles it: the reply as an assistant message item
        (``agentName`` the seat id), the request completed (``{reply, toolCalls}``) or
        failed, and, for a routed post (``answer`` set), the reply handed to the mailbox
        as the post's answer. Tool posts and the answer are dispatched with keys derived
        from ``key`` and the answer slot's token, so a turn run again after a crash hands
        each over once.
        """
        with transaction.atomic():
            started = begin_post_turn(
                seat=seat,
                mailbox=mailbox,
                conversation=conversation,
                notify_input=notify_input,
                key=key,
                answer=answer,
                on_started=on_started,
            )
        return started.run()


hear_post = HearPost()


MAILBOX_POST_WAKE = "seats.agent.on_mailbox_post"  # the wait's key only: it never outlives the refusal


def on_mailbox_post(ctx: ActionContext, validated: dict) -> AfterCommit:
    """The agent kind's ``onMailboxPost`` when another flow dispatches it directly (not
    through a delivery), run through ``seats.turns.drive_turn`` (kind ``mailbox-post``).

    Inside the action's transaction: the seat's turn slot in the session is taken and
    the turn started in the action's request (the turn text as a user message item).
    The model runs after that transaction commits, outside any transaction: the handler
    returns the rest of the turn as ``workforce.sessions.AfterCommit``, which
    ``do_run_action`` runs before the dispatch returns. The turn then finishes in one
    transaction: the reply item, the request completed (``{reply, toolCalls}``) and the
    slot freed. A failed turn fails the request with its error (what it started stays,
    as every turn's log does); a cancelled one leaves it ``aborted``. A dispatch runs at
    once or not at all and cannot wait in the task queue, so a seat already running a
    turn in the session refuses it (``seat-busy``, nothing written). Mailbox deliveries
    never come this way.

    Raises:
        Refusal("seat-not-found"): the session is not a seat's conversation.
        Refusal("seat-busy"): the seat is running a turn in the session.
    """
    data = cast(NotifyInput, validated)  # checked by its input serializer, MailboxNotifyInput
    session = ctx.session
    seat_id = (session.state or {}).get("seat") or session.session_id.rpartition(":")[2]
    seat = access_seat(ctx.org, session.user_id, seat_id)
    text = turn_text(data)
    answer: AnswerSlot | None
    if data.get("answerToken"):  # a room's post: the answer hands the seat's token back
        answer = AnswerSlot(postId=data["postId"], token=data["answerToken"])
    else:
        answer = AnswerSlot(postId=data["postId"], token="") if data.get("routed") else None

    def busy() -> None:
        raise Refusal(SEAT_BUSY, f"{seat.seat_id} is running a turn in {session.session_id}; dispatch this post again later.")

    def start() -> Callable[[], TurnResult]:
        history = conversation_history(session, speaker=seat.seat_id, exclude_request_id=ctx.request.pk)
        log = start_turn(session, prompt=_post_prompt(text, data), in_action=ctx)

        def run() -> TurnResult:
            result = run_turn(
                seat,
                log,
                text=text,
                history=history,
                tools=lambda: agent_tools(seat),
                extras=_post_extras(data, answer, None),
                context=routed_context(data) if answer else None,
            )
            if answer is not None:
                mailbox = Session.objects.filter(organization=ctx.org, session_id=data["mailboxId"]).first()
                _answers_routed_post(result, seat, mailbox, answer)
            return result

        return run

    def settle(result: TurnResult) -> dict | AfterCommit:
        # The request's end commits with the reply (a cancelled one stays aborted).
        if result.error is not None:
            ctx.end_running(error=result.error)
            return {}
        output = result.default_output()
        ctx.end_running(output=output)
        return output

    rule = SlotRule(session, seat.seat_id, Wake(MAILBOX_POST_WAKE, (ctx.request.pk,)), on_wait=busy)
    plan: TurnPlan[TurnResult, dict | AfterCommit] = TurnPlan(start=start, settle=settle, slot=rule, waiting={})
    later = drive_turn(TurnSpec.planned("mailbox-post", plan, later=AfterCommit))
    assert isinstance(later, AfterCommit)  # the slot was taken: a taken one refused above
    return later


def routed_context(notify_input: NotifyInput) -> list[dict]:
    """What a routed member's model sees with the post, for that one answer (spec "What
    the member sees when it answers"): one message listing the mailbox's last lines
    before the post. Never stored in the member's conversation."""
    return [{"role": "user", "content": recent_text(notify_input.get("recent") or [], notify_input["mailboxId"])}]


def _answers_routed_post(result: TurnResult, seat: Seat, mailbox: Session | None, answer: AnswerSlot) -> None:
    """A routed turn's reply is the post's answer (spec "The answer lands in the
    mailbox"): an empty reply fails the turn (``empty-reply``) unless the
    post-to-mailbox tool already handed an answer over; a reply is handed over when the
    turn finishes."""
    post_id = answer["postId"]
    if result.error is None and not result.reply.strip() and not result.extras.get("answer_handed"):
        result.error = Refusal(
            "empty-reply", f"{seat.seat_id} answered the routed post {post_id} with nothing; nothing was posted."
        )
    if mailbox is None:
        return

    def hand_over(turn: TurnResult) -> None:
        if turn.error is None and turn.reply.strip():
            hand_over_answer(
                org=turn.log.org,
                mailbox=mailbox,
                post_id=post_id,
                body=turn.reply,
                seat_id=seat.seat_id,
                parent_request=turn.request,
                idempotency_key=f"{answer['token']}:answer:reply" if answer["token"] else None,
                token=answer["token"] or None,
            )

    result.after.append(hand_over)


def hand_over_answer(
    *,
    org: Organization,
    mailbox: Session,
    post_id: str,
    body: str,
    seat_id: str,
    parent_request: Request | None,
    idempotency_key: str | None = None,
    token: str | None = None,
) -> Request | None:
    """Hand a routed member's answer to its mailbox's internal ``answer`` entry, by
    dispatch (author = the seat's id). With ``idempotency_key`` a repeated hand-over
    (a redelivered task) answers the first one's request. The mailbox decides whether
    it lands (one answer line per post); a refusal is a failed request on the mailbox's
    session and the seat is not told. ``token`` is the delivery's answer token, handed
    back with the answer (a room checks it: spec "A room per project"). Returns the
    mailbox's request, or None when the dispatch itself was refused (logged)."""
    kwargs = DispatchCall(
        org=org,
        kind=mailbox.flow_kind,
        session_id=mailbox.session_id,
        action="answer",
        payload={"postId": post_id, "body": body, "author": seat_id, **({"token": token} if token else {})},
        user_id=mailbox.user_id,
        parent_request=parent_request,
        posted_by=seat_posted_by(seat_id),
    )
    try:
        if idempotency_key:
            return dispatch_once(idempotency_key=idempotency_key, **kwargs)
        return dispatch(**kwargs)
    except Refusal as refusal:
        logger.warning("the answer of %s to post %s was not handed over: %s", seat_id, post_id, refusal.message)
        return None


# ----------------------------------------------------------------------------- a board row


@dataclass
class StartedRowTurn:
    """A turn on a board row, started (``begin_board_row``) and not yet run: ``run()``
    runs the model outside any transaction and returns the turn."""

    seat: Seat
    task: BoardTask
    log: TurnLog
    text: str

    def run(self) -> TurnResult:
        """Run the model on the row's turn text (no history: each row is its own turn)
        and return the turn, which the drain finishes with the row's settle."""
        task = self.task
        result = run_turn(
            self.seat,
            self.log,
            text=self.text,
            history=[],
            tools=lambda: agent_tools(self.seat),
            extras={"idempotency_prefix": task.task_id, "board_id": task.board_id, "task_id": task.task_id},
            reply_data={"taskId": task.task_id},
        )
        result.output = {"taskId": task.task_id}
        return result


def begin_board_row(*, task: BoardTask, seat: Seat, session: Session) -> StartedRowTurn:
    """Start ``seat``'s turn on the claimed row ``task`` inside the caller's transaction,
    with no SAVEPOINT of its own (``seats.turns.drive_turn``'s start step): a
    ``runTask`` request of the same row left running by a crashed worker is marked
    aborted, then a ``runTask`` request starts on the seat's board ``session`` (input
    ``{taskId, boardId, attempt}``) with the turn text as a user message."""
    text = row_turn_text(task)
    now = timezone.now()
    Request.objects.filter(
        session=session, action=RUN_TASK_ACTION, status=Request.Status.RUNNING, input__taskId=task.task_id
    ).update(
        status=Request.Status.ABORTED,
        finished_at=now,
        error=Refusal("aborted", "the task running this row stopped before it finished; the row was claimed again.").as_error(),
    )
    log = start_turn(
        session,
        action=RUN_TASK_ACTION,
        input={"taskId": task.task_id, "boardId": task.board_id, "attempt": task.attempts},
        user_id=session.user_id,
        started_at=now,
        prompt={"role": "user", "text": text, "taskId": task.task_id, "boardId": task.board_id},
        savepoint=False,
    )
    return StartedRowTurn(seat=seat, task=task, log=log, text=text)


class WorkBoardRow:
    """The agent kind's ``board_row_turn`` facet (``work_board_row``): a callable that
    starts and runs the turn, and ``begin`` (``begin_board_row``) for a caller that
    starts it in its own transaction (the drain, through ``seats.turns.drive_turn``)."""

    begin = staticmethod(begin_board_row)

    def __call__(self, *, task: BoardTask, seat: Seat, session: Session) -> TurnResult:
        """Run ``task`` as ``seat``'s turn, with the model outside any transaction, and
        return the turn (the caller finishes it; the reply is the row's output).

        The start (``begin_board_row``) commits in a transaction of its own. The model
        sees the seat's instructions and the turn text only (each row is its own turn)
        and is offered ``agent_tools(seat)``: its ``tools:`` and every board's task
        tools it holds. Tool posts are dispatched with keys derived from the row, so a
        turn run again hands each post over once. Finished, the request is completed
        (``{taskId, reply, toolCalls}``) or failed.
        """
        with transaction.atomic():
            started = begin_board_row(task=task, seat=seat, session=session)
        return started.run()


work_board_row = WorkBoardRow()


# ----------------------------------------------------------------------------- a delegated post


def on_delegated_post(ctx: ActionContext, data: dict) -> dict:
    """Run the seat's turn on a delegated post in ``ctx.session`` (the delegate's own
    session for one coordinator conversation, whose state names the seat), with the
    message ``<from>, through <coordinator>: <post>`` as the turn text (spec 004 "A
    worker on the built-in agent flow can take posts as it is"). The coordinator runs
    it outside any transaction, in a request it settles itself.

    Emits the turn text as a user message item and the reply as an assistant message
    item (``agentName`` the seat id); tool calls as ``tool-call`` items.

    Returns:
        ``{"text": reply}``.

    Raises:
        Refusal("seat-not-found"): the session names no seat the owner reaches.
        Refusal: the turn failed (``model-error``, ``turn-timeout``, ``empty-reply``, ...).
    """
    session = ctx.session
    seat = access_seat(ctx.org, session.user_id, (session.state or {}).get("seat") or "")
    text = data["message"]
    delegated = ctx.extras.get("delegated")
    history = conversation_history(session, speaker=seat.seat_id, exclude_request_id=ctx.request.pk)
    # The delegated post's facts the seat's prompt names (DelegatedRun's keys; none for a
    # direct dispatch).
    context: dict[str, Any] = {}
    if delegated:
        facts = {
            "postId": delegated.get("postId"),
            "round": delegated.get("round"),
            "coordinator": delegated.get("coordinator"),
            "filingSessionId": delegated.get("filingSessionId"),
        }
        context = {key: value for key, value in facts.items() if value is not None}
    log = start_turn(session, prompt={"role": "user", "text": text, **context}, in_action=ctx)
    result = run_turn(
        seat,
        log,
        text=text,
        history=history,
        tools=lambda: agent_tools(seat),
        extras=TurnExtras(idempotency_prefix=(delegated["idempotencyPrefix"] if delegated else "") or ctx.request.request_id),
    )
    if result.error is None and not result.reply.strip():
        result.error = Refusal("empty-reply", f"{seat.seat_id} answered the delegated post with nothing; nothing is answered.")
    if result.error is not None:
        raise result.error
    result.finish()
    if result.error is not None:  # cancelled before it settled
        raise result.error
    return {"text": result.reply}


AGENT_DELEGATED_POST = delegated_post_entry(on_delegated_post, description="Run the seat's turn on a delegated post.")


# ----------------------------------------------------------------------------- the kind


def build_agent_kind() -> FlowKind:
    """The built-in agent kind, registered once per process."""
    flow = FlowKind(
        kind=KIND,
        actions={},
        internal_actions={
            ON_MAILBOX_POST: Action(
                ON_MAILBOX_POST,
                on_mailbox_post,
                MailboxNotifyInput,
                description="Run the seat's turn on a post it heard.",
            ),
            # A coordinator's delegate (spec 004 "Making your own flow a delegate").
            DELEGATED_POST_ENTRY: AGENT_DELEGATED_POST,
        },
    )
    WORKER.set(flow, True)
    HEARS_POSTS.set(flow, True)
    TOOL_CATALOG.set(flow, dict(AGENT_CATALOG))
    CAPABILITIES.set(flow, [board_task_capability, tool_server_capability])
    POST_TURN.set(flow, hear_post)
    REQUEST_ON_FINISHED.set(flow, delegated_post_on_finished)
    BOARD_ROW_TURN.set(flow, work_board_row)
    return flow


def register() -> FlowKind:
    """Register the built-in agent kind (``SeatsConfig.ready``)."""
    return registry.register(build_agent_kind())
