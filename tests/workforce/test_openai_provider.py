"""``openai/<model>`` (workforce.llm.openai_provider) against the fake model server
(tests.fake_model_server), a real HTTP server on loopback behaving as the real ones do:
retries within the call's budget honouring Retry-After, ``finish_reason: "length"``,
the 64-character tool-name limit, tool calls without an id, streaming."""

from __future__ import annotations

import json
import time

import pytest

from tests.fake_model_server import Failure, FakeModelServer, chat_completion, scripted, tool_call
from workforce.llm import ModelCall, ModelError, OpenAIChatModel
from workforce.llm.base import MODEL_TRUNCATED, ModelReply
from workforce.llm.openai_provider import call_with_retries, retry_after, tool_alias

USER = [{"role": "user", "content": "hello there, how are you today?"}]
LONG = "completeTask_" + "support.devices-escalations-" * 3 + "followups"  # 103 characters, dots


def tool(name: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "A tool.",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "additionalProperties": False},
        },
    }


@pytest.fixture
def serve(settings):
    """``serve(**kwargs) -> FakeModelServer`` started and wired as the OpenAI endpoint."""
    servers: list[FakeModelServer] = []

    def _serve(reply=None, **kwargs) -> FakeModelServer:
        server = FakeModelServer(reply, **kwargs).start()
        servers.append(server)
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "sk-test"
        return server

    yield _serve
    for server in servers:
        server.close()


def complete(call_timeout: float = 20.0, **kwargs) -> ModelReply:
    return OpenAIChatModel("m").complete(ModelCall(block="support.devices", messages=USER, timeout=call_timeout, **kwargs))


# --- retries ----------------------------------------------------------------------------------


def test_a_429_with_retry_after_is_waited_out_then_answered(serve):
    fake = serve(failures=[Failure(429, first=1, retry_after=1)])
    reply = complete()
    assert reply.text == "echo: hello there, how are you today?"
    assert fake.outcomes() == [429, 200]
    assert fake.requests[1]["at"] - fake.requests[0]["at"] >= 1.0  # the server's Retry-After, not the 0.5 s backoff


def test_retry_after_ms_is_honoured_before_retry_after(serve):
    fake = serve(failures=[Failure(429, first=1, retry_after=30, retry_after_ms=300)])
    complete()
    assert fake.outcomes() == [429, 200]
    assert 0.3 <= fake.requests[1]["at"] - fake.requests[0]["at"] < 30


def test_a_retry_after_of_now_still_backs_off(serve):
    """``Retry-After: 0`` or a date already past asks for no wait: the backoff (0.5 s less
    up to a quarter) spaces the retry, as the openai package does, so a server is not
    called again at once."""
    fake = serve(
        failures=[
            Failure(429, first=1, retry_after=0),
            Failure(429, first=2, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        ]
    )
    complete()
    assert fake.outcomes() == [429, 429, 200]
    assert all(b["at"] - a["at"] >= 0.37 for a, b in zip(fake.requests, fake.requests[1:], strict=False))


def test_ollamas_503_twice_then_an_answer(serve):
    fake = serve(failures=[Failure(503, first=2)])
    assert complete().text.startswith("echo:")
    assert fake.outcomes() == [503, 503, 200]


def test_a_dropped_connection_is_retried(serve):
    fake = serve(failures=[Failure("drop", first=1)])
    assert complete().text.startswith("echo:")
    assert fake.outcomes() == ["drop", 200]


def test_a_persistent_429_fails_within_the_calls_budget_naming_the_status(serve):
    fake = serve(failures=[Failure(429, retry_after=1)])
    start = time.monotonic()
    with pytest.raises(ModelError) as failed:
        complete(call_timeout=2.5)
    assert time.monotonic() - start < 2.5  # never sleeps past the budget
    assert len(fake.requests) in (2, 3)  # at 0 s, 1 s (and maybe 2 s); never one past the budget
    message = str(failed.value)
    assert message.startswith("openai/m: the server answered 429: Rate limit reached for requests")
    assert f"({len(fake.requests)} attempts in" in message and "no time left for a retry within 2.5s" in message
    assert failed.value.reason == "model-error"


def test_a_retry_after_past_the_budget_fails_at_once(serve):
    fake = serve(failures=[Failure(429, retry_after=30)])
    start = time.monotonic()
    with pytest.raises(ModelError, match="answered 429"):
        complete(call_timeout=5)
    assert time.monotonic() - start < 5 and len(fake.requests) == 1


def test_the_retry_count_is_a_setting(serve, settings):
    settings.WORKFORCE_MODEL_RETRIES = 1
    fake = serve(failures=[Failure(503)])
    with pytest.raises(ModelError, match=r"answered 503: server busy, please try again.*\(2 attempts in"):
        complete()
    assert len(fake.requests) == 2


def test_what_is_not_worth_retrying_is_not_retried(serve):
    fake = serve(lambda request: (400, {"error": {"message": "bad tools", "type": "invalid_request_error"}}))
    with pytest.raises(ModelError, match="^openai/m: the server answered 400: bad tools$"):
        complete()
    fake = serve(failures=[Failure(503, headers={"x-should-retry": "false"})])
    with pytest.raises(ModelError, match="answered 503"):
        complete()
    assert len(fake.requests) == 1


def test_a_hang_ends_at_the_calls_budget(serve):
    fake = serve(failures=[Failure("hang", hang_seconds=10)])
    start = time.monotonic()
    with pytest.raises(ModelError, match=r"^openai/m: no answer within 1s$"):
        complete(call_timeout=1)
    assert time.monotonic() - start < 5 and len(fake.requests) == 1


def test_retry_after_reads_seconds_milliseconds_and_dates():
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 < retry_after({"retry-after": later}) <= 30


def test_call_with_retries_gives_each_attempt_only_the_time_left():
    import openai

    budgets: list[float] = []
    # A request of the HTTP client the installed package uses (httpx before openai 3.x,
    # httpx2 after): its errors read the request's headers when they are made.
    request = openai.DefaultHttpxClient().build_request("POST", "http://127.0.0.1/v1/chat/completions")

    def attempt(seconds: float):
        budgets.append(seconds)
        if len(budgets) < 3:
            raise openai.APIConnectionError(request=request)
        return "ok"

    assert call_with_retries("openai/m", 10, attempt) == "ok"
    assert budgets[0] <= 10 and budgets[1] < budgets[0] - 0.3 and budgets[2] < budgets[1] - 0.7


# --- truncated answers ------------------------------------------------------------------------


def test_a_truncated_answer_is_a_failed_call_with_its_own_reason(serve):
    cut = chat_completion(
        {"role": "assistant", "content": None, "tool_calls": [tool_call("post", '{"body": "Looking at the ref')]},
        model="m",
        finish_reason="length",
    )
    serve(lambda request: (200, cut))
    with pytest.raises(ModelError) as failed:
        complete(tools=[tool("post")])
    assert failed.value.reason == MODEL_TRUNCATED == "model-truncated"
    assert str(failed.value) == "openai/m: the answer was cut off at the model's output limit (finish_reason: length)"
    with pytest.raises(ModelError) as streamed:
        complete(tools=[tool("post")], on_text=lambda piece: None)
    assert streamed.value.reason == "model-truncated"


# --- long tool names --------------------------------------------------------------------------


def test_a_long_tool_name_is_sent_as_a_stable_alias_and_mapped_back(serve):
    alias = tool_alias(LONG)
    assert len(LONG) > 64 and len(alias) == 64 and alias == tool_alias(LONG)
    assert alias.startswith("completeTask_support_devices-") and tool_alias("post-to-mailbox") == "post-to-mailbox"

    def reply(request):
        offered = [t["function"]["name"] for t in request["body"]["tools"]]
        message = {"role": "assistant", "content": None, "tool_calls": [tool_call(offered[0], {"x": 1}, id="call_1")]}
        return 200, chat_completion(message, model="m", finish_reason="tool_calls")

    fake = serve(reply)  # strict: refuses names over 64 as OpenAI does
    model = OpenAIChatModel("m")
    first = model.complete(ModelCall(block="b", messages=USER, tools=[tool(LONG), tool("post-to-mailbox")]))
    assert [(c.name, c.arguments) for c in first.tool_calls] == [(LONG, {"x": 1})]
    history = USER + [
        {"role": "assistant", "content": None, "tool_calls": [c.as_message_part() for c in first.tool_calls]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
    ]
    second = model.complete(ModelCall(block="b", messages=history, tools=[tool(LONG)]))
    assert second.tool_calls[0].name == LONG
    assert fake.outcomes() == [200, 200]
    assert [t["function"]["name"] for t in fake.bodies[0]["tools"]] == [alias, "post-to-mailbox"]
    assert fake.bodies[1]["messages"][1]["tool_calls"][0]["function"]["name"] == alias
    assert fake.bodies[1]["tools"][0]["function"]["name"] == alias  # the same alias in the next call
    assert history[1]["tool_calls"][0]["function"]["name"] == LONG  # the caller's messages keep the real name


def test_the_fake_refuses_long_names_as_openai_does(serve):
    fake = serve(strict=True)
    with pytest.raises(ModelError) as failed:
        call_with_retries(
            "openai/m",
            5,
            lambda seconds: (
                __import__("openai")
                .OpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
                .chat.completions.create(model="m", messages=USER, tools=[tool(LONG)], timeout=seconds)
            ),
        )
    assert str(failed.value) == (
        "openai/m: the server answered 400: Invalid 'tools[0].function.name': string too long. "
        f"Expected a string with maximum length 64, but got a string with length {len(LONG)} instead."
    )


# --- tool calls without an id -----------------------------------------------------------------


def test_a_tool_call_without_an_id_gets_one(serve):
    answers = scripted(
        {"m": [{"role": "assistant", "content": None, "tool_calls": [tool_call("post", {"x": 1}, id=None)]}, "done"]}
    )
    fake = serve(answers)
    model = OpenAIChatModel("m")
    first = model.complete(ModelCall(block="b", messages=USER, tools=[tool("post")]))
    (call,) = first.tool_calls
    assert call.id.startswith("call_") and len(call.id) > len("call_")
    history = USER + [
        {"role": "assistant", "content": None, "tool_calls": [call.as_message_part()]},
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"ok": True})},
    ]
    assert model.complete(ModelCall(block="b", messages=history, tools=[tool("post")])).text == "done"
    assert fake.outcomes() == [200, 200]  # the fake refuses a null tool_call_id as OpenAI does
    assert fake.bodies[1]["messages"][2]["tool_call_id"] == call.id


# --- streaming --------------------------------------------------------------------------------

TOOLED = chat_completion(
    {
        "role": "assistant",
        "content": "Let me post that for you now.",
        "tool_calls": [tool_call("post", {"x": 1}, id="call_a"), tool_call(LONG, {"x": 2}, id="call_b")],
    },
    model="m",
    finish_reason="tool_calls",
)


def test_streaming_hands_each_delta_in_order_and_replies_as_unstreamed(serve):
    def reply(request):
        names = [t["function"]["name"] for t in request["body"]["tools"]]
        answer = json.loads(json.dumps(TOOLED))
        answer["choices"][0]["message"]["tool_calls"][1]["function"]["name"] = names[1]  # the alias it was sent
        return 200, answer

    fake = serve(reply, piece=3)
    pieces: list[str] = []
    streamed = complete(tools=[tool("post"), tool(LONG)], on_text=pieces.append)
    plain = complete(tools=[tool("post"), tool(LONG)])
    assert fake.bodies[0]["stream"] is True and "stream" not in fake.bodies[1]
    assert pieces == ["Let", " me", " po", "st ", "tha", "t f", "or ", "you", " no", "w."]
    assert streamed == plain
    assert [(c.id, c.name, c.arguments) for c in streamed.tool_calls] == [
        ("call_a", "post", {"x": 1}),
        ("call_b", LONG, {"x": 2}),
    ]


def test_streaming_retries_its_start_and_a_stream_cut_off(serve):
    fake = serve(failures=[Failure(429, first=1, retry_after_ms=100), Failure("drop-mid-stream", every=2)], piece=5)
    pieces: list[str] = []
    reply = complete(on_text=pieces.append)
    assert fake.outcomes() == [429, "drop-mid-stream", 200]
    assert reply.text == "echo: hello there, how are you today?"
    # The cut-off attempt's pieces came first; the retried one adds only what goes past
    # them: the pieces make the answer once, nothing shown twice.
    assert "".join(pieces) == reply.text and pieces[0] == "echo:" and pieces.count("echo:") == 1


def test_a_streamed_tool_call_without_an_id_gets_one(serve):
    serve(scripted({"m": [{"role": "assistant", "content": None, "tool_calls": [tool_call("post", {"x": 1}, id=None)]}]}))
    (call,) = complete(tools=[tool("post")], on_text=lambda piece: None).tool_calls
    assert call.id.startswith("call_") and call.name == "post" and call.arguments == {"x": 1}


class Trickling(FakeModelServer):
    """Streams one piece of text every ``gap`` seconds, for ever (a server looping on
    output, or stalled mid-answer when the gap is long)."""

    gap = 0.3

    def _send_stream(self, handler, chunks, *, done):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        first = chunks[1]
        while not self._closing.wait(self.gap):
            data = f"data: {json.dumps(first)}\n\n".encode()
            handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            handler.wfile.flush()


def test_a_stream_that_never_ends_is_stopped_at_the_calls_budget(settings):
    with Trickling() as fake:
        settings.OPENAI_BASE_URL = fake.base_url
        pieces: list[str] = []
        start = time.monotonic()
        with pytest.raises(ModelError, match=r"^openai/m: no answer within 1.5s$"):
            complete(call_timeout=1.5, on_text=pieces.append)
        assert time.monotonic() - start < 3 and len(fake.requests) == 1 and pieces


def test_an_on_text_that_raises_does_not_fail_the_call(serve):
    serve()

    def broken(piece: str) -> None:
        raise RuntimeError("the page went away")

    assert complete(on_text=broken).text == "echo: hello there, how are you today?"


def test_a_stream_stalled_mid_answer_is_stopped_at_the_calls_budget(settings):
    with Trickling() as fake:
        fake.gap = 1.6  # a piece at 1.6 s, then the next read may wait the attempt's whole 2 s
        settings.OPENAI_BASE_URL = fake.base_url
        start = time.monotonic()
        with pytest.raises(ModelError, match=r"^openai/m: no answer within 2s$"):
            complete(call_timeout=2, on_text=lambda piece: None)
        assert time.monotonic() - start < 2.9  # not the next piece's 3.2 s
