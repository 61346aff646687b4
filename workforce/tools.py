"""Tools a seat's model can call (the spec's capabilities hand these to a kind).

A Tool is a name, a description, a JSON-schema for its arguments and a function. Tools
never raise for expected failures: every tool refuses in one shape,
``{"refused": "<code>: <sentence>"}`` (``refuse``/``refused``), the shape spec 004 gives
the coordinator's tools, with the code the refusal has elsewhere kept exactly as the
message's first word (a spec reason such as ``invalid-input``, or a task tool's
``task_not_found``). See docs/architecture.md "How a tool says no".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from .extras import TurnExtras
from .refusals import Refusal

if TYPE_CHECKING:  # annotations only: boards.errors imports this module before the models load
    from .models import Organization, Request, Session


class ToolRefusal(TypedDict):
    """A tool's answer when it says no: ``{"refused": "<code>: <sentence>"}``."""

    refused: str


def refuse(code: str, detail: str) -> ToolRefusal:
    """The one refusal shape: ``{"refused": "<code>: <detail>"}``.

    Args:
        code: the refusal's code, exactly as the spec (or the task tools) spell it:
            ``invalid-input``, ``task_not_found``.
        detail: a sentence for the model.
    """
    return {"refused": f"{code}: {detail}"}


def refused(refusal: Refusal) -> ToolRefusal:
    """``refuse(refusal.reason, refusal.detail)``: a Refusal as a tool's answer."""
    return refuse(refusal.reason, refusal.detail)


def refusal_code(result: Mapping[str, Any]) -> str | None:
    """The code of a tool's refusal (the word before the first ``": "``), or None when
    ``result`` is not a refusal."""
    message = result.get("refused")
    if not isinstance(message, str):
        return None
    return message.partition(": ")[0]


# What a tool answers (JSON the model reads): its own keys when it acted, or a refusal
# (``ToolRefusal``).
ToolResult = Mapping[str, object]


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
        deadline: the ``time.monotonic()`` by which the calling turn must end, when it
            has one: a tool that waits on something outside (a tool server) waits at
            most until then (``seconds_left``).
    """

    org: Organization
    seat_id: str
    session: Session | None = None
    request: Request | None = None
    extras: TurnExtras = field(default_factory=lambda: TurnExtras())
    deadline: float | None = None

    def seconds_left(self, most: float) -> float:
        """``most`` seconds, or fewer when the turn's deadline comes sooner (never below 0)."""
        if self.deadline is None:
            return most
        return max(0.0, min(most, self.deadline - time.monotonic()))


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
