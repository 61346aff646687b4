"""Requests the server records on its own (fan-out, routes, failed deliveries)."""

from __future__ import annotations

from workforce.models import Session
from workforce.refusals import Refusal
from workforce.sessions import do_record_failed_request, do_record_request


def test_a_recorded_request_never_finishes_before_it_was_created(org):
    session = Session.objects.create(organization=org, session_id="eng.standup", flow_kind="mailbox", user_id="u")
    done = do_record_request(session, action="notify", input={}, user_id="u", output={"ok": True})
    failed = do_record_failed_request(
        session=session, action="deliverPost", input={}, user_id="u", refusal=Refusal("external-dispatcher", "x")
    )
    for request in (done, failed):
        request.refresh_from_db()
        assert request.created_at <= request.started_at <= request.finished_at
    assert (done.status, failed.status) == ("completed", "failed")
    assert failed.error == {"reason": "external-dispatcher", "message": "external-dispatcher: x"}
