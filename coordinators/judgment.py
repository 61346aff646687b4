"""The coordinator's own turn and its tools (spec 004 "Setting one up", "Choosing how it
routes", "Changing the delegates").

The turn is the built-in worker's turn (``seats.turn.run_turn``): the coordinator's
model, instructions and ``tools:`` (read against the flow's catalog), plus the five
tools that come with the flow whatever ``tools:`` says: ``listDelegates``,
``addDelegate``, ``removeDelegate``, ``setFallback`` and ``handOff``. A tool hands a
refusal back to the model as ``{"refused": "<message>"}``. The delegate list is not in
the prompt: to say who its delegates are, the model calls ``listDelegates``.

``handOff`` is checked when it is called and takes effect when the turn ends: the
deliveries, the reply and the record are written together, once. The turn runs outside
any transaction.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from seats.models import Seat
from seats.turn import offered_tools, run_turn
from workforce.models import Request
from workforce.refusals import Refusal
from workforce.sessions import do_record_request, emit_item
from workforce.tools import Tool, ToolContext

from .config import CoordinatorSetup
from .constants import (
    ADD_DELEGATE,
    ALREADY_HANDED,
    HAND_OFF,
    JUDGMENT_ACTION,
    LIST_DELEGATES,
    NOT_A_DELEGATE,
    NOT_ON_ROSTER,
    REMOVE_DELEGATE,
    SET_FALLBACK,
    nothing_to_pass_on,
    no_worker_on_roster,
    not_a_delegate,
)
from .models import Answer, Conversation, DelegatedPost, Post
from .queries import conversation_messages, list_delegates, reachable_seats, round_answers

TOOL_CALL = "tool-call"
STATE = "coordinator"


@dataclass
class TurnOutcome:
    """How the coordinator's own turn ended: its ``reply``, the delegates it handed the
    post to (``handoffs``, in order), the ones its hand-offs skipped (record entries),
    and ``error`` (a Refusal) when it failed. ``request`` is the turn's request on the
    conversation (running until the outcome is recorded)."""

    request: Request
    reply: str = ""
    handoffs: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    error: Refusal | None = None


def turn_text_for(post: Post, number: int, answers: list[Answer]) -> str:
    """What the turn reads: the person's post (round 0), or, after round
    ``number - 1`` closed, that round's answers."""
    if number == 0:
        return post.text
    lines = "\n\n".join(f"{a.worker}: {a.text}" for a in answers)
    return (
        f"Round {number - 1} closed. The delegates answered the post \"{post.text}\":\n\n{lines}\n\n"
        f"Hand their answers on with handOff for round {number}, or answer yourself."
    )


def run_own_turn(
    conv: Conversation, coordinator: Seat | None, setup: CoordinatorSetup, post: Post, number: int,
    *, on_started=None,
) -> TurnOutcome:
    """Run the coordinator's own turn on round ``number`` of ``post`` (round 0: the post;
    later: the answers of the round before). Records a running ``judgment`` request on
    the conversation and ``tool-call`` items as tools finish; the caller records the
    outcome (``record_turn``). ``on_started(request)`` is called once the request
    exists (a job notes it, so a claim taken over later can abort it). Never raises for
    a failed turn."""
    session = conv.session
    request = do_record_request(session, action=JUDGMENT_ACTION, input={"postId": post.post_id, "round": number},
                                user_id=session.user_id, running=True)
    outcome = TurnOutcome(request=request)
    if on_started is not None:
        on_started(request)
    if coordinator is None:
        outcome.error = Refusal(NOT_ON_ROSTER, no_worker_on_roster(conv.worker))
        return outcome
    answers = round_answers(post.pk, number - 1) if number > 0 else []
    state = {"conversation": conv.pk, "post": post.pk, "round": number, "handoffs": outcome.handoffs,
             "skipped": outcome.skipped, "setup": setup}
    tool_ctx = ToolContext(org=session.organization, seat_id=coordinator.seat_id, session=session, request=request,
                           extras={STATE: state})
    tools = offered_tools(coordinator, setup.catalog, [*setup.capabilities, coordinator_tools])
    history = conversation_messages(session, exclude_request_id=post.request_id if number == 0 else None)

    def on_tool_call(record: dict) -> None:
        with transaction.atomic():
            emit_item(session, TOOL_CALL, record, request=request)

    result = run_turn(seat=coordinator, text=turn_text_for(post, number, answers), history=history, tools=tools,
                      tool_ctx=tool_ctx, on_tool_call=on_tool_call)
    outcome.reply = result.reply
    outcome.error = result.error
    return outcome


# ----------------------------------------------------------------------------- the tools


def _refused(refusal: Refusal) -> dict:
    return {"refused": refusal.message}


def _delegate_tool(change: str):
    def call(ctx: ToolContext, args: dict) -> dict:
        from .services import do_change_delegates

        try:
            with transaction.atomic():
                return do_change_delegates(ctx.org, ctx.session, ctx.session.user_id, change, args)
        except Refusal as refusal:
            return _refused(refusal)

    return call


def hand_off(ctx: ToolContext, args: dict) -> dict:
    """``handOff {worker}``: hand the post (or, after a round, the other delegates'
    answers) to a delegate; it goes out when the turn ends. Refused (``{refused}``) for
    a worker not on the list; skipped, and refused with the record's reason, for one
    that can't take it, was already handed it in this round, or (after a round) has no
    other delegate's answer to get."""
    state = ctx.extras.get(STATE) or {}
    worker = args.get("worker") if isinstance(args, dict) else None
    if not isinstance(worker, str) or not worker.strip() or set(args) - {"worker"}:
        return _refused(Refusal("invalid-input", "handOff takes {worker}: the id of one of your delegates."))
    from .policies import delegate_problem, entry, passing_on

    conv = Conversation.objects.select_related("session").get(pk=state["conversation"])
    if worker not in {d.worker for d in list_delegates(conv)}:
        return _refused(Refusal(NOT_A_DELEGATE, not_a_delegate(worker)))
    number = state["round"]
    seat = reachable_seats(conv.session.organization_id, conv.session.user_id, [worker]).get(worker)
    problem = delegate_problem(worker, seat, state["setup"])
    if problem is None and (
        worker in state["handoffs"]
        or DelegatedPost.objects.filter(post_id=state["post"], round=number, worker=worker).exists()
    ):
        problem = ALREADY_HANDED
    if problem is None and number > 0:
        post = Post.objects.get(pk=state["post"])
        if passing_on(post, number, round_answers(post.pk, number - 1), worker) is None:
            problem = nothing_to_pass_on(number - 1)
    if problem is not None:
        if not any(e["worker"] == worker and e.get("reason") == problem for e in state["skipped"]):
            state["skipped"].append(entry(worker, "skipped", problem))
        return _refused(Refusal("delegate-skipped", problem))
    state["handoffs"].append(worker)
    return {"handedOff": worker, "round": number}


WORKER_ARG = {"type": "string", "description": "A worker id, e.g. support.devices."}

COORDINATOR_TOOLS: dict[str, Tool] = {
    LIST_DELEGATES: Tool(
        LIST_DELEGATES, "List this conversation's delegates and its fallback.",
        {"type": "object", "properties": {}, "additionalProperties": False}, _delegate_tool("list"),
    ),
    ADD_DELEGATE: Tool(
        ADD_DELEGATE, "Bring a worker in as a delegate of this conversation. note: what to hand it (best fit picks by it).",
        {"type": "object", "properties": {"worker": WORKER_ARG, "note": {"type": "string"}}, "required": ["worker"],
         "additionalProperties": False},
        _delegate_tool("add"),
    ),
    REMOVE_DELEGATE: Tool(
        REMOVE_DELEGATE, "Take a delegate off this conversation's list.",
        {"type": "object", "properties": {"worker": WORKER_ARG}, "required": ["worker"], "additionalProperties": False},
        _delegate_tool("remove"),
    ),
    SET_FALLBACK: Tool(
        SET_FALLBACK, "Set the delegate that takes what best fit can't place (null clears it).",
        {"type": "object", "properties": {"worker": {"type": ["string", "null"]}}, "required": ["worker"],
         "additionalProperties": False},
        _delegate_tool("fallback"),
    ),
    HAND_OFF: Tool(
        HAND_OFF, "Hand this post to one of your delegates; call it once per delegate.",
        {"type": "object", "properties": {"worker": WORKER_ARG}, "required": ["worker"], "additionalProperties": False},
        hand_off,
    ),
}


def coordinator_tools(seat: Seat) -> list[Tool]:
    """The five tools that come with the coordinator flow, whatever ``tools:`` says (a
    capability of the coordinator's own turn)."""
    return list(COORDINATOR_TOOLS.values())
