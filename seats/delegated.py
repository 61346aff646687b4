"""The built-in agent kind as a coordinator's delegate (spec 004 "Making your own flow a
delegate": "A worker on the built-in agent flow can take posts as it is").

The agent declares the delegated-post entry around its door: the seat's ordinary turn,
run in the delegate's own session (one per coordinator conversation, a child of it),
with the message ``<from>, through <coordinator>: <post>`` as the turn text. The reply is
the answer. When a coordinator runs the entry it does so outside any transaction, so the
model call holds no lock.
"""
from __future__ import annotations

from workforce.delegation import delegated_post_entry
from workforce.refusals import Refusal
from workforce.sessions import ActionContext
from workforce.tools import ToolContext

from .queries import access_seat, list_conversation_messages
from .turn import run_turn

MESSAGE = "message"
TOOL_CALL = "tool-call"


def agent_delegated_door(ctx: ActionContext, data: dict) -> dict:
    """Run the seat's turn on a delegated post in ``ctx.session`` (the delegate's own
    session, whose state names the seat).

    Emits the turn text as a user message item and the reply as an assistant message
    item (``agentName`` the seat id); tool calls as ``tool-call`` items.

    Returns:
        ``{"text": reply}``.

    Raises:
        Refusal("seat-not-found"): the session names no seat the owner reaches.
        Refusal: the turn failed (``model-error``, ``turn-timeout``, ``empty-reply``, ...).
    """
    from .services import agent_tools

    session = ctx.session
    seat_id = (session.state or {}).get("seat") or ""
    seat = access_seat(ctx.org, session.user_id, seat_id)
    text = data["message"]
    delegated = dict(ctx.extras.get("delegated") or {})
    history = list_conversation_messages(session, exclude_request_id=ctx.request.pk)
    ctx.emit("", {"role": "user", "text": text, **_context(delegated)}, type=MESSAGE)
    prefix = delegated.get("idempotencyPrefix") or ctx.request.request_id
    tool_ctx = ToolContext(org=ctx.org, seat_id=seat.seat_id, session=session, request=ctx.request,
                           extras={"idempotency_prefix": prefix})
    result = run_turn(
        seat=seat, text=text, history=history, tools=agent_tools(seat), tool_ctx=tool_ctx,
        on_tool_call=lambda record: ctx.emit(TOOL_CALL, record),
    )
    if result.error is not None:
        raise result.error
    if not result.reply.strip():
        raise Refusal("empty-reply", f"{seat.seat_id} answered the delegated post with nothing; nothing is answered.")
    ctx.emit("", {"role": "assistant", "text": result.reply, "agentName": seat.seat_id}, type=MESSAGE)
    return {"text": result.reply}


def _context(delegated: dict) -> dict:
    keys = ("postId", "round", "coordinator", "filingSessionId")
    return {k: delegated[k] for k in keys if k in delegated}


AGENT_DELEGATED_POST = delegated_post_entry(agent_delegated_door, description="Run the seat's turn on a delegated post.")
