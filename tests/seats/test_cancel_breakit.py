"""Break-it probes of the cancel read riding the tool-call item's statement."""

from __future__ import annotations

from seats.turns import run_turn
from tests.seats.test_cancel_turn import cancel, turn  # noqa: F401
from workforce.llm import set_model_resolver
from workforce.models import Item
from workforce.testing import create_mock_model_resolver
from workforce.tools import Tool


def test_a_cancel_during_a_tool_call_stops_the_next_tool_of_the_same_reply_and_the_next_model_call(org, turn):  # noqa: F811
    called = []
    holder = {}

    def first(ctx, args):
        called.append("first")
        cancel(org, holder["log"].request)
        return {"ok": True}

    def second(ctx, args):
        called.append("second")
        return {"ok": True}

    resolver = create_mock_model_resolver({"*": [{"tool_calls": [{"name": "first"}, {"name": "second"}]}, "never"]})
    set_model_resolver(resolver)
    seat, log = turn()
    holder["log"] = log
    tools = [Tool("first", "A.", {"type": "object"}, first), Tool("second", "B.", {"type": "object"}, second)]
    result = run_turn(seat, log, text="hi", history=[], tools=tools)
    assert called == ["first"] and len(resolver.calls) == 1
    assert result.error.reason == "cancelled"
    assert [i.data["name"] for i in Item.objects.filter(request=log.request, component="tool-call")] == ["first"]


def test_a_cancel_during_the_last_tool_call_stops_the_next_model_call(org, turn):  # noqa: F811
    holder = {}

    def first(ctx, args):
        cancel(org, holder["log"].request)
        return {"ok": True}

    resolver = create_mock_model_resolver({"*": [{"tool_calls": [{"name": "first"}]}, "never"]})
    set_model_resolver(resolver)
    seat, log = turn()
    holder["log"] = log
    result = run_turn(seat, log, text="hi", history=[], tools=[Tool("first", "A.", {"type": "object"}, first)])
    assert len(resolver.calls) == 1 and result.error.reason == "cancelled"
