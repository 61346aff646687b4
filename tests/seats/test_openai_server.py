"""``openai/<model>`` against a fake OpenAI-compatible server on loopback: a real HTTP
server in a thread, reached through the official ``openai`` client (not a mock object)."""

from __future__ import annotations

import json
import time

import pytest

from mailboxes.models import Delivery, Line
from tests.conftest import OWNER
from tests.fake_model_server import Failure
from tests.fakes import FakeOpenAIServer, chat_completion
from tests.seats.conftest import SEATS_TREE, worker_md
from workforce.models import Request

OPENAI_WORKER = worker_md(
    "Answers with a real model.",
    model="openai/fake-model",
    tools="[post-to-mailbox]",
    body="You are the lead. Answer in the mailbox.",
)


class FakeOpenAI(FakeOpenAIServer):
    """A chat-completions endpoint: asks for one post-to-mailbox call, then answers."""

    def __init__(self, *, delay: float = 0.0, status: int = 200):
        super().__init__()
        self.delay = delay
        self.status = status

    def reply(self, request: dict) -> tuple[int, dict]:
        time.sleep(self.delay)
        if self.status != 200:
            return self.status, {"error": {"message": "the model is overloaded", "type": "server_error"}}
        return 200, self.answer(request["body"])

    def answer(self, body: dict) -> dict:
        turn = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        mailbox = turn.split(" in ", 1)[1].split(":", 1)[0]
        if not any(m["role"] == "tool" for m in body["messages"]):
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc123",
                        "type": "function",
                        "function": {
                            "name": "post-to-mailbox",
                            "arguments": json.dumps({"mailbox": mailbox, "body": "Looking at the refund queue now."}),
                        },
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Posted my answer in the mailbox."}, "stop"
        return chat_completion(
            message,
            model=body["model"],
            id=f"chatcmpl-{len(self.requests)}",
            finish_reason=finish,
            usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        )


@pytest.fixture
def openai_tree(wired, settings):
    def _wire(fake: FakeOpenAI):
        settings.OPENAI_BASE_URL = fake.base_url
        settings.OPENAI_API_KEY = "sk-test"
        wired({**SEATS_TREE, "teams/eng/workers/lead/WORKER.md": OPENAI_WORKER})

    return _wire


def test_a_turn_with_one_tool_call_through_the_openai_client(openai_tree, post, org):
    with FakeOpenAI() as fake:
        openai_tree(fake)
        post("eng.incidents", "can someone look at the refund queue?", author="eng.analyst")
    first, second = (r["body"] for r in fake.requests)
    assert [r["path"] for r in fake.requests] == ["/v1/chat/completions"] * 2
    assert fake.requests[0]["auth"] == "Bearer sk-test"
    assert first["model"] == "fake-model"
    assert first["messages"] == [
        {"role": "system", "content": "You are the lead. Answer in the mailbox."},
        {"role": "user", "content": "eng.analyst in eng.incidents: can someone look at the refund queue?"},
    ]
    [tool] = first["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "post-to-mailbox"
    assert tool["function"]["parameters"]["additionalProperties"] is False
    assistant, result = second["messages"][2], second["messages"][3]
    assert assistant["role"] == "assistant" and assistant["tool_calls"][0]["id"] == "call_abc123"
    assert result["role"] == "tool" and result["tool_call_id"] == "call_abc123"
    assert json.loads(result["content"])["handedOver"] is True
    line = Line.objects.get(body="Looking at the refund queue now.")
    assert line.author == "eng.lead" and line.seat_authored and line.principal == OWNER
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.status == "completed"
    assert turn.output == {"reply": "Posted my answer in the mailbox.", "toolCalls": ["post-to-mailbox"]}


def test_a_model_that_does_not_answer_in_time_fails_the_turn(openai_tree, post, org, settings):
    settings.WORKFORCE_MODEL_TIMEOUT = 0.5
    with FakeOpenAI(delay=3) as fake:
        openai_tree(fake)
        post("eng.incidents", "hello?")  # how soon it gives up: bench/timeouts.py ("OpenAI model timeout")
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.status == "failed" and turn.error["reason"] == "model-error"
    assert turn.error["message"] == "model-error: openai/fake-model: no answer within 0.5s"
    assert Delivery.objects.get(member="eng.lead").status == "failed"
    assert Request.objects.get(session__session_id="eng.incidents", action="deliverPost").error["reason"] == "model-error"
    assert Delivery.objects.get(member="eng.analyst").status == "done"  # the others still ran


def test_a_server_error_is_the_providers_error_recorded(openai_tree, post, org, settings):
    settings.WORKFORCE_MODEL_RETRIES = 2
    with FakeOpenAI(status=500) as fake:
        openai_tree(fake)
        post("eng.incidents", "hello?")
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.error["reason"] == "model-error"
    assert "openai/fake-model: the server answered 500: the model is overloaded (3 attempts in" in turn.error["message"]
    assert len(fake.requests) == 3  # retried WORKFORCE_MODEL_RETRIES times, then the server's error recorded


def test_a_rate_limit_is_waited_out_and_the_turn_completes(openai_tree, post, org):
    with FakeOpenAI() as fake:
        fake.failures = [Failure(429, first=1, retry_after_ms=200), Failure(503, every=3)]
        openai_tree(fake)
        post("eng.incidents", "can someone look at the refund queue?", author="eng.analyst")
    assert fake.outcomes() == [429, 200, 503, 200]
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.status == "completed" and turn.output["reply"] == "Posted my answer in the mailbox."


class TruncatingOpenAI(FakeOpenAI):
    """Asks for a post-to-mailbox call cut off at the output limit."""

    def answer(self, body: dict) -> dict:
        answer = super().answer(body)
        call = answer["choices"][0]["message"]["tool_calls"][0]["function"]
        call["arguments"] = call["arguments"][:25]
        answer["choices"][0]["finish_reason"] = "length"
        return answer


def test_a_truncated_answer_fails_the_turn_as_model_truncated(openai_tree, post, org):
    with TruncatingOpenAI() as fake:
        openai_tree(fake)
        post("eng.incidents", "can someone look at the refund queue?", author="eng.analyst")
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.status == "failed" and turn.error["reason"] == "model-truncated"
    assert turn.error["message"] == (
        "model-truncated: openai/fake-model: the answer was cut off at the model's output limit (finish_reason: length)"
    )
    assert len(fake.requests) == 1 and not Line.objects.filter(author="eng.lead").exists()  # the cut-off call never ran


def test_nothing_listening_fails_the_turn(wired, post, org, settings):
    from tests.e2e.conftest import free_port

    settings.WORKFORCE_MODEL_RETRIES = 1  # a refused connection is retried (once here), then fails
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{free_port()}/v1"
    wired({**SEATS_TREE, "teams/eng/workers/lead/WORKER.md": OPENAI_WORKER})
    post("eng.incidents", "hello?")
    turn = Request.objects.get(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert turn.error["reason"] == "model-error" and "APIConnectionError" in turn.error["message"]
