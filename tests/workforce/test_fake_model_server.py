"""The fake model server (tests.fake_model_server) answers in the shapes the ``openai``
package's own types define, fails on its schedule, and refuses what OpenAI refuses."""

from __future__ import annotations

import json

import httpx
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from tests.fake_model_server import Failure, FakeModelServer, chat_completion, scripted, stream_chunks, tool_call, validate

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def post(server: FakeModelServer, body: dict = BODY) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5)


def test_answers_and_chunks_validate_as_the_openai_types():
    message = {"role": "assistant", "content": "Looking now.", "tool_calls": [tool_call("post", {"x": 1}, id="call_1")]}
    answer = chat_completion(
        message, model="m", finish_reason="tool_calls", usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    )
    ChatCompletion.model_validate(answer)
    chunks = stream_chunks(answer, include_usage=True)
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "", "refusal": None}
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks[:-1]) == "Looking now."
    first_call = next(c for c in chunks if c["choices"] and c["choices"][0]["delta"].get("tool_calls"))
    assert first_call["choices"][0]["delta"]["tool_calls"] == [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": "post", "arguments": ""}}
    ]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls" and chunks[-1]["choices"] == []


def test_failures_follow_their_schedule_with_retry_after():
    with FakeModelServer(failures=[Failure(429, every=3, retry_after=1), Failure(503, every=10)]) as fake:
        answers = [post(fake) for _ in range(12)]
    assert fake.outcomes() == [200, 200, 429, 200, 200, 429, 200, 200, 429, 503, 200, 429]
    assert answers[2].headers["retry-after"] == "1" and answers[2].json()["error"]["code"] == "rate_limit_exceeded"
    assert answers[9].json()["error"]["message"].startswith("server busy") and "retry-after" not in answers[9].headers
    assert fake.failed() == 5


def test_a_stream_ends_with_done():
    with FakeModelServer(scripted({"m": ["one two"]})) as fake:
        text = post(fake, {**BODY, "stream": True}).text
    events = [line[len("data: ") :] for line in text.split("\n\n") if line]
    assert events[-1] == "[DONE]" and json.loads(events[0])["object"] == "chat.completion.chunk"


@pytest.mark.parametrize(
    "body, message",
    [
        (
            {**BODY, "tools": [{"type": "function", "function": {"name": "x" * 65}}]},
            "Invalid 'tools[0].function.name': string too long. Expected a string with maximum length 64, but got a string with length 65 instead.",
        ),
        (
            {**BODY, "tools": [{"type": "function", "function": {"name": "a.b"}}]},
            "Invalid 'tools[0].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
        ),
        (
            {
                "model": "m",
                "messages": [
                    {"role": "assistant", "content": None, "tool_calls": [tool_call("post", {}, id="call_1")]},
                    {"role": "tool", "tool_call_id": None, "content": "{}"},
                ],
            },
            "Invalid type for 'messages[1].tool_call_id': expected a string, but got null instead.",
        ),
    ],
)
def test_what_openai_refuses_is_refused_with_its_message(body, message):
    status, error = validate(body)
    assert status == 400 and error["error"]["message"] == message and error["error"]["type"] == "invalid_request_error"
