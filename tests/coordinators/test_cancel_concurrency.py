"""A delegate's run cancelled from another thread, on PostgreSQL (spec 004 "A round
closes…", ``delegatedPostOnFinished``): the cancel reports it at once, while the
delegate's worker is still inside its model call, so its round does not wait."""

from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from tests.conftest import MEMBER
from tests.seats.test_cancel_concurrency import WAIT, Gate, _close
from workforce.models import Request

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_delegates_run_cancelled_from_another_thread_reports_while_its_worker_still_waits(desk, org):
    from coordinators.models import Answer, DelegatedPost
    from tests.coordinators.conftest import ACCOUNTS, DEVICES, echo_script

    gate = Gate("an answer after the cancel")
    d = desk(routing="everyone", rounds=1, delegates=(DEVICES, ACCOUNTS), scripts={DEVICES: gate, ACCOUNTS: echo_script})
    worker = threading.Thread(target=lambda: (d.run("my laptop won't charge"), _close()))
    worker.start()
    try:
        assert gate.entered.wait(WAIT)
        run = Request.objects.get(session__session_id__endswith=f":{DEVICES}", action="onDelegatedPost")
        answer = APIClient().post(f"/api/requests/{run.request_id}/cancel", {"userId": MEMBER}, format="json")
        assert answer.json()["status"] == "aborted"
        # Reported at once: the worker is still inside its model call.
        delivery = DelegatedPost.objects.get(worker=DEVICES, round=0)
        assert (delivery.status, delivery.reported) == ("cancelled", True)
        assert delivery.error == {"reason": "cancelled", "message": "cancelled: its turn failed: its run was cancelled"}
    finally:
        gate.release.set()
        worker.join(WAIT)
    assert not worker.is_alive()
    assert Request.objects.get(pk=run.pk).status == "aborted"
    assert not Answer.objects.filter(worker=DEVICES, round=0).exists()  # its round-0 answer never lands
    assert d.rounds()[0].status == "closed"
