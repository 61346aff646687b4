"""An agent seat's turn (issue 3, "The built-in agent kind").

The model sees the worker's instructions as the system prompt, the conversation's
messages inside its history window, and the turn text; it is offered the tools the
worker's ``tools:`` names (plus any a capability always gives). Tool calls run, their
results go back to the model, until it answers with text. Model calls happen outside any
database transaction, so a slow model never holds a lock.

A turn fails, with a named reason, when the provider fails or times out
(``model-error``), the turn passes its deadline (``turn-timeout``), the model keeps
calling tools past ``WORKFORCE_TURN_MAX_STEPS`` (``turn-step-limit``), or it answers
nothing at all (``empty-reply``).
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from django.conf import settings

from workforce.llm import ModelCall, ModelError, current_resolver
from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext

from .models import Seat

logger = logging.getLogger(__name__)


@dataclass
class TurnResult:
    """How a turn ended: ``reply`` (the model's last text), ``tool_calls`` (one record
    ``{name, arguments, result}`` per call, in order) and ``error`` (a Refusal when the
    turn failed)."""

    reply: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    error: Refusal | None = None


def model_timeout() -> float:
    """Seconds one model call may take (``WORKFORCE_MODEL_TIMEOUT``, default 60)."""
    return float(getattr(settings, "WORKFORCE_MODEL_TIMEOUT", 60))


def turn_timeout() -> float:
    """Seconds a whole turn may take (``WORKFORCE_TURN_TIMEOUT``, default 100); kept below
    the task cluster's ``timeout`` by a system check."""
    return float(getattr(settings, "WORKFORCE_TURN_TIMEOUT", 100))


def max_steps() -> int:
    """Model calls a turn may make (``WORKFORCE_TURN_MAX_STEPS``, default 8)."""
    return int(getattr(settings, "WORKFORCE_TURN_MAX_STEPS", 8))


def offered_tools(seat: Seat, catalog: dict[str, Tool], capabilities: list[Callable[[Seat], list[Tool]]] = ()) -> list[Tool]:
    """The tools a seat's model is offered: the catalog's tools its ``tools:`` names, in
    that order, then what each capability always gives. A tool the worker does not
    name is never offered."""
    tools = [catalog[name] for name in seat.tools if name in catalog]
    for capability in capabilities:
        tools.extend(capability(seat))
    return tools


def run_turn(
    *,
    seat: Seat,
    text: str,
    history: list[dict],
    tools: list[Tool],
    tool_ctx: ToolContext,
    on_tool_call: Callable[[dict], None] | None = None,
    timeout: float | None = None,
    context: list[dict] | None = None,
) -> TurnResult:
    """Run one turn of ``seat`` on ``text``; never raises for a failed turn.

    Args:
        seat: the hired seat (instructions, model).
        text: the turn text (``<writer> in <mailbox>: <body>`` for a woken seat).
        history: earlier chat messages of the conversation, oldest first.
        tools: what the model is offered (see ``offered_tools``).
        tool_ctx: handed to every tool call.
        on_tool_call: called with each ``{name, arguments, result}`` as it finishes.
        timeout: seconds the turn may take (default ``turn_timeout()``).
        context: chat messages the model sees right before the turn text, for this
            turn only (a routed member's recent lines); they are not history.

    Returns:
        TurnResult; ``error`` is set (reason ``model-error``, ``turn-timeout``,
        ``turn-step-limit``, ``empty-reply``) when the turn failed.
    """
    deadline = time.monotonic() + (turn_timeout() if timeout is None else timeout)
    messages: list[dict] = []
    if seat.instructions:
        messages.append({"role": "system", "content": seat.instructions})
    messages.extend(history)
    messages.extend(context or ())
    messages.append({"role": "user", "content": text})
    by_name = {tool.name: tool for tool in tools}
    schemas = [tool.openai_schema() for tool in tools]
    result = TurnResult()
    model_id = seat.model_id(settings.WORKFORCE_MODEL)
    try:
        model = current_resolver().resolve(model_id, block=seat.seat_id)
        for _ in range(max_steps()):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Refusal("turn-timeout", f"{seat.seat_id}'s turn passed its deadline before the model answered.")
            reply = model.complete(
                ModelCall(block=seat.seat_id, messages=messages, tools=schemas, timeout=min(model_timeout(), remaining))
            )
            if not reply.tool_calls:
                if not reply.text.strip() and not result.tool_calls:
                    raise Refusal("empty-reply", f"{model_id} answered {seat.seat_id}'s turn with nothing.")
                result.reply = reply.text
                return result
            messages.append(
                {"role": "assistant", "content": reply.text or None, "tool_calls": [c.as_message_part() for c in reply.tool_calls]}
            )
            for call in reply.tool_calls:
                outcome = _call_tool(by_name.get(call.name), call.name, call.arguments, tool_ctx)
                record = {"name": call.name, "arguments": call.arguments, "result": outcome}
                result.tool_calls.append(record)
                if on_tool_call is not None:
                    on_tool_call(record)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(outcome)})
        raise Refusal("turn-step-limit", f"{seat.seat_id} kept calling tools past {max_steps()} model calls.")
    except ModelError as exc:
        result.error = Refusal("model-error", str(exc))
        logger.warning("model call failed: seat %s, model %s: %s", seat.seat_id, model_id, exc)
    except Refusal as refusal:
        result.error = refusal
    return result


def _call_tool(tool: Tool | None, name: str, arguments: dict | None, ctx: ToolContext) -> dict:
    if tool is None:
        return {"ok": False, "reason": "tool-not-offered", "error": f'tool-not-offered: "{name}" is not one of your tools.'}
    if arguments is None:
        return {"ok": False, "reason": "invalid-input", "error": f"invalid-input: {name} takes a JSON object."}
    try:
        return tool.call(ctx, arguments)
    except Exception as exc:  # a tool must not take the turn down with it
        logger.exception("tool %s failed for %s", name, ctx.seat_id)
        return {"ok": False, "reason": "internal-error", "error": f"internal-error: {type(exc).__name__}: {exc}"}
