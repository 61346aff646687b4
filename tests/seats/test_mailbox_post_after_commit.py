"""``onMailboxPost`` by dispatch runs its seat's model outside any database transaction
(``seats.turns``: no model call inside a transaction): the action's transaction commits
the turn's start and slot with the request running, and the model runs after it
(``workforce.sessions.AfterCommit``), before the dispatch returns. Run in transactional
tests (no test-wide transaction around them), on both databases."""

from __future__ import annotations

import pytest
from django.db import connection

from seats.models import TurnSlot
from tests.conftest import OWNER
from tests.turn_log import TURN_LOG, ScriptedTurn, turn_log
from workforce.cancelling import do_cancel_request
from workforce.dispatch import dispatch
from workforce.llm import use_model_resolver
from workforce.models import Item, Request
from workforce.notify import ON_MAILBOX_POST
from workforce.testing import create_mock_model_resolver

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = "eng.incidents:eng.lead"


def _dispatch(org, post_id: str = "p-1") -> Request:
    payload = {"mailboxId": "eng.incidents", "member": "eng.lead", "postId": post_id, "body": "direct", "principal": OWNER}
    return dispatch(org=org, kind="agent", session_id=CONVERSATION, action=ON_MAILBOX_POST, payload=payload, user_id=OWNER)


class OutsideTransactions(ScriptedTurn):
    """The scripted turn, noting for each model call whether a transaction was open."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.in_transaction: list[bool] = []

    def __call__(self, call):
        self.in_transaction.append(connection.in_atomic_block)
        return super().__call__(call)


def test_the_model_of_a_dispatched_on_mailbox_post_runs_outside_any_transaction(wired, org):
    wired()
    script = OutsideTransactions(ON_MAILBOX_POST)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script})):
        request = _dispatch(org)
    assert script.in_transaction == [False, False]  # both model calls
    assert script.statuses == ["running", "running"]  # the request committed running, seen by the model's reads
    request.refresh_from_db()
    assert request.status == "completed" and request.output == {"reply": "the reply", "toolCalls": ["no-such-tool"]}
    assert turn_log(request) == TURN_LOG
    slot = TurnSlot.objects.get(session__session_id=CONVERSATION, seat_id="eng.lead")
    assert slot.claim_token == "" and slot.lease_until is None


def test_a_dispatched_turn_that_fails_after_the_commit_fails_its_request_and_frees_the_slot(wired, org):
    wired()
    script = OutsideTransactions(ON_MAILBOX_POST, fail=True)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script})):
        request = _dispatch(org)
    assert script.in_transaction == [False]
    request.refresh_from_db()
    assert request.status == "failed" and request.error["reason"] == "model-error"
    assert Request.objects.filter(action=ON_MAILBOX_POST).count() == 1  # failed in place, not recorded twice
    assert TurnSlot.objects.get(seat_id="eng.lead").claim_token == ""
    with use_model_resolver(create_mock_model_resolver({"eng.lead": lambda call: "again"})):
        assert _dispatch(org, "p-2").status == "completed"


def test_a_dispatched_turn_cancelled_while_its_model_runs_stays_aborted(wired, org):
    # The request is committed running while the model runs, so it can be cancelled
    # (inside the transaction it could not: nobody else saw it).
    wired()

    def cancel_then_answer(call):
        running = Request.objects.get(action=ON_MAILBOX_POST, status="running")
        do_cancel_request(org, running.request_id, user_id=OWNER)
        return "too late"

    with use_model_resolver(create_mock_model_resolver({"eng.lead": cancel_then_answer})):
        request = _dispatch(org)
    request.refresh_from_db()
    assert request.status == "aborted" and request.error["reason"] == "cancelled"
    assert not Item.objects.filter(request=request, data__role="assistant").exists()  # no reply posted
    assert TurnSlot.objects.get(seat_id="eng.lead").claim_token == ""
