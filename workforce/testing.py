"""Test doubles for models (spec "Testing a routed mailbox"): tests never reach the network.

``MockModelResolver`` (``create_mock_model_resolver``) answers every model id with a
scripted model, picked by the calling block's name: an agent turn's block is its seat
id (``support.devices``); routing's evaluation asks as ``mailbox-route``.

Evaluators are scripted the spec's way ("Testing a routed mailbox")::

    route = mock_evaluation_model(answers=lambda call: {
        "member": {"type": "choice",
                   "choice": "support.devices" if "printer" in call.state["post"]["text"] else "support.accounts"}})
    resolver = create_mock_model_resolver(evaluators={"mailbox-route": route})
    with use_model_resolver(resolver): ...
    route.calls   # every EvaluationCall, in order: a held post shows up as no call at all

An evaluator block with no script fails every call (the fallback takes the post).

A script is a list of answers consumed in order, or a function ``(ModelCall) -> answer``.
An answer is a string (text), a ``ModelReply``, a dict ``{"text": ..., "tool_calls":
[{"name": ..., "arguments": {...}}]}``, or an exception (instance or class), which the
call raises (as ModelError unless it is one). A text answer is also handed to the call's
``on_text`` a word at a time (each word with the space after it) before the reply.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .llm.base import ModelCall, ModelError, ModelReply, ToolCall
from .llm.evaluation import EvaluationCall, EvaluationError, Verdict

Answer = Any
Script = list[Answer] | Callable[[ModelCall], Answer]


@dataclass
class RecordedCall:
    """One call a mock model answered: which block and model id asked, and with what."""

    block: str
    model_id: str
    messages: list[dict]
    tools: list[str]
    timeout: float


@dataclass
class MockModelResolver:
    """Scripted models by block name; ``"*"`` scripts any block without its own.

    Attributes:
        scripts: ``{block name: script}``.
        calls: every call answered, in order (``RecordedCall``).
    """

    scripts: dict[str, Script] = field(default_factory=dict)
    calls: list[RecordedCall] = field(default_factory=list)
    evaluators: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._positions: dict[str, int] = {}

    def resolve(self, model_id: str, *, block: str = "") -> _MockModel:
        """A model that answers from ``block``'s script (any ``model_id`` is accepted)."""
        return _MockModel(self, model_id)

    def resolve_evaluator(self, model_id: str, *, block: str = "") -> Any:
        """The evaluation model scripted for ``block`` (or ``"*"``), whatever
        ``model_id`` says; a block with none gets a model that fails every call."""
        evaluator = self.evaluators.get(block) or self.evaluators.get("*")
        return evaluator if evaluator is not None else _Unscripted(model_id, block)

    def calls_for(self, block: str) -> list[RecordedCall]:
        """The calls made by ``block``."""
        return [c for c in self.calls if c.block == block]

    def _answer(self, model_id: str, call: ModelCall) -> ModelReply:
        with self._lock:
            self.calls.append(
                RecordedCall(call.block, model_id, [dict(m) for m in call.messages], call.tool_names(), call.timeout)
            )
            key = call.block if call.block in self.scripts else "*"
            if key not in self.scripts:
                raise ModelError(f"mock: no script for block {call.block!r}")
            script = self.scripts[key]
            if callable(script):
                answer = script(call)
            else:
                position = self._positions.get(key, 0)
                if position >= len(script):
                    raise ModelError(f"mock: the script for block {key!r} has no answer left")
                self._positions[key] = position + 1
                answer = script[position]
        return to_reply(answer)


class _MockModel:
    def __init__(self, resolver: MockModelResolver, model_id: str):
        self.resolver = resolver
        self.model_id = model_id

    def complete(self, call: ModelCall) -> ModelReply:
        reply = self.resolver._answer(self.model_id, call)
        if call.on_text is not None:
            for word in re.findall(r"\S+\s*|\s+", reply.text):
                call.on_text(word)
        return reply


def to_reply(answer: Answer) -> ModelReply:
    """Turn a scripted answer into a ModelReply, raising what it says to raise."""
    if isinstance(answer, type) and issubclass(answer, BaseException):
        answer = answer("mock: scripted failure")
    if isinstance(answer, ModelError):
        raise answer
    if isinstance(answer, BaseException):
        raise ModelError(f"mock: {type(answer).__name__}: {answer}") from answer
    if isinstance(answer, ModelReply):
        return answer
    if isinstance(answer, str):
        return ModelReply(text=answer)
    if isinstance(answer, dict):
        calls = tuple(
            ToolCall(
                id=c.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                name=c["name"],
                arguments=c.get("arguments", {}),
            )
            for c in answer.get("tool_calls", [])
        )
        return ModelReply(text=answer.get("text", ""), tool_calls=calls)
    raise TypeError(f"mock: cannot answer with {answer!r}")


def create_mock_model_resolver(
    scripts: dict[str, Script] | None = None, *, evaluators: dict[str, Any] | None = None
) -> MockModelResolver:
    """A MockModelResolver scripted by block name (the spec's createMockModelResolver).

    Args:
        scripts: ``{block name: script}`` for chat models (an agent turn's block is its
            seat id); ``"*"`` scripts any block without its own.
        evaluators: ``{block name: evaluation model}`` (``mock_evaluation_model(...)``),
            e.g. ``{"mailbox-route": route}``; ``"*"`` answers any block.
    """
    return MockModelResolver(scripts=dict(scripts or {}), evaluators=dict(evaluators or {}))


class _Unscripted:
    def __init__(self, model_id: str, block: str):
        self.model_id = model_id
        self.block = block

    def evaluate(self, call: EvaluationCall) -> dict:
        raise EvaluationError(f"mock: no evaluator scripted for block {self.block!r}")


class MockEvaluationModel:
    """A scripted evaluation model (the spec's ``mockEvaluationModel``).

    Attributes:
        calls: every ``EvaluationCall`` it was asked, in order (``call.state`` is what
            the evaluator saw: for routing ``{"recent": [{from, text}], "post": {from,
            text}}``; ``call.question.values()`` the choices offered).
    """

    model_id = "mock/evaluation"

    def __init__(self, answers: Any):
        self.answers = answers
        self.calls: list[EvaluationCall] = []
        self._lock = threading.Lock()
        self._position = 0

    def evaluate(self, call: EvaluationCall) -> dict:
        """Answer ``call`` from the script. Raises EvaluationError when the script
        raises, is used up, or answers something that is not an answer."""
        with self._lock:
            self.calls.append(call)
            answers = self.answers
            if isinstance(answers, list):
                if self._position >= len(answers):
                    raise EvaluationError("mock: the evaluator's script has no answer left")
                answers = answers[self._position]
                self._position += 1
        try:
            value = answers(call) if callable(answers) else answers
        except EvaluationError:
            raise
        except Exception as exc:
            raise EvaluationError(f"mock: the answers function raised {type(exc).__name__}: {exc}") from exc
        if isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException)):
            raise EvaluationError(f"mock: scripted failure ({value!r})")
        if not isinstance(value, dict):
            raise EvaluationError(f"mock: answers must give {{question name: answer}}, not {value!r}")
        return {name: Verdict.parse(answer, model_id=self.model_id) for name, answer in value.items()}


def mock_evaluation_model(answers: Any) -> MockEvaluationModel:
    """A scripted evaluation model that records its calls (``.calls``).

    Args:
        answers: ``{question name: answer}`` given for every call, a list of those used
            in order, or a function ``(EvaluationCall) -> {question name: answer}``. An
            answer is ``{"type": "choice", "choice": value}``, ``{"type": "none"}``, a
            bare value string, or None. A function that raises, an exception in the
            script, or a used-up list fails the call (EvaluationError), which sends a
            routed post to the fallback.
    """
    return MockEvaluationModel(answers)


__all__ = [
    "MockEvaluationModel",
    "MockModelResolver",
    "RecordedCall",
    "create_mock_model_resolver",
    "mock_evaluation_model",
    "to_reply",
]
