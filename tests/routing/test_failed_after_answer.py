"""A delivery whose answer line is stored is not failed by a model failure that came
after it (issue 24, "Models" item 1: deliveries "failed for good although their answer
line was already in the transcript"): the delivery is done, the post keeps its one
answer line, and the turn's request stays failed with the model's error, for operators."""

from __future__ import annotations

from mailboxes.models import Delivery
from workforce.llm import ModelError
from workforce.models import Request

from .conftest import DESK, DEVICES, lines, ok
from .test_answer import tool_call, with_tool


def test_a_model_failure_after_the_tool_answered_leaves_the_delivery_done(routed, post):
    routed(with_tool(), scripts={DEVICES: [{"tool_calls": [tool_call(DESK, "done")]}, ModelError("429 rate limited")], "*": ok})
    post("my printer is jammed")
    assert [ln.body for ln in lines()] == ["my printer is jammed", "done"]
    delivery = Delivery.objects.get(member=DEVICES)
    assert delivery.status == "done" and delivery.error is None
    turn = Request.objects.get(session__session_id=f"{DESK}:{DEVICES}")
    assert turn.status == "failed" and turn.error["reason"] == "model-error" and "429 rate limited" in turn.error["message"]
    assert delivery.output == {"requestId": turn.request_id}
    # Nothing recorded the delivery as failed.
    assert not Request.objects.filter(session__session_id=DESK, action="deliverPost").exists()


def test_a_model_failure_before_any_answer_still_fails_the_delivery(routed, post):
    routed(with_tool(), scripts={DEVICES: [ModelError("503 overloaded")], "*": ok})
    post("my printer is jammed")
    assert [ln.body for ln in lines()] == ["my printer is jammed"]
    delivery = Delivery.objects.get(member=DEVICES)
    assert delivery.status == "failed" and delivery.error["reason"] == "model-error"
    [record] = Request.objects.filter(session__session_id=DESK, action="deliverPost")
    assert record.status == "failed" and "503 overloaded" in record.error["message"]


def test_the_sweep_settles_an_answered_delivery_out_of_claims_as_done(routed, post, settings):
    from datetime import timedelta

    from django.utils import timezone

    from mailboxes.deliveries import do_sweep_deliveries

    routed(with_tool(), scripts={DEVICES: [{"tool_calls": [tool_call(DESK, "done")]}, "and the reply"], "*": ok})
    post("my printer is jammed")
    turn = Request.objects.get(session__session_id=f"{DESK}:{DEVICES}")
    # What a worker that died after the answer landed, on the delivery's last claim, leaves.
    Request.objects.filter(pk=turn.pk).update(status="running", error=None)
    Delivery.objects.filter(member=DEVICES).update(
        status="running",
        attempts=settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS,
        claim_token="gone",
        lease_until=timezone.now() - timedelta(seconds=1),
    )
    result = do_sweep_deliveries()
    assert result.abandoned == []
    delivery = Delivery.objects.get(member=DEVICES)
    assert delivery.status == "done" and delivery.error is None
    assert not Request.objects.filter(session__session_id=DESK, action="deliverPost").exists()
    turn.refresh_from_db()
    assert turn.status == "aborted"  # not left active
    assert [ln.body for ln in lines()] == ["my printer is jammed", "done"]
