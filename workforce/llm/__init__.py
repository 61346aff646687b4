"""Models: a model id is ``provider/name``.

- ``embedded/echo``: no network; answers ``<seat> heard: <turn text>`` and calls only
  the tools its worker's own instructions order (see ``workforce.llm.embedded``).
- ``embedded/scripted``: a test model; echo, and it also calls the tools a turn's own
  ``/tool`` lines ask for, so a tree names it on purpose.
- ``openai/<name>``: any OpenAI-compatible endpoint (``OPENAI_BASE_URL``) with tool calls.

``current_resolver()`` is what agent turns use: the default resolver, or one a test put
in place with ``use_model_resolver(...)`` (``workforce.testing.MockModelResolver``).

Evaluation models (routing's evaluator, a coordinator's best fit; see
``workforce.llm.evaluation``) come from the same resolver's ``resolve_evaluator``:
``embedded/lexical`` (term weighting), ``openai/<name>`` (a structured choice), and
every other known id gives a model that cannot evaluate and fails every call.
"""

from __future__ import annotations

from .base import (
    MODEL_ERROR,
    MODEL_TRUNCATED,
    ChatModel,
    ModelCall,
    ModelError,
    ModelReply,
    ModelResolver,
    ToolCall,
    parse_arguments,
)
from .embedded import EMBEDDED_MODELS, EchoModel, ScriptedModel
from .evaluation import (
    CannotEvaluate,
    Choice,
    EvaluationCall,
    EvaluationError,
    EvaluationModel,
    Question,
    Verdict,
    evaluate,
)
from .lexical import LexicalEvaluationModel
from .openai_provider import OpenAIChatModel, OpenAIEvaluationModel
from .resolver import (
    EMBEDDED_EVALUATORS,
    PROVIDERS,
    RESOLVER,
    DefaultModelResolver,
    current_resolver,
    evaluation_model_problem,
    model_problem,
    resolve_evaluation_model,
    set_model_resolver,
    use_model_resolver,
)

__all__ = [
    "EMBEDDED_EVALUATORS",
    "EMBEDDED_MODELS",
    "MODEL_ERROR",
    "MODEL_TRUNCATED",
    "PROVIDERS",
    "RESOLVER",
    "CannotEvaluate",
    "Choice",
    "EvaluationCall",
    "EvaluationError",
    "EvaluationModel",
    "LexicalEvaluationModel",
    "OpenAIEvaluationModel",
    "Question",
    "Verdict",
    "evaluate",
    "evaluation_model_problem",
    "resolve_evaluation_model",
    "ChatModel",
    "DefaultModelResolver",
    "EchoModel",
    "ModelCall",
    "ModelError",
    "ModelReply",
    "ModelResolver",
    "OpenAIChatModel",
    "ScriptedModel",
    "ToolCall",
    "current_resolver",
    "model_problem",
    "parse_arguments",
    "set_model_resolver",
    "use_model_resolver",
]
