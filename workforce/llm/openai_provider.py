"""``openai/<model>``: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM,
Ollama, llama.cpp) through the official ``openai`` client, with tool calls.

The endpoint is ``settings.OPENAI_BASE_URL`` (the client's default, api.openai.com, when
empty) and the key ``settings.OPENAI_API_KEY`` (servers that need none get a
placeholder). Every failure is a ModelError (an EvaluationError for an evaluator)
naming the model and, when the server answered an error, its status and message.

Retries (``call_with_retries``): a call is retried on what the ``openai`` package
retries itself (429, 408, 409, 5xx, a timeout, a dropped connection; a server's
``x-should-retry`` header decides first), up to ``settings.WORKFORCE_MODEL_RETRIES``
times, waiting what the server asks (``retry-after-ms``, ``Retry-After`` in seconds or
as a date; a wait of 0 or a date past is no ask) or else the package's backoff (0.5 s doubling up to 8 s, less up to 25 %
jitter). Unlike the package's own retry, every attempt and every wait is bounded by
the call's own time budget (``ModelCall.timeout``, which a turn sets to what is left of
it): an attempt gets only the time left, and a wait that would end past the budget is
not slept: the call fails at once with the last error. The package's retry gives each
attempt the whole timeout again and sleeps without knowing a deadline, and bounding it
would mean overriding its private methods; so the client is built with
``max_retries=0`` and the loop here does the same thing in public API.

Streaming: when ``ModelCall.on_text`` is set the call streams (``stream=True``), hands
each text delta to ``on_text``, and accumulates the chunks with the package's own
``ChatCompletionStreamState``; the reply is the one the same answer gives unstreamed.
Retries cover the stream's start and a connection dropped in the middle (the retried
attempt writes its text again from the beginning; ``on_text`` is given only what goes
past what it was already given, see ``ModelCall.on_text``).

Tool names: OpenAI refuses a tool name over 64 characters or outside
``[a-zA-Z0-9_-]`` (``completeTask_<mailbox>_<board>`` can be longer). Such a name is
sent as ``tool_alias(name)`` (a stable short alias) in the offered tools and in the
assistant messages sent back, and a reply's tool calls are mapped back to the real
names: everywhere else the spec's name is the tool's identity.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings

from .base import MODEL_TRUNCATED, ModelCall, ModelError, ModelReply, ToolCall, parse_arguments
from .evaluation import NONE, EvaluationError, Verdict, choice_prompt, choice_schema

logger = logging.getLogger(__name__)

T = TypeVar("T")

# What OpenAI takes as a function name (longer or other characters: 400).
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MAX_TOOL_NAME = 64
_HASH_CHARS = 10

# The openai package's backoff when the server names no wait (its _constants).
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0

_clients: dict[tuple[str, str], object] = {}
_clients_lock = threading.Lock()


def _client(base_url: str, api_key: str):
    from openai import OpenAI

    key = (base_url, api_key)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            # No retries in the client: call_with_retries retries within the call's budget.
            client = OpenAI(base_url=base_url or None, api_key=api_key or "not-needed", max_retries=0)
            _clients[key] = client
        return client


# ----------------------------------------------------------------------------- retries


def retry_after(headers: Any) -> float | None:
    """Seconds a server asked to wait before the next call, from ``retry-after-ms``
    (milliseconds) or ``Retry-After`` (seconds, or an HTTP date), or None when it
    named none (or something unreadable). ``headers`` is a case-insensitive mapping."""
    if headers is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        return seconds if seconds == seconds and seconds >= 0 else None  # NaN, negative: unreadable
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_tz(value)
        if parsed is None:
            return None
        return max(email.utils.mktime_tz(parsed) - time.time(), 0.0)
    except (TypeError, ValueError, OverflowError):
        return None


def _retryable_status(status: int, headers: Any) -> bool:
    """Whether an error answer is worth another attempt, as the openai package decides:
    the server's ``x-should-retry`` first, then 408, 409, 429 and 5xx."""
    should = (headers.get("x-should-retry") if headers is not None else None) or ""
    if should == "true":
        return True
    if should == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def _server_message(exc: Any) -> str:
    """The server's own error message from an ``openai.APIStatusError``: OpenAI's
    ``{"error": {"message": ...}}`` (the package hands its inner object as ``body``),
    Ollama's ``{"error": "..."}``, or the package's text."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(inner, str):
            return inner
        if isinstance(body.get("message"), str):
            return body["message"]
    if isinstance(body, str) and body:
        return body
    return str(getattr(exc, "message", "") or exc)


def call_with_retries(
    model_id: str,
    timeout: float,
    attempt: Callable[[float], T],
    error: Callable[[str], Exception] = ModelError,
    *,
    retries: int | None = None,
) -> T:
    """``attempt(seconds_left)``, retried on a retryable failure while the budget lasts.

    Args:
        model_id: the model, for messages (``openai/gpt-4o-mini``).
        timeout: the call's whole budget in seconds: attempts and waits together never
            pass it.
        attempt: one try; given the seconds left (its own timeout), it returns the
            result or raises what the ``openai`` client raises.
        error: builds the exception raised at the end (ModelError, EvaluationError).
        retries: most retries after the first attempt; default
            ``settings.WORKFORCE_MODEL_RETRIES``.

    Raises:
        ``error(message)`` naming ``model_id`` and the last failure (``the server
        answered 429: <its message>``, ``no answer within 5s``, ``APIConnectionError:
        ...``), with how many attempts were made when more than one.
    """
    import openai

    most = settings.WORKFORCE_MODEL_RETRIES if retries is None else retries
    start = time.monotonic()
    deadline = start + timeout
    attempts = 0
    while True:
        attempts += 1
        left = deadline - time.monotonic()
        headers = None
        try:
            return attempt(max(left, 0.001))
        except openai.APITimeoutError:
            problem, retryable = f"no answer within {timeout:g}s", True
        except openai.APIStatusError as exc:
            headers = exc.response.headers
            problem = f"the server answered {exc.status_code}: {_server_message(exc)}"
            retryable = _retryable_status(exc.status_code, headers)
        except openai.APIConnectionError as exc:  # refused, dropped, cut off mid-answer
            cause = exc.__cause__
            detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
            problem, retryable = f"{type(exc).__name__}: {exc}{detail}", True
        except openai.APIError as exc:  # an answer the client could not read
            problem, retryable = f"{type(exc).__name__}: {exc}", False
        if not retryable or attempts > most:
            raise error(_failed(model_id, problem, attempts, start)) from None
        wait = retry_after(headers)
        if wait is None or wait <= 0:  # none, or "now" (a past date, 0): the backoff, as the package does
            wait = min(INITIAL_RETRY_DELAY * 2.0 ** (attempts - 1), MAX_RETRY_DELAY) * (1 - 0.25 * random.random())
        if time.monotonic() + wait >= deadline:
            spent = time.monotonic() >= deadline  # the attempt itself used the budget up
            note = "" if spent else f"; no time left for a retry within {timeout:g}s"
            raise error(_failed(model_id, problem, attempts, start) + note) from None
        logger.info("model %s: %s; retry %d in %.2fs", model_id, problem, attempts, wait)
        time.sleep(wait)


def _failed(model_id: str, problem: str, attempts: int, start: float) -> str:
    if attempts == 1:
        return f"{model_id}: {problem}"
    return f"{model_id}: {problem} ({attempts} attempts in {time.monotonic() - start:.1f}s)"


# ----------------------------------------------------------------------------- tool names


def tool_alias(name: str) -> str:
    """The name the model is sent for tool ``name``: ``name`` itself when OpenAI takes
    it (1..64 characters of ``[a-zA-Z0-9_-]``), else its first characters (others
    replaced by ``_``) + ``_`` + 10 hex characters of its SHA-256, 64 characters in
    all: the same alias for the same name in every call and process."""
    if TOOL_NAME_PATTERN.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    head = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[: MAX_TOOL_NAME - _HASH_CHARS - 1]
    return f"{head}_{digest}"


def _aliased_request(call: ModelCall) -> tuple[list[dict], list[dict], dict[str, str]]:
    """``(messages, tools, {alias: real name})``: the call's messages and tools with
    every tool name the model cannot take replaced by its alias (offered tools and the
    ``tool_calls`` of assistant messages)."""
    real: dict[str, str] = {}

    def alias(name: str) -> str:
        short = tool_alias(name)
        if short != name:
            real[short] = name
        return short

    tools = []
    for tool in call.tools:
        function = tool.get("function") or {}
        name = function.get("name")
        if isinstance(name, str) and alias(name) != name:
            tool = {**tool, "function": {**function, "name": alias(name)}}
        tools.append(tool)
    messages = []
    for message in call.messages:
        if message.get("tool_calls"):
            parts = []
            for part in message["tool_calls"]:
                function = part.get("function") or {}
                name = function.get("name")
                if isinstance(name, str) and alias(name) != name:
                    part = {**part, "function": {**function, "name": alias(name)}}
                parts.append(part)
            message = {**message, "tool_calls": parts}
        messages.append(message)
    return messages, tools, real


# ----------------------------------------------------------------------------- chat


def _first_message(model_id: str, kwargs: dict, timeout: float, error: type[Exception]):
    """One chat completion on the configured server, with ``kwargs`` (model, messages,
    ...) within ``timeout`` seconds (retries included); returns its first choice.

    Raises:
        ``error`` naming ``model_id``: connection refused, an HTTP error, no answer
        within ``timeout`` seconds (see ``call_with_retries``), or an answer with no
        choices.
    """
    client = _client(settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY)

    def attempt(seconds: float):
        return client.chat.completions.create(**kwargs, timeout=seconds)

    response = call_with_retries(model_id, timeout, attempt, error)
    if not getattr(response, "choices", None):
        raise error(f"{model_id}: the answer had no choices")
    return response.choices[0]


def _streamed_choice(model_id: str, kwargs: dict, timeout: float, on_text: Callable[[str], None]):
    """Like ``_first_message`` with ``stream=True``: each text delta goes to
    ``on_text`` as it comes; returns the accumulated first choice."""
    import openai
    from openai.lib.streaming.chat import ChatCompletionStreamState

    client = _client(settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY)

    listening = True
    shown = 0  # characters handed to on_text, over every attempt

    def show(written: str) -> None:
        """Hand ``on_text`` what this attempt has written past what was shown: a retried
        attempt writes its answer again from the start, and that part is not repeated."""
        nonlocal listening, shown
        if not listening or len(written) <= shown:
            return
        piece, shown = written[shown:], len(written)
        try:
            on_text(piece)
        except Exception:  # it must not raise; a preview that breaks never fails the call
            listening = False
            logger.exception("model %s: on_text raised; the rest of the answer is not shown", model_id)

    def attempt(seconds: float):
        ends = time.monotonic() + seconds
        state = ChatCompletionStreamState()
        seen = False
        written = ""
        stream = client.chat.completions.create(**kwargs, stream=True, timeout=max(ends - time.monotonic(), 0.001))
        # The client's timeout bounds each read, not the whole stream: at the budget's end
        # the stream is closed under a server that writes slowly or stalls mid-answer.
        watchdog = threading.Timer(max(ends - time.monotonic(), 0.0), _cut, (stream.response,))
        watchdog.daemon = True
        watchdog.start()
        try:
            with stream:
                for chunk in stream:
                    if time.monotonic() > ends:
                        break
                    state.handle_chunk(chunk)
                    seen = True
                    for choice in chunk.choices:
                        if choice.index == 0 and choice.delta.content:
                            written += choice.delta.content
                            show(written)
        except Exception:
            if time.monotonic() >= ends:
                raise openai.APITimeoutError(request=stream.response.request) from None
            raise
        finally:
            watchdog.cancel()
        if time.monotonic() >= ends:
            raise openai.APITimeoutError(request=stream.response.request)
        if not seen:
            return None
        snapshot = state.current_completion_snapshot
        if snapshot.choices and snapshot.choices[0].finish_reason is None:
            # Ended without saying why: the connection closed before the answer did.
            raise openai.APIConnectionError(message="the stream ended before the answer did", request=stream.response.request)
        return snapshot

    response = call_with_retries(model_id, timeout, attempt, ModelError)
    if response is None or not getattr(response, "choices", None):
        raise ModelError(f"{model_id}: the answer had no choices")
    return response.choices[0]


def _cut(response) -> None:
    """Stop a streamed answer from another thread: shut its socket down (the network
    stream's ``socket``, as httpx exposes it), which ends a read blocked on it; closing
    the response alone would not."""
    stream = (getattr(response, "extensions", None) or {}).get("network_stream")
    sock = stream.get_extra_info("socket") if stream is not None else None
    try:
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
        else:
            response.close()
    except Exception:  # already closed: nothing to stop
        pass


class OpenAIChatModel:
    """One model on an OpenAI-compatible server.

    Args:
        name: the server's model name (``gpt-4o-mini``, ``llama3.1``).
    """

    def __init__(self, name: str):
        self.name = name
        self.model_id = f"openai/{name}"

    def complete(self, call: ModelCall) -> ModelReply:
        """One chat completion with ``call.tools`` offered, streamed when
        ``call.on_text`` is set (see the module: retries, aliases).

        Raises:
            ModelError: connection refused, an HTTP error that retries within
                ``call.timeout`` seconds did not get past, no answer in that time, an
                answer with no choices; reason ``model-truncated`` for an answer cut off
                at the model's output limit (``finish_reason: "length"``).
        """
        messages, tools, real = _aliased_request(call)
        kwargs: dict = {"model": self.name, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        if call.on_text is None:
            choice = _first_message(self.model_id, kwargs, call.timeout, ModelError)
        else:
            choice = _streamed_choice(self.model_id, kwargs, call.timeout, call.on_text)
        message = choice.message
        if choice.finish_reason == "length":
            raise ModelError(
                f"{self.model_id}: the answer was cut off at the model's output limit (finish_reason: length)",
                reason=MODEL_TRUNCATED,
            )
        calls = []
        for tool_call in message.tool_calls or []:
            function = getattr(tool_call, "function", None)
            if function is None or not function.name:
                continue
            arguments, raw = parse_arguments(function.arguments)
            calls.append(
                ToolCall(
                    # Sent back as the tool message's tool_call_id: never null.
                    id=tool_call.id or f"call_{uuid.uuid4().hex}",
                    name=real.get(function.name, function.name),
                    arguments=arguments,
                    raw_arguments=raw,
                )
            )
        return ModelReply(text=message.content or "", tool_calls=tuple(calls))


class OpenAIEvaluationModel:
    """An evaluation model on an OpenAI-compatible server: one chat completion whose
    answer is a structured choice (``response_format`` ``json_schema``, strict: an
    object ``{"choice": <one of the offered values or "none">}``; see
    ``workforce.llm.evaluation.choice_schema``). Retried as a chat call is (see the
    module).

    Args:
        name: the server's model name.
    """

    def __init__(self, name: str):
        self.name = name
        self.model_id = f"openai/{name}"

    def evaluate(self, call):
        """``{question name: Verdict}`` for ``call`` (``EvaluationCall``).

        Raises:
            EvaluationError: the server failed, timed out (``call.timeout`` seconds,
                retries included) or answered something that is not ``{"choice": ...}``
                JSON.
        """
        kwargs: dict = {
            "model": self.name,
            "messages": choice_prompt(call),
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "choice", "strict": True, "schema": choice_schema(call)},
            },
        }
        content = _first_message(self.model_id, kwargs, call.timeout, EvaluationError).message.content or ""
        try:
            value = json.loads(content)
        except ValueError:
            raise EvaluationError(f"{self.model_id}: the answer is not JSON: {content[:200]!r}") from None
        if not isinstance(value, dict) or not isinstance(value.get("choice"), str):
            raise EvaluationError(f"{self.model_id}: the answer has no choice: {content[:200]!r}")
        choice = value["choice"]
        verdict = Verdict.none() if choice == NONE else Verdict.choose(choice)
        return {call.question.name: verdict}
