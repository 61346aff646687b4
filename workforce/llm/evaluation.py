"""Evaluation models (spec "Routing a mailbox", "Testing a routed mailbox").

An *evaluator* asks a model one question with a fixed set of answers and gets one of
them back, or none. Routing asks ``member`` under the block name ``mailbox-route``; a
coordinator's best fit asks its own question under its own block name. Every evaluation
model answers the same call::

    call = EvaluationCall(
        block="mailbox-route",
        question=Question("member", "Which member should answer this post?", (
            Choice("support.devices", "Phones, laptops, printers and wifi"),
            Choice("support.accounts", "Sign-in, passwords, billing and refunds"),
        )),
        state={"recent": [{"from": "u_42", "text": "hi"}], "post": {"from": "u_42", "text": "my printer jams"}},
        focus="my printer jams",          # what the question is about (lexical models weigh it most)
        context=("hi",),                  # other text that may help, oldest first
    )
    verdict = evaluate(resolve_evaluation_model("embedded/lexical", block=call.block), call)
    verdict.choice   # "support.devices", or None when the model answered none

``evaluate`` raises ``EvaluationError`` when the call fails, for whatever reason (the
provider errored or timed out, the model cannot evaluate, the answer was malformed).
It does **not** check that the choice is one of the offered ones: a caller that must
tell "answered outside the choices" from "failed" checks ``question.offers(choice)``.

Models: ``embedded/lexical`` (term weighting, below a threshold it answers none),
``openai/<name>`` (a structured choice: a JSON-schema response whose ``choice`` is an
enum of the offered values plus ``none``), and any model that cannot evaluate
(``embedded/echo``), which fails every call. Tests script evaluators by block name with
``workforce.testing.mock_evaluation_model`` and ``create_mock_model_resolver(evaluators=...)``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .base import ModelError

CHOICE = "choice"
NONE = "none"


class EvaluationError(ModelError):
    """An evaluator call failed: the model cannot evaluate, the provider errored or timed
    out, or the answer was not a choice. The message names the model."""


@dataclass(frozen=True)
class Choice:
    """One answer a question offers: its ``value`` (what comes back, e.g. a member's
    seat id) and the ``description`` the model picks by."""

    value: str
    description: str = ""


@dataclass(frozen=True)
class Question:
    """One question with a fixed set of answers.

    Attributes:
        name: the answer's key (``member`` for routing, as the spec's mock answers it).
        text: the question, for models that read it (``Which member should answer?``).
        choices: what may be answered, in order; values are unique.
    """

    name: str
    text: str
    choices: tuple[Choice, ...] = ()

    def values(self) -> list[str]:
        """The offered values, in order."""
        return [c.value for c in self.choices]

    def offers(self, value: object) -> bool:
        """True when ``value`` is one of the offered values."""
        return isinstance(value, str) and any(c.value == value for c in self.choices)


@dataclass(frozen=True)
class Verdict:
    """A model's answer to one question: ``{"type": "choice", "choice": value}`` or
    ``{"type": "none"}`` (the spec's shape). ``score`` is what a scoring model found for
    its best choice (diagnostics only; ``None`` for models that do not score)."""

    type: str
    choice: str | None = None
    score: float | None = None

    @classmethod
    def none(cls, score: float | None = None) -> Verdict:
        return cls(NONE, None, score)

    @classmethod
    def choose(cls, value: str, score: float | None = None) -> Verdict:
        return cls(CHOICE, value, score)

    def as_dict(self) -> dict:
        """``{"type": "choice", "choice": value}`` or ``{"type": "none"}``."""
        return {"type": CHOICE, "choice": self.choice} if self.type == CHOICE else {"type": NONE}

    @classmethod
    def parse(cls, value: Any, *, model_id: str = "evaluator") -> Verdict:
        """Read an answer written as a Verdict, ``{"type": "choice", "choice": ...}``,
        ``{"type": "none"}``, a bare string (a choice) or ``None`` (none).

        Raises:
            EvaluationError: anything else (``choice`` missing or not text included).
        """
        if isinstance(value, Verdict):
            return value
        if value is None:
            return cls.none()
        if isinstance(value, str):
            return cls.choose(value)
        if isinstance(value, dict):
            kind = value.get("type")
            if kind == NONE:
                return cls.none()
            if kind == CHOICE and isinstance(value.get("choice"), str):
                return cls.choose(value["choice"])
        raise EvaluationError(
            f"{model_id}: {value!r} is not an answer (write {{'type': 'choice', 'choice': ...}} or {{'type': 'none'}})"
        )


@dataclass
class EvaluationCall:
    """One evaluator call.

    Attributes:
        block: the calling block's name (``mailbox-route``); mock resolvers script by it.
        question: the one question asked, with its choices.
        state: JSON the evaluator sees besides the question (routing: ``{"recent":
            [{from, text}, ...], "post": {from, text}}``); LLM evaluators read it whole.
        focus: the text the question is about (routing: the post's text).
        context: other text that may help, oldest first (routing: the recent lines).
        instructions: extra guidance for models that read prose (may be empty).
        timeout: seconds the call may take before it fails.
    """

    block: str
    question: Question
    state: dict = field(default_factory=dict)
    focus: str = ""
    context: tuple[str, ...] = ()
    instructions: str = ""
    timeout: float = 60.0


@runtime_checkable
class EvaluationModel(Protocol):
    """A model that can evaluate: answers an EvaluationCall with one Verdict per question
    name (``{"member": Verdict}``). Raises EvaluationError (or any exception, which
    ``evaluate`` turns into one) when it cannot answer."""

    model_id: str

    def evaluate(self, call: EvaluationCall) -> dict[str, Any]: ...


class CannotEvaluate:
    """A model with no evaluation ability (``embedded/echo``): every call fails, so every
    routed post goes to the fallback (spec "How a post finds its member", step 3)."""

    def __init__(self, model_id: str):
        self.model_id = model_id

    def evaluate(self, call: EvaluationCall) -> dict[str, Any]:
        """Raises EvaluationError, always."""
        raise EvaluationError(f"{self.model_id} cannot evaluate: it is not an evaluation model")


def evaluate(model: EvaluationModel, call: EvaluationCall) -> Verdict:
    """Ask ``model`` the call's question and return its Verdict.

    Args:
        model: an EvaluationModel (see ``resolve_evaluation_model``).
        call: the question, its choices and what the model sees.

    Returns:
        The Verdict for ``call.question.name``: a choice (not checked against the
        offered values: see ``Question.offers``) or none.

    Raises:
        EvaluationError: the model failed, raised anything, or answered something that
            is not an answer to that question.
    """
    model_id = getattr(model, "model_id", type(model).__name__)
    try:
        answers = model.evaluate(call)
    except EvaluationError:
        raise
    except ModelError as exc:
        raise EvaluationError(str(exc)) from exc
    except Exception as exc:  # an evaluator of any kind must not take the caller down
        raise EvaluationError(f"{model_id}: {type(exc).__name__}: {exc}") from exc
    if isinstance(answers, Verdict):
        return answers
    if not isinstance(answers, dict) or call.question.name not in answers:
        raise EvaluationError(f"{model_id}: no answer to {call.question.name!r} in {answers!r}")
    return Verdict.parse(answers[call.question.name], model_id=model_id)


def choice_prompt(call: EvaluationCall) -> list[dict]:
    """The chat messages an LLM evaluator is sent for ``call``: a system message that
    says to answer with one of the values or ``none``, and a user message with the
    question, each choice with its description, and the state as JSON."""
    lines = [f"- {c.value}: {c.description or '(no description)'}" for c in call.question.choices]
    system = (
        "You answer one question by picking exactly one of a fixed set of choices. "
        'Reply with a JSON object {"choice": "<value>"} whose value is one of the listed values, '
        'or {"choice": "none"} when none of them fits.'
    )
    if call.instructions:
        system += "\n\n" + call.instructions
    user = (
        f"Question: {call.question.text}\n\nChoices:\n" + "\n".join(lines) + "\n\n"
        f"What you are answering about (JSON):\n{json.dumps(call.state, ensure_ascii=False, indent=1)}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def choice_schema(call: EvaluationCall) -> dict:
    """The JSON schema of a structured choice: ``{"choice": <one of the values or
    "none">}``, nothing else (OpenAI ``response_format`` ``json_schema``, strict)."""
    return {
        "type": "object",
        "properties": {"choice": {"type": "string", "enum": [*call.question.values(), NONE]}},
        "required": ["choice"],
        "additionalProperties": False,
    }


__all__ = [
    "CHOICE",
    "NONE",
    "CannotEvaluate",
    "Choice",
    "EvaluationCall",
    "EvaluationError",
    "EvaluationModel",
    "Question",
    "Verdict",
    "choice_prompt",
    "choice_schema",
    "evaluate",
]
