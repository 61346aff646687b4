"""Every caller of a seat's turn records it in the one turn log (``seats.turns``): here
a mailbox delivery (``mailboxes.deliveries`` through the agent's ``post_turn``) and
``onMailboxPost`` dispatched by another flow (the turn inside that action's request).
The board row, the delegated post and the coordinator's own turn are checked beside
their callers (``tests/boards``, ``tests/coordinators``)."""

from __future__ import annotations

from mailboxes.models import Delivery
from tests.conftest import OWNER
from tests.turn_log import TURN_LOG, ScriptedTurn, turn_log
from workforce.dispatch import dispatch
from workforce.llm import use_model_resolver
from workforce.models import Request
from workforce.notify import ON_MAILBOX_POST
from workforce.testing import create_mock_model_resolver

CONVERSATION = "eng.incidents:eng.lead"


def test_a_delivery_records_the_turn_in_the_turn_log(wired, post):
    wired()
    script = ScriptedTurn(ON_MAILBOX_POST)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script, "*": lambda call: "ok"})):
        post("eng.incidents", "hi")
    request = Request.objects.get(session__session_id=CONVERSATION, action=ON_MAILBOX_POST)
    assert script.statuses == ["running", "running"]
    assert turn_log(request) == TURN_LOG
    assert request.status == "completed" and request.output == {"reply": "the reply", "toolCalls": ["no-such-tool"]}
    assert Delivery.objects.get(member="eng.lead").status == "done"  # the caller settled its work item


def test_a_failed_delivery_turn_ends_failed_with_its_error(wired, post):
    wired()
    script = ScriptedTurn(ON_MAILBOX_POST, fail=True)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script, "*": lambda call: "ok"})):
        post("eng.incidents", "hi")
    request = Request.objects.get(session__session_id=CONVERSATION, action=ON_MAILBOX_POST)
    assert script.statuses == ["running"]
    assert turn_log(request) == TURN_LOG[:1]  # started; no reply
    assert request.status == "failed" and request.error["reason"] == "model-error"
    delivery = Delivery.objects.get(member="eng.lead")
    assert delivery.status == "failed" and delivery.error["reason"] == "model-error"


def _dispatch_on_mailbox_post(org, post_id: str) -> Request:
    payload = {"mailboxId": "eng.incidents", "member": "eng.lead", "postId": post_id, "body": "direct", "principal": OWNER}
    return dispatch(org=org, kind="agent", session_id=CONVERSATION, action=ON_MAILBOX_POST, payload=payload, user_id=OWNER)


def test_on_mailbox_post_by_dispatch_records_the_turn_in_the_turn_log(wired, org):
    wired()
    script = ScriptedTurn(ON_MAILBOX_POST)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script})):
        request = _dispatch_on_mailbox_post(org, "p-1")
    assert script.statuses == ["running", "running"]
    assert turn_log(request) == TURN_LOG
    assert request.status == "completed" and request.output == {"reply": "the reply", "toolCalls": ["no-such-tool"]}


def test_a_failed_on_mailbox_post_by_dispatch_ends_failed_with_its_error(wired, org):
    wired()
    script = ScriptedTurn(ON_MAILBOX_POST, fail=True)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script})):
        request = _dispatch_on_mailbox_post(org, "p-1")
    assert script.statuses == ["running"]
    # The model ran after the action's transaction committed (the turn's start with it):
    # the turn ends as a failed delivery's does, its start kept in its log.
    assert turn_log(request) == TURN_LOG[:1]
    assert request.status == "failed" and request.error["reason"] == "model-error"
