"""The model resolver: embedded/echo, ids, the mock resolver."""

from __future__ import annotations

import time
from unittest.mock import patch

import pytest

from workforce.llm import DefaultModelResolver, EchoModel, ModelCall, ModelError, ScriptedModel, model_problem
from workforce.notify import turn_text
from workforce.testing import create_mock_model_resolver

POST_TOOL = {"type": "function", "function": {"name": "post-to-mailbox", "description": "", "parameters": {}}}


def echo(messages, tools=(), block="support.devices", timeout=5.0, model=EchoModel):
    return model().complete(ModelCall(block=block, messages=list(messages), tools=list(tools), timeout=timeout))


def scripted(messages, tools=(), block="support.devices", timeout=5.0):
    return echo(messages, tools, block, timeout, model=ScriptedModel)


def test_echo_answers_what_it_heard():
    reply = echo([{"role": "system", "content": "Be kind."}, {"role": "user", "content": "u_42 in support.desk: hi"}])
    assert reply.text == "support.devices heard: u_42 in support.desk: hi" and reply.tool_calls == ()


def test_echo_never_calls_a_tool_a_turn_asks_for():
    # issue 22 item 8: a client's post (plain or quoted by the framing) orders nothing.
    order = '/tool post-to-mailbox {"mailbox": "support.desk", "body": "x"}'
    for turn in (
        turn_text({"mailboxId": "support.standup", "principal": "u_42", "body": f"please\n{order}"}),
        f"u_42 in support.standup: {order}",
        order,
    ):
        reply = echo([{"role": "system", "content": "Be kind."}, {"role": "user", "content": turn}], [POST_TOOL])
        assert (reply.tool_calls, reply.text) == ((), f"support.devices heard: {turn}")
        # ... and the same turn asks the scripted test model for it
        [call] = scripted([{"role": "user", "content": turn}], [POST_TOOL]).tool_calls
        assert call.arguments == {"mailbox": "support.desk", "body": "x"}


def test_scripted_calls_a_tool_the_turn_asks_for_then_answers():
    turn = 'u_42 in support.desk: please\n/tool post-to-mailbox {"mailbox": "support.desk", "body": "on it"}'
    first = scripted([{"role": "user", "content": turn}], [POST_TOOL])
    [call] = first.tool_calls
    assert (call.name, call.arguments, first.text) == ("post-to-mailbox", {"mailbox": "support.desk", "body": "on it"}, "")
    second = scripted(
        [
            {"role": "user", "content": turn},
            {"role": "assistant", "content": None, "tool_calls": [call.as_message_part()]},
            {"role": "tool", "tool_call_id": call.id, "content": "{}"},
        ],
        [POST_TOOL],
    )
    assert second.tool_calls == () and second.text == f"support.devices heard: {turn}"


def test_scripted_calls_only_offered_tools_and_skips_bad_json():
    turn = 'x in y: /tool post-to-mailbox {"mailbox": "y", "body": "b"}\n/tool post-to-mailbox {not json}'
    assert scripted([{"role": "user", "content": turn}]).tool_calls == ()
    assert len(scripted([{"role": "user", "content": turn}], [POST_TOOL]).tool_calls) == 1
    # a quoted body (workforce.framing) is read back line by line
    quoted = turn_text({"mailboxId": "y", "principal": "x", "body": 'hi\n/tool post-to-mailbox {"mailbox": "y", "body": "b"}'})
    assert quoted.count("\n") == 0
    [call] = scripted([{"role": "user", "content": quoted}], [POST_TOOL]).tool_calls
    assert call.arguments == {"mailbox": "y", "body": "b"}


def test_echo_standing_orders_fill_the_turns_parts():
    system = 'Answer there.\n/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}'
    turn = "support.lead in support.desk: can someone look at the refund queue?"
    [call] = echo([{"role": "system", "content": system}, {"role": "user", "content": turn}], [POST_TOOL]).tool_calls
    assert call.arguments == {"mailbox": "support.desk", "body": f"support.devices heard: {turn}"}
    # not a mailbox post: no standing orders
    assert echo([{"role": "system", "content": system}, {"role": "user", "content": "hello"}], [POST_TOOL]).tool_calls == ()


def test_scripted_sleep_and_its_timeout():
    started = time.monotonic()
    scripted([{"role": "user", "content": "x in y: slow\n/sleep 150"}])
    assert time.monotonic() - started >= 0.15
    started = time.monotonic()  # a post's body quoted by the framing (workforce.framing)
    scripted([{"role": "user", "content": turn_text({"mailboxId": "y", "principal": "x", "body": "slow\n/sleep 150"})}])
    assert time.monotonic() - started >= 0.15
    # how soon it gives up: bench/timeouts.py ("scripted model timeout")
    with pytest.raises(ModelError, match="no answer within 0.1s"):
        scripted([{"role": "user", "content": "x in y: slower\n/sleep 5000"}], timeout=0.1)


def test_echo_ignores_a_senders_sleep():
    """The default model never waits because a sender asked: a post's /sleep would hold
    every woken seat, and a cluster worker each, up to the turn's time limit."""
    with patch("workforce.llm.embedded.time.sleep") as slept:
        reply = echo([{"role": "user", "content": "x in y: slow\n/sleep 60000"}], timeout=100)
    slept.assert_not_called()
    assert reply.text == "support.devices heard: x in y: slow\n/sleep 60000"


@pytest.mark.parametrize(
    "model_id, problem",
    [
        ("embedded/echo", None),
        ("embedded/scripted", None),
        ("openai/gpt-4o-mini", None),
        ("embedded/parrot", "the embedded models are embedded/echo"),
        ("acme/brain", 'unknown provider "acme"'),
        ("echo", "not a model id"),
        ("openai/", "names no model"),
        (None, "not a model id"),
    ],
)
def test_model_ids(model_id, problem):
    found = model_problem(model_id)
    assert (found is None) if problem is None else (problem in found)


def test_the_default_resolver():
    resolver = DefaultModelResolver()
    assert type(resolver.resolve("embedded/echo")) is EchoModel
    assert isinstance(resolver.resolve("embedded/scripted"), ScriptedModel)
    assert resolver.resolve("openai/llama3.1").model_id == "openai/llama3.1"
    with pytest.raises(ModelError):
        resolver.resolve("acme/brain")


def test_the_mock_resolver_scripts_by_block_name():
    mock = create_mock_model_resolver(
        {
            "support.devices": ["one", {"text": "", "tool_calls": [{"name": "post-to-mailbox", "arguments": {"a": 1}}]}],
            "*": lambda call: f"default for {call.block}",
        }
    )
    call = ModelCall(block="support.devices", messages=[{"role": "user", "content": "q"}], tools=[POST_TOOL])
    model = mock.resolve("openai/x", block="support.devices")
    assert model.complete(call).text == "one"
    assert model.complete(call).tool_calls[0].arguments == {"a": 1}
    with pytest.raises(ModelError, match="no answer left"):
        model.complete(call)
    other = ModelCall(block="support.general", messages=[])
    assert mock.resolve("x/y").complete(other).text == "default for support.general"
    assert [c.block for c in mock.calls] == ["support.devices"] * 3 + ["support.general"]
    assert mock.calls[0].tools == ["post-to-mailbox"] and mock.calls[0].model_id == "openai/x"


def test_a_scripted_exception_is_a_model_error():
    mock = create_mock_model_resolver({"a": [TimeoutError("slow"), ModelError("boom")]})
    model = mock.resolve("m")
    with pytest.raises(ModelError, match="TimeoutError: slow"):
        model.complete(ModelCall(block="a", messages=[]))
    with pytest.raises(ModelError, match="boom"):
        model.complete(ModelCall(block="a", messages=[]))
