"""``openai/<model>``: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
Ollama, llama.cpp) through the official ``openai`` client, with tool calls.

The endpoint is ``settings.OPENAI_BASE_URL`` (the client's default, api.openai.com, when
empty) and the key ``settings.OPENAI_API_KEY`` (servers that need none get a
placeholder). Each call has a timeout and no automatic retries, so a turn never hangs
past its deadline; every failure is a ModelError naming the model.
"""

from __future__ import annotations

import json
import threading

from django.conf import settings

from .base import ModelCall, ModelError, ModelReply, ToolCall, parse_arguments
from .evaluation import NONE, EvaluationError, Verdict, choice_prompt, choice_schema

_clients: dict[tuple[str, str], object] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, api_key: str):
    from openai import OpenAI

    key = (base_url, api_key)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = OpenAI(base_url=base_url or None, api_key=api_key or "not-needed", max_retries=0)
            _clients[key] = client
        return client


def _first_message(model_id: str, kwargs: dict, timeout: float, error: type[Exception]):
    """One chat completion on the configured server, with ``kwargs`` (model, messages,
    ...) and ``timeout`` seconds; returns its first choice's message.

    Raises:
        ``error`` naming ``model_id``: connection refused, an HTTP error, no answer
        within ``timeout`` seconds, or an answer with no choices.
    """
    import openai

    client = _client(settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY)
    try:
        response = client.chat.completions.create(**kwargs, timeout=max(timeout, 0.001))
    except openai.APITimeoutError:
        raise error(f"{model_id}: no answer within {timeout:g}s") from None
    except openai.APIStatusError as exc:
        raise error(f"{model_id}: the server answered {exc.status_code}: {exc.message}") from None
    except openai.APIError as exc:
        raise error(f"{model_id}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # anything the client did not wrap
        raise error(f"{model_id}: {type(exc).__name__}: {exc}") from None
    if not getattr(response, "choices", None):
        raise error(f"{model_id}: the answer had no choices")
    return response.choices[0].message


class OpenAIChatModel:
    """One model on an OpenAI-compatible server.

    Args:
        name: the server's model name (``gpt-4o-mini``, ``llama3.1``).
    """

    def __init__(self, name: str):
        self.name = name
        self.model_id = f"openai/{name}"

    def complete(self, call: ModelCall) -> ModelReply:
        """One chat completion with ``call.tools`` offered.

        Raises:
            ModelError: connection refused, an HTTP error, no answer within
                ``call.timeout`` seconds, or an answer with no choices.
        """
        kwargs: dict = {"model": self.name, "messages": call.messages}
        if call.tools:
            kwargs["tools"] = call.tools
        message = _first_message(self.model_id, kwargs, call.timeout, ModelError)
        calls = []
        for tool_call in message.tool_calls or []:
            function = getattr(tool_call, "function", None)
            if function is None:
                continue
            arguments, raw = parse_arguments(function.arguments)
            calls.append(ToolCall(id=tool_call.id, name=function.name, arguments=arguments, raw_arguments=raw))
        return ModelReply(text=message.content or "", tool_calls=tuple(calls))


class OpenAIEvaluationModel:
    """An evaluation model on an OpenAI-compatible server: one chat completion whose
    answer is a structured choice (``response_format`` ``json_schema``, strict: an
    object ``{"choice": <one of the offered values or "none">}``; see
    ``workforce.llm.evaluation.choice_schema``).

    Args:
        name: the server's model name.
    """

    def __init__(self, name: str):
        self.name = name
        self.model_id = f"openai/{name}"

    def evaluate(self, call):
        """``{question name: Verdict}`` for ``call`` (``EvaluationCall``).

        Raises:
            EvaluationError: the server failed, timed out (``call.timeout`` seconds) or
                answered something that is not ``{"choice": ...}`` JSON.
        """
        kwargs: dict = {
            "model": self.name,
            "messages": choice_prompt(call),
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "choice", "strict": True, "schema": choice_schema(call)},
            },
        }
        content = _first_message(self.model_id, kwargs, call.timeout, EvaluationError).content or ""
        try:
            value = json.loads(content)
        except ValueError:
            raise EvaluationError(f"{self.model_id}: the answer is not JSON: {content[:200]!r}") from None
        if not isinstance(value, dict) or not isinstance(value.get("choice"), str):
            raise EvaluationError(f"{self.model_id}: the answer has no choice: {content[:200]!r}")
        choice = value["choice"]
        verdict = Verdict.none() if choice == NONE else Verdict.choose(choice)
        return {call.question.name: verdict}
