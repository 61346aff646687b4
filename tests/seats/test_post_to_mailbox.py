"""The post-to-mailbox capability (spec "A seat answering in the mailbox")."""

from __future__ import annotations

import pytest

from mailboxes.models import Delivery, Line
from seats.capabilities import POST_TO_MAILBOX_TOOL
from tests.conftest import OWNER, mailbox_md
from tests.seats.conftest import ECHO_LISTENER, SEATS_TREE, worker_md
from workforce.flows import FlowKind, registry
from workforce.llm import use_model_resolver
from workforce.models import Item, Request, Session
from workforce.testing import create_mock_model_resolver
from workforce.tools import ToolContext, refusal_code

POSTER = worker_md("Posts.", tools="[post-to-mailbox]")
TREE = {
    **SEATS_TREE,
    "teams/eng/workers/lead/WORKER.md": POSTER,
    "teams/ops/mailboxes/pager/MAILBOX.md": mailbox_md("Ops pager.", members=("ops.oncall",)),
}


def say(*calls, then="done"):
    """A script: one model answer calling post-to-mailbox with each args dict, then text."""
    return [{"tool_calls": [{"name": "post-to-mailbox", "arguments": args} for args in calls]}, then]


def run_with(wired, post, lead_script, *, files=TREE, body="go"):
    wired(files)
    mock = create_mock_model_resolver({"eng.lead": lead_script, "*": lambda call: "ok"})
    with use_model_resolver(mock):
        post("eng.incidents", body)
    return mock


def tool_results(org):
    session = Session.objects.get(organization=org, session_id="eng.incidents:eng.lead")
    return [i.data["result"] for i in Item.objects.filter(session=session, component="tool-call").order_by("seq")]


def test_the_line_is_the_seats_own(wired, post, org):
    run_with(wired, post, say({"mailbox": "eng.incidents", "body": "looking into it"}))
    [result] = tool_results(org)
    assert result["ok"] is True and result["handedOver"] is True and result["mailbox"] == "eng.incidents"
    line = Line.objects.get(body="looking into it")
    assert line.as_wire() == {
        "id": line.line_id,
        "at": line.at,
        "principal": OWNER,
        "author": "eng.lead",
        "authorVerified": False,
        "body": "looking into it",
        "seatAuthored": True,
        "postedBy": {"kind": "seat", "id": "eng.lead", "verified": True},  # the seat whose turn called the tool
    }
    seat_post = Request.objects.get(session__session_id="eng.incidents", action="seatPost")
    assert seat_post.internal and seat_post.input == {"body": "looking into it", "author": "eng.lead"}


def test_an_extra_key_is_refused_and_nothing_is_dispatched(wired, post, org):
    run_with(wired, post, say({"mailbox": "eng.incidents", "body": "hi", "author": "eng.analyst"}))
    [result] = tool_results(org)
    assert refusal_code(result) == "invalid-input"
    assert "'author'" in result["refused"]
    assert not Request.objects.filter(action="seatPost").exists()
    assert Line.objects.count() == 1  # the client's post only


def test_an_empty_body_is_refused(wired, post, org):
    run_with(wired, post, say({"mailbox": "eng.incidents", "body": "   "}))
    [result] = tool_results(org)
    assert refusal_code(result) == "invalid-input" and "body" in result["refused"]
    assert not Request.objects.filter(action="seatPost").exists()


def test_a_mailbox_nobody_opened_is_session_not_found_and_creates_nothing(wired, post, org):
    sessions_before = None
    wired(TREE)
    sessions_before = set(Session.objects.values_list("session_id", flat=True))
    mock = create_mock_model_resolver({"eng.lead": say({"mailbox": "eng.nowhere", "body": "hi"}), "*": lambda c: "ok"})
    with use_model_resolver(mock):
        post("eng.incidents", "go")
    [result] = tool_results(org)
    assert refusal_code(result) == "session-not-found" and result["refused"].startswith("session-not-found: ")
    assert not Session.objects.filter(session_id="eng.nowhere").exists()
    created = set(Session.objects.values_list("session_id", flat=True)) - sessions_before
    assert created == {"eng.incidents:eng.lead", "eng.incidents:eng.analyst"}  # the conversations only


def test_a_session_on_another_kind_is_session_not_addressable(wired, post, org):
    registry.register(FlowKind(kind="notes"))
    try:
        wired(TREE)
        Session.objects.create(organization=org, session_id="eng.notes", flow_kind="notes", user_id=OWNER)
        mock = create_mock_model_resolver({"eng.lead": say({"mailbox": "eng.notes", "body": "hi"}), "*": lambda c: "ok"})
        with use_model_resolver(mock):
            post("eng.incidents", "go")
        [result] = tool_results(org)
        assert refusal_code(result) == "session-not-addressable"
        assert not Request.objects.filter(session__session_id="eng.notes").exists()
    finally:
        registry.unregister("notes")


def test_a_seat_that_is_not_a_member_is_refused_by_the_mailbox(wired, post, org):
    run_with(wired, post, say({"mailbox": "ops.pager", "body": "paging"}))
    [result] = tool_results(org)
    # The seat is not told: the tool handed the post over.
    assert result["ok"] is True and result["handedOver"] is True
    [refused] = Request.objects.filter(session__session_id="ops.pager", action="seatPost")
    assert refused.status == "failed" and refused.error["reason"] == "author-not-a-member"
    assert not Line.objects.filter(session__session_id="ops.pager").exists()


def test_a_seat_whose_tools_omit_it_is_never_offered_it(wired, post, org):
    files = {**TREE, "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER}
    mock = run_with(wired, post, say({"mailbox": "eng.incidents", "body": "sneaky"}), files=files)
    assert mock.calls_for("eng.lead")[0].tools == []
    [result] = tool_results(org)  # a model that calls it anyway gets a refusal
    assert result == {"refused": 'tool-not-offered: "post-to-mailbox" is not one of your tools.'}
    assert not Line.objects.filter(body="sneaky").exists()


def test_a_seat_that_names_it_is_offered_it(wired, post, org):
    mock = run_with(wired, post, ["nothing to say"])
    call = mock.calls_for("eng.lead")[0]
    assert call.tools == ["post-to-mailbox"]


def test_the_tool_schema_takes_exactly_mailbox_and_body():
    schema = POST_TO_MAILBOX_TOOL.openai_schema()["function"]
    assert schema["name"] == "post-to-mailbox"
    assert schema["parameters"]["required"] == ["mailbox", "body"]
    assert schema["parameters"]["additionalProperties"] is False
    assert set(schema["parameters"]["properties"]) == {"mailbox", "body"}


def test_a_turn_run_again_hands_each_post_over_once(wired, post, org):
    """The n-th call of a delivery's turn is keyed by the delivery: replaying the turn
    (a crashed worker's delivery claimed again) posts nothing new."""
    from mailboxes.deliveries import do_deliver

    script = say({"mailbox": "eng.incidents", "body": "answer"}) * 2
    run_with(wired, post, script)
    delivery = Delivery.objects.get(member="eng.lead")
    Delivery.objects.filter(pk=delivery.pk).update(status="pending")  # as if the claim had lapsed mid-turn
    mock = create_mock_model_resolver({"eng.lead": script[2:]})
    with use_model_resolver(mock):
        assert do_deliver(delivery.pk) == "done"
    assert Line.objects.filter(body="answer").count() == 1
    assert tool_results(org)[-1]["handedOver"] is True


def test_tool_called_directly_without_a_turn(org, open_tree):
    open_tree({"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("S.", members=("eng.lead",))})
    result = POST_TO_MAILBOX_TOOL.call(ToolContext(org=org, seat_id="eng.lead"), {"mailbox": "eng.standup", "body": "hi"})
    assert result["ok"] is True
    assert Line.objects.get(body="hi").author == "eng.lead"


@pytest.mark.parametrize("args", [None, [], "text", {"mailbox": 3, "body": "x"}, {"body": "x"}])
def test_malformed_arguments_are_refused(org, args):
    result = POST_TO_MAILBOX_TOOL.call(ToolContext(org=org, seat_id="eng.lead"), args)
    assert refusal_code(result) == "invalid-input"
