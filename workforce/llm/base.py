"""What every model provider speaks.

Messages are OpenAI chat messages (``{"role": "system"|"user"|"assistant"|"tool", ...}``),
tools OpenAI ``tools`` entries (``Tool.openai_schema()``): the common format every
OpenAI-compatible server reads, and the one the embedded and mock models read too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

MODEL_ERROR = "model-error"
MODEL_TRUNCATED = "model-truncated"


class ModelError(Exception):
    """A model call failed: the provider refused, errored, or gave no answer within the
    call's timeout. The message names the model (``openai/gpt-4o-mini: ...``).

    Args:
        message: what happened, naming the model (and the server's status and message
            when it answered an error).
        reason: the reason code a failed turn records: ``model-error`` (default), or
            ``model-truncated`` when the answer was cut off at the model's output limit
            (``finish_reason: "length"``).
    """

    def __init__(self, message: str = "", *, reason: str = MODEL_ERROR):
        super().__init__(message)
        self.reason = reason

    def __reduce__(self):
        return (_model_error, (str(self), self.reason))


def _model_error(message: str, reason: str) -> ModelError:
    return ModelError(message, reason=reason)


@dataclass(frozen=True)
class ToolCall:
    """One tool call a model asked for.

    ``arguments`` is the parsed JSON object, or ``None`` when the model sent something
    that is not a JSON object (``raw_arguments`` keeps what it sent).
    """

    id: str
    name: str
    arguments: dict | None
    raw_arguments: str = ""

    def as_message_part(self) -> dict:
        """The call as an assistant message's ``tool_calls`` entry."""
        raw = self.raw_arguments or json.dumps(self.arguments or {})
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": raw}}


@dataclass(frozen=True)
class ModelReply:
    """A model's answer: text, and the tool calls it asks for (none: the turn ends)."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass
class ModelCall:
    """One call to a model.

    Attributes:
        block: the name of the block calling (an agent turn passes its seat id, e.g.
            ``support.devices``); mock resolvers are scripted by it.
        messages: OpenAI chat messages, system prompt first.
        tools: OpenAI ``tools`` entries offered on this call (may be empty).
        timeout: seconds the call may take before it fails with ModelError, a
            provider's retries and their waits included.
        on_text: called with each piece of the answer's text as the model writes it
            (a provider that streams calls it per delta; one that does not may call it
            once with the whole text, or never). The pieces are a preview: the reply's
            ``text`` is the answer. It must not raise and must return quickly (it runs on
            the model call's thread). A call the provider retries after its stream was
            cut off (``openai/<name>``: a dropped connection) repeats nothing: the
            retried answer's pieces are given only past the length already given (see
            docs/workers.md "OpenAI-compatible servers").
    """

    block: str
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    timeout: float = 60.0
    on_text: Callable[[str], None] | None = None

    def tool_names(self) -> list[str]:
        """The names of the tools offered on this call."""
        return [t["function"]["name"] for t in self.tools]


class ChatModel(Protocol):
    """A model an agent turn can talk to."""

    model_id: str

    def complete(self, call: ModelCall) -> ModelReply:
        """Answer ``call``. Raises ModelError; never blocks past ``call.timeout``."""
        ...


class ModelResolver(Protocol):
    """Turns a ``provider/name`` id into a ChatModel.

    A resolver may also offer ``resolve_evaluator(model_id, *, block="") ->
    EvaluationModel`` (``workforce.llm.evaluation``); one that does not is asked for
    chat models only, and evaluation models then come from the default resolver.
    """

    def resolve(self, model_id: str, *, block: str = "") -> ChatModel:
        """The model for ``model_id``. Raises ModelError when it cannot be had."""
        ...


def parse_arguments(raw: Any) -> tuple[dict | None, str]:
    """``(arguments, raw_text)`` from a tool call's arguments as a provider sent them
    (a JSON string or an object); arguments is None unless it is a JSON object."""
    if isinstance(raw, dict):
        return raw, json.dumps(raw)
    text = raw if isinstance(raw, str) else ""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return None, text
    return (value if isinstance(value, dict) else None), text
