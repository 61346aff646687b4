"""The coordinator's own turn and its tools (spec 004 "Setting one up", "Choosing how it
routes", "Changing the delegates").

The turn is the seats' one turn (``seats.turns.run_turn``, recorded in the one turn
log as a ``judgment`` request on the conversation): the coordinator's
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
from typing import Final

from django.db import transaction

from seats.models import Seat
from seats.queries import conversation_history, reachable_seats
from seats.turns import TurnResult, offered_tools, run_turn, start_turn
from workforce.framing import literal, quoted, quoted_name
from workforce.models import Request
from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext, ToolResult, refused

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
    judgment_agent_name,
    no_worker_on_roster,
    not_a_delegate_to_hand,
    nothing_to_pass_on,
)
from .delegates import do_change_delegates
from .models import Answer, Conversation, DelegatedPost, Post
from .policies import delegate_problem, entry, passing_on
from .queries import list_delegates, round_answers

STATE: Final = "coordinator"


@dataclass
class TurnOutcome:
    """How the coordinator's own turn ended: the ``turn`` (its reply, its error, its
    request on the conversation, running until ``turn.finish()`` records it), the
    delegates it handed the post to (``handoffs``, in order) and the ones its
    hand-offs skipped (record entries)."""

    turn: TurnResult
    handoffs: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    @property
    def request(self) -> Request:
        """The turn's ``judgment`` request."""
        return self.turn.request

    @property
    def reply(self) -> str:
        return self.turn.reply

    @property
    def error(self) -> Refusal | None:
        return self.turn.error


def turn_text_for(post: Post, number: int, answers: list[Answer]) -> str:
    """What the turn reads: the person's post (round 0), or, after round
    ``number - 1`` closed, that round's answers."""
    if number == 0:
        return post.text
    # What the post and the answers say is quoted (workforce.framing): it cannot add a
    # line that reads as another delegate's answer or as the office's instruction.
    lines = "\n\n".join(f"{quoted_name(a.worker)}: {quoted(a.text)}" for a in answers)
    return (
        f"Round {number - 1} closed. The delegates answered the post {literal(post.text)}:\n\n{lines}\n\n"
        f"Hand their answers on with handOff for round {number}, or answer yourself."
    )


def run_own_turn(
    conv: Conversation,
    coordinator: Seat | None,
    setup: CoordinatorSetup,
    post: Post,
    number: int,
    *,
    on_started=None,
) -> TurnOutcome:
    """Run the coordinator's own turn on round ``number`` of ``post`` (round 0: the post;
    later: the answers of the round before), outside any transaction. Starts a running
    ``judgment`` request on the conversation (``on_started(request)`` in the same
    transaction: a job notes it, so a claim taken over later can abort it) with no
    prompt item (what it reads is already in the conversation), and records
    ``tool-call`` items as tools finish; the caller finishes the turn when it records
    the outcome (``coordinators.jobs.record_turn``). Never raises for a failed turn."""
    session = conv.session
    log = start_turn(
        session,
        action=JUDGMENT_ACTION,
        input={"postId": post.post_id, "round": number},
        user_id=session.user_id,
        prompt=None,
        on_started=on_started,
    )
    name = judgment_agent_name(conv.worker)
    reply_data = {"postId": post.post_id, "round": number}
    if coordinator is None:
        return TurnOutcome(
            turn=TurnResult(
                log=log, error=Refusal(NOT_ON_ROSTER, no_worker_on_roster(conv.worker)), agent_name=name, reply_data=reply_data
            )
        )
    answers = round_answers(post.pk, number - 1) if number > 0 else []
    handoffs: list[str] = []
    skipped: list[dict] = []
    state = {"conversation": conv.pk, "post": post.pk, "round": number, "handoffs": handoffs, "skipped": skipped, "setup": setup}
    tools = offered_tools(coordinator, setup.catalog, [*setup.capabilities, coordinator_tools])
    history = conversation_history(session, speaker=name, exclude_request_id=post.request_id if number == 0 else None)
    turn = run_turn(
        coordinator,
        log,
        text=turn_text_for(post, number, answers),
        history=history,
        tools=tools,
        extras={STATE: state},
        agent_name=name,
        reply_data=reply_data,
    )
    return TurnOutcome(turn=turn, handoffs=handoffs, skipped=skipped)


# ----------------------------------------------------------------------------- the tools


def _delegate_tool(change: str):
    def call(ctx: ToolContext, args: dict) -> ToolResult:
        try:
            if ctx.session is None:  # a coordinator's tools run in its conversation's turn
                raise Refusal("session-not-found", "this tool runs in a coordinator's conversation only.")
            with transaction.atomic():
                return do_change_delegates(ctx.org, ctx.session, ctx.session.user_id, change, args)
        except Refusal as refusal:
            return refused(refusal)

    return call


def hand_off(ctx: ToolContext, args: dict) -> ToolResult:
    """``handOff {worker}``: hand the post (or, after a round, the other delegates'
    answers) to a delegate; it goes out when the turn ends. Refused (``{refused}``) for
    a worker not on the list; skipped, and refused with the record's reason, for one
    that can't take it, was already handed it in this round, or (after a round) has no
    other delegate's answer to get."""
    state = ctx.extras.get(STATE) or {}
    worker = args.get("worker") if isinstance(args, dict) else None
    if not isinstance(worker, str) or not worker.strip() or set(args) - {"worker"}:
        return refused(Refusal("invalid-input", "handOff takes {worker}: the id of one of your delegates."))
    conv = Conversation.objects.select_related("session").get(pk=state["conversation"])
    problem: str | None
    if worker not in {d.worker for d in list_delegates(conv)}:
        problem = not_a_delegate_to_hand(worker)
        if not any(e["worker"] == worker and e.get("reason") == problem for e in state["skipped"]):
            state["skipped"].append(entry(worker, "skipped", problem))
        return refused(Refusal(NOT_A_DELEGATE, problem))
    number = state["round"]
    seat = reachable_seats(conv.session.organization_id, conv.session.user_id, [worker]).get(worker)
    problem = delegate_problem(worker, seat, state["setup"])
    if problem is None and (
        worker in state["handoffs"] or DelegatedPost.objects.filter(post_id=state["post"], round=number, worker=worker).exists()
    ):
        problem = ALREADY_HANDED
    if problem is None and number > 0:
        post = Post.objects.get(pk=state["post"])
        if passing_on(post, number, round_answers(post.pk, number - 1), worker) is None:
            problem = nothing_to_pass_on(number - 1)
    if problem is not None:
        if not any(e["worker"] == worker and e.get("reason") == problem for e in state["skipped"]):
            state["skipped"].append(entry(worker, "skipped", problem))
        return refused(Refusal("delegate-skipped", problem))
    state["handoffs"].append(worker)
    return {"handedOff": worker, "round": number}


WORKER_ARG = {"type": "string", "description": "A worker id, e.g. support.devices."}

COORDINATOR_TOOLS: dict[str, Tool] = {
    LIST_DELEGATES: Tool(
        LIST_DELEGATES,
        "List this conversation's delegates and its fallback.",
        {"type": "object", "properties": {}, "additionalProperties": False},
        _delegate_tool("list"),
    ),
    ADD_DELEGATE: Tool(
        ADD_DELEGATE,
        "Bring a worker in as a delegate of this conversation. note: what to hand it (best fit picks by it).",
        {
            "type": "object",
            "properties": {"worker": WORKER_ARG, "note": {"type": "string"}},
            "required": ["worker"],
            "additionalProperties": False,
        },
        _delegate_tool("add"),
    ),
    REMOVE_DELEGATE: Tool(
        REMOVE_DELEGATE,
        "Take a delegate off this conversation's list.",
        {"type": "object", "properties": {"worker": WORKER_ARG}, "required": ["worker"], "additionalProperties": False},
        _delegate_tool("remove"),
    ),
    SET_FALLBACK: Tool(
        SET_FALLBACK,
        "Set the delegate that takes what best fit can't place (null clears it).",
        {
            "type": "object",
            "properties": {"worker": {"type": ["string", "null"]}},
            "required": ["worker"],
            "additionalProperties": False,
        },
        _delegate_tool("fallback"),
    ),
    HAND_OFF: Tool(
        HAND_OFF,
        "Hand this post to one of your delegates; call it once per delegate.",
        {"type": "object", "properties": {"worker": WORKER_ARG}, "required": ["worker"], "additionalProperties": False},
        hand_off,
    ),
}


def coordinator_tools(seat: Seat) -> list[Tool]:
    """The five tools that come with the coordinator flow, whatever ``tools:`` says (a
    capability of the coordinator's own turn)."""
    return list(COORDINATOR_TOOLS.values())
