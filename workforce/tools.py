"""Tools a seat's model can call (the spec's capabilities hand these to a kind).

A Tool is a name, a description, a JSON-schema for its arguments and a function. Tools
never raise for expected failures: they answer a ``ToolRefusal`` (``{"ok": false,
"reason", "error"}``), ``{"ok": false, "error": <code>, "message"}`` (task tools) or
``{"refused": ...}`` (coordinator tools) so the model can read the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypedDict

from .extras import TurnExtras
from .models import Organization, Request, Session

if TYPE_CHECKING:  # pragma: no cover
    from .refusals import Refusal

# What a tool answers (JSON the model reads): its own keys when it acted, or a refusal
# (``ToolRefusal``; the board tools and the coordinator's say it their own way for now).
ToolResult = Mapping[str, object]


class ToolRefusal(TypedDict):
    """A call a tool refused: ``{"ok": false, "reason": <code>, "error": <sentence>}``
    (``tool_refusal``), as the model reads it."""

    ok: Literal[False]
    reason: str
    error: str


def tool_refusal(refusal: Refusal) -> ToolRefusal:
    """``refusal`` as a tool's answer (``ToolRefusal``)."""
    return {"ok": False, "reason": refusal.reason, "error": refusal.message}


@dataclass
class ToolContext:
    """Who is calling a tool and from where.

    Attributes:
        org: the organization the seat runs in.
        seat_id: the calling seat's id (the name a mailbox's ``members:`` lists).
        session: the seat's own conversation session.
        request: the request the seat's turn runs in, when there is one.
        extras: turn-scoped facts (``workforce.extras.TurnExtras``: e.g. the routed post
            this turn answers).
    """

    org: Organization
    seat_id: str
    session: Session | None = None
    request: Request | None = None
    extras: TurnExtras = field(default_factory=lambda: TurnExtras())


@dataclass(frozen=True)
class Tool:
    """One callable tool.

    Args:
        name: the wire name the model sees (``post-to-mailbox``, ``addTask_<suffix>``).
        description: what it does, for the model.
        parameters: a JSON-schema object for its arguments (``additionalProperties`` false
            where the spec says the input is exactly a set of keys).
        call: ``call(ctx, args) -> ToolResult`` (a JSON object).
    """

    name: str
    description: str
    parameters: dict
    call: Callable[[ToolContext, dict], ToolResult]

    def openai_schema(self) -> dict:
        """The tool as an OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }
