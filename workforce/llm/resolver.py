"""The model resolver: which model a ``provider/name`` id names, for chat and for
evaluation, and the resolver agent turns use now (``current_resolver``).

It names every provider, so it sits above them (the ``llm-layers`` contract in
pyproject.toml); the package's ``__init__`` only re-exports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from workforce.runtime import Slot

from .base import ChatModel, ModelError, ModelResolver
from .embedded import EMBEDDED_MODELS
from .evaluation import CannotEvaluate, EvaluationError, EvaluationModel
from .lexical import LexicalEvaluationModel
from .openai_provider import OpenAIChatModel, OpenAIEvaluationModel

PROVIDERS = ("embedded", "openai")
EMBEDDED_EVALUATORS = {"lexical": LexicalEvaluationModel}


def model_problem(model_id: object) -> str | None:
    """Why ``model_id`` is not a model the default resolver knows, or None.

    ``"embedded/echo"``, ``"embedded/scripted"`` and ``"openai/<anything>"`` are known; the answer is a sentence
    naming the id and what is accepted. Never raises.
    """
    if not isinstance(model_id, str) or model_id.count("/") < 1:
        return f"model {model_id!r} is not a model id: write provider/name, e.g. embedded/echo or openai/gpt-4o-mini"
    provider, _, name = model_id.partition("/")
    if not name:
        return f'model "{model_id}" names no model after the provider'
    if provider == "embedded":
        if name not in EMBEDDED_MODELS:
            return f'model "{model_id}": the embedded models are {", ".join("embedded/" + n for n in sorted(EMBEDDED_MODELS))}'
        return None
    if provider == "openai":
        return None
    return f'model "{model_id}": unknown provider "{provider}"; the providers are {", ".join(PROVIDERS)}'


def evaluation_model_problem(model_id: object) -> str | None:
    """Why ``model_id`` is not a model id the default resolver can make an evaluation
    model of, or None: ``embedded/lexical``, every chat model id ``model_problem``
    accepts (one that cannot evaluate fails every call, which routes to the fallback).
    Never raises."""
    if isinstance(model_id, str) and model_id.partition("/")[0] == "embedded":
        name = model_id.partition("/")[2]
        if name in EMBEDDED_EVALUATORS:
            return None
        if name not in EMBEDDED_MODELS:
            known = sorted({*EMBEDDED_MODELS, *EMBEDDED_EVALUATORS})
            return f'model "{model_id}": the embedded models are {", ".join("embedded/" + n for n in known)}'
    return model_problem(model_id)


class DefaultModelResolver:
    """``embedded/<name>`` and ``openai/<name>``."""

    def resolve(self, model_id: str, *, block: str = "") -> ChatModel:
        """The model for ``model_id``. Raises ModelError for an unknown id, or for an
        embedded evaluation model (``embedded/lexical`` cannot chat)."""
        problem = model_problem(model_id)
        if problem:
            raise ModelError(problem)
        provider, _, name = model_id.partition("/")
        if provider == "embedded":
            return EMBEDDED_MODELS[name]()
        return OpenAIChatModel(name)

    def resolve_evaluator(self, model_id: str, *, block: str = "") -> EvaluationModel:
        """The evaluation model for ``model_id``: ``embedded/lexical``, ``openai/<name>``,
        or, for a known model that cannot evaluate (``embedded/echo``), one that fails
        every call.

        Raises:
            EvaluationError: ``model_id`` is not a known model id.
        """
        problem = evaluation_model_problem(model_id)
        if problem:
            raise EvaluationError(problem)
        provider, _, name = model_id.partition("/")
        if provider == "embedded":
            factory = EMBEDDED_EVALUATORS.get(name)
            return factory() if factory else CannotEvaluate(model_id)
        return OpenAIEvaluationModel(name)


# The resolver agent turns use: the default one, unless a test put its own in place.
RESOLVER: Slot[ModelResolver] = Slot("workforce.model_resolver", load=DefaultModelResolver)


def current_resolver() -> ModelResolver:
    """The resolver agent turns use now (a test's, or the default)."""
    return RESOLVER.get()


def set_model_resolver(resolver: ModelResolver | None) -> None:
    """Put ``resolver`` in place for the whole process (``None`` restores the default)."""
    if resolver is None:
        RESOLVER.clear()
    else:
        RESOLVER.set(resolver)


@contextlib.contextmanager
def use_model_resolver(resolver: ModelResolver) -> Iterator[ModelResolver]:
    """``with use_model_resolver(mock): ...``: ``resolver`` for the block, then back."""
    previous = RESOLVER.get() if RESOLVER.is_set() else None
    set_model_resolver(resolver)
    try:
        yield resolver
    finally:
        set_model_resolver(previous)


def resolve_evaluation_model(
    model: str | EvaluationModel, *, block: str, resolver: ModelResolver | None = None
) -> EvaluationModel:
    """The evaluation model ``model`` names (spec 004 ``routeModel``: "a model id your
    resolver knows, or an evaluation model").

    Args:
        model: a ``provider/name`` id, or an object with ``evaluate`` (used as is).
        block: the calling block's name (``mailbox-route``): mock resolvers answer by it.
        resolver: a ModelResolver; default ``workforce.llm.current_resolver()``. A
            resolver without ``resolve_evaluator`` falls back to the default one.

    Returns:
        An EvaluationModel. A model id that is valid but cannot evaluate gives a model
        that fails every call (never an exception here).

    Raises:
        EvaluationError: ``model`` is not a model id the resolver knows.
    """
    if not isinstance(model, str):
        if not callable(getattr(model, "evaluate", None)):
            raise EvaluationError(f"{model!r} is neither a model id nor an evaluation model")
        return model
    resolver = resolver or current_resolver()
    resolve = getattr(resolver, "resolve_evaluator", None)
    if resolve is None:
        resolve = DefaultModelResolver().resolve_evaluator
    try:
        return resolve(model, block=block)
    except EvaluationError:
        raise
    except ModelError as exc:
        raise EvaluationError(str(exc)) from exc
