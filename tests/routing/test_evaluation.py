"""Evaluation models (spec "Routing a mailbox", "Testing a routed mailbox"):
the interface, embedded/lexical, a model that can't evaluate, the mock, and the
OpenAI-compatible structured choice against a fake server on loopback."""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeOpenAIServer, chat_completion
from workforce.llm import (
    CannotEvaluate,
    Choice,
    DefaultModelResolver,
    EvaluationCall,
    EvaluationError,
    LexicalEvaluationModel,
    OpenAIEvaluationModel,
    Question,
    Verdict,
    evaluate,
    evaluation_model_problem,
    resolve_evaluation_model,
    use_model_resolver,
)
from workforce.llm.lexical import terms
from workforce.testing import create_mock_model_resolver, mock_evaluation_model

DESK = Question(
    "member",
    "Which member should answer this post?",
    (
        Choice("support.devices", "Phones, laptops, printers and wifi; anything that won't turn on, charge or connect."),
        Choice("support.accounts", "Sign-in, passwords, billing, refunds and account settings."),
        Choice("support.general", "Orders, shipping, returns and anything else."),
    ),
)


def ask(model, focus: str, context=()) -> Verdict:
    return evaluate(
        model, EvaluationCall("mailbox-route", DESK, {"post": {"from": "u", "text": focus}}, focus=focus, context=tuple(context))
    )


# --- embedded/lexical ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, member",
    [
        ("My printer keeps jamming", "support.devices"),
        ("the laptop won't charge", "support.devices"),
        ("I forgot my password", "support.accounts"),
        ("I'd like a refund please", "support.accounts"),
        ("Where is my order?", "support.general"),
    ],
)
def test_lexical_picks_the_choice_whose_description_matches(text, member):
    assert ask(LexicalEvaluationModel(), text).choice == member


def test_lexical_answers_none_below_its_threshold_so_the_fallback_takes_it():
    verdict = ask(LexicalEvaluationModel(), "hello, anyone around?")
    assert verdict == Verdict.none(0.0) and verdict.as_dict() == {"type": "none"}


def test_lexical_answers_none_on_a_tie():
    question = Question("member", "?", (Choice("a.x", "printers"), Choice("a.y", "printers")))
    call = EvaluationCall("b", question, focus="my printer")
    assert evaluate(LexicalEvaluationModel(), call).type == "none"


def test_lexical_threshold_is_a_knob():
    assert ask(LexicalEvaluationModel(threshold=100.0), "My printer keeps jamming").choice is None


def test_lexical_reads_the_recent_lines_for_a_follow_up():
    assert ask(LexicalEvaluationModel(), "it fails right after that").choice is None
    follow_up = ask(LexicalEvaluationModel(), "it fails right after that", ["I reset my password this morning"])
    assert follow_up.choice == "support.accounts"


def test_lexical_post_outweighs_the_recent_lines():
    verdict = ask(LexicalEvaluationModel(), "and now the printer is jammed", ["I reset my password"])
    assert verdict.choice == "support.devices"


def test_terms_are_stemmed_and_common_words_dropped():
    assert terms("My printers won't CHARGE; wi-fi") == ["printer", "charg", "wi", "fi", "wifi"]


# --- resolving ------------------------------------------------------------------------------


def test_the_default_resolver_knows_lexical_and_openai_and_fails_for_echo():
    resolver = DefaultModelResolver()
    assert isinstance(resolver.resolve_evaluator("embedded/lexical"), LexicalEvaluationModel)
    assert isinstance(resolver.resolve_evaluator("openai/gpt-4o-mini"), OpenAIEvaluationModel)
    echo = resolver.resolve_evaluator("embedded/echo")
    assert isinstance(echo, CannotEvaluate)
    with pytest.raises(EvaluationError, match="embedded/echo cannot evaluate"):
        ask(echo, "My printer keeps jamming")


def test_an_unknown_model_id_is_refused_by_name():
    assert "embedded/lexical" in evaluation_model_problem("embedded/parrot")
    assert evaluation_model_problem("embedded/lexical") is None
    with pytest.raises(EvaluationError, match="unknown provider"):
        resolve_evaluation_model("acme/x", block="mailbox-route")


def test_an_evaluation_model_object_is_used_as_is():
    model = LexicalEvaluationModel()
    assert resolve_evaluation_model(model, block="mailbox-route") is model


# --- the mock -------------------------------------------------------------------------------


def test_mock_evaluation_model_answers_by_block_and_records_its_calls():
    route = mock_evaluation_model(answers=lambda call: {"member": {"type": "choice", "choice": "support.devices"}})
    resolver = create_mock_model_resolver(evaluators={"mailbox-route": route})
    with use_model_resolver(resolver):
        model = resolve_evaluation_model("embedded/whatever", block="mailbox-route")
        assert ask(model, "printer").choice == "support.devices"
        other = resolve_evaluation_model("embedded/lexical", block="coordinator-route")
        with pytest.raises(EvaluationError, match="no evaluator scripted"):
            ask(other, "printer")
    assert len(route.calls) == 1 and route.calls[0].state == {"post": {"from": "u", "text": "printer"}}
    assert route.calls[0].question.values() == ["support.devices", "support.accounts", "support.general"]


def test_mock_answers_that_throw_fail_the_call():
    def broken(call):
        raise RuntimeError("boom")

    with pytest.raises(EvaluationError, match="RuntimeError: boom"):
        ask(mock_evaluation_model(answers=broken), "printer")


def test_mock_answers_in_order_then_runs_out():
    route = mock_evaluation_model(answers=[{"member": "support.accounts"}, {"member": {"type": "none"}}])
    assert ask(route, "a").choice == "support.accounts"
    assert ask(route, "b").type == "none"
    with pytest.raises(EvaluationError, match="no answer left"):
        ask(route, "c")


def test_an_answer_that_is_not_an_answer_fails_the_call():
    with pytest.raises(EvaluationError, match="not an answer"):
        ask(mock_evaluation_model(answers={"member": {"type": "maybe"}}), "x")
    with pytest.raises(EvaluationError, match="no answer to 'member'"):
        ask(mock_evaluation_model(answers={"delegate": "x"}), "x")


def test_the_existing_positional_mock_resolver_still_works():
    resolver = create_mock_model_resolver({"support.devices": ["hi"]})
    assert resolver.scripts == {"support.devices": ["hi"]} and resolver.evaluators == {}


# --- OpenAI-compatible: a structured choice ---------------------------------------------------


def completion(content: str) -> tuple[int, dict]:
    return 200, chat_completion(content, model="fake", id="c1", created=0)


@pytest.fixture
def fake_openai(settings):
    """``fake_openai(reply) -> server``: serve ``reply(body) -> (status, answer)`` and
    point the OpenAI provider at it."""
    servers = []

    def _start(reply):
        server = FakeOpenAIServer(lambda request: reply(request["body"])).start()
        servers.append(server)
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "sk-test"
        return server

    yield _start
    for server in servers:
        server.close()


def test_openai_evaluator_asks_for_a_structured_choice(fake_openai):
    server = fake_openai(lambda body: completion(json.dumps({"choice": "support.devices"})))
    model = resolve_evaluation_model("openai/fake", block="mailbox-route")
    assert ask(model, "My printer keeps jamming").choice == "support.devices"
    (body,) = server.bodies
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema" and body["model"] == "fake"
    assert schema["properties"]["choice"]["enum"] == ["support.devices", "support.accounts", "support.general", "none"]
    assert "Which member should answer this post?" in body["messages"][1]["content"]
    assert "My printer keeps jamming" in body["messages"][1]["content"]


def test_openai_evaluator_none_and_failures(fake_openai, settings):
    settings.WORKFORCE_MODEL_RETRIES = 1
    fake_openai(lambda body: completion('{"choice": "none"}'))
    assert ask(OpenAIEvaluationModel("fake"), "x").type == "none"
    fake_openai(lambda body: completion("I think devices"))
    with pytest.raises(EvaluationError, match="not JSON"):
        ask(OpenAIEvaluationModel("fake"), "x")
    fake_openai(lambda body: (500, {"error": {"message": "overloaded", "type": "server_error"}}))
    with pytest.raises(EvaluationError, match=r"answered 500: overloaded \(2 attempts in"):
        ask(OpenAIEvaluationModel("fake"), "x")
