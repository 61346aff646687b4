"""A dispatcher handing work to an external queue with no shared lease backend (spec
"Where posting from another flow works, and where it doesn't")."""

from __future__ import annotations

import pytest

from mailboxes.models import Delivery, Line
from seats.capabilities import POST_TO_MAILBOX_TOOL
from tests.conftest import MEMBER
from workforce.dispatch import dispatch
from workforce.models import Request
from workforce.refusals import Refusal
from workforce.tools import ToolContext, refusal_code


@pytest.fixture
def external(settings):
    settings.WORKFORCE_EXTERNAL_DISPATCHER = True


def test_a_client_post_lands_and_the_fan_out_records_it_did_not_start(wired, post, org, external):
    wired()
    answer = post("eng.standup", "anyone?")
    assert answer.status == "completed"
    assert Line.objects.filter(body="anyone?").exists()
    assert not Delivery.objects.exists()
    [fan_out] = Request.objects.filter(session__session_id="eng.standup", action="notify")
    assert fan_out.status == "failed" and fan_out.error["reason"] == "external-dispatcher"
    assert not Request.objects.filter(action="onMailboxPost").exists()


def test_a_flow_to_flow_post_is_refused(wired, org, external):
    wired()
    with pytest.raises(Refusal) as refused:
        dispatch(org=org, kind="mailbox", session_id="eng.standup", action="post", payload={"body": "hi"}, user_id=MEMBER)
    assert refused.value.reason == "external-dispatcher"
    assert not Line.objects.exists()


def test_the_tool_call_fails_with_external_dispatcher(wired, org, external):
    wired()
    result = POST_TO_MAILBOX_TOOL.call(ToolContext(org=org, seat_id="eng.lead"), {"mailbox": "eng.standup", "body": "hi"})
    assert refusal_code(result) == "external-dispatcher"
    assert not Line.objects.exists()


def test_a_delivery_already_queued_fails_by_name(wired, org, settings, django_capture_on_commit_callbacks):
    from mailboxes.deliveries import do_deliver
    from workforce.sessions import do_run_action

    wired()
    with django_capture_on_commit_callbacks(execute=False):  # queued, not yet run
        do_run_action(org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": "x"}, user_id=MEMBER)
    settings.WORKFORCE_EXTERNAL_DISPATCHER = True
    delivery = Delivery.objects.get(member="eng.lead")
    assert do_deliver(delivery.pk) == "failed"
    [record] = Request.objects.filter(session__session_id="eng.standup", action="deliverPost", input__member="eng.lead")
    assert record.error["reason"] == "external-dispatcher"
