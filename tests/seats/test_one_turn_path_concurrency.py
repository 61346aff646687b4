"""``onMailboxPost`` by dispatch takes its seat's turn slot as every other turn does
(``seats.turns.drive_turn``), under real concurrency on PostgreSQL: a dispatch and a
delivery of the same seat in the same conversation, run by two threads at the same
moment, never run the seat's model at once. Whichever takes the slot first runs; the
dispatch, which cannot wait, is refused ``seat-busy`` when the delivery holds it, and
the delivery waits for a dispatch that holds it (the dispatch's action commits the
slot's hold with the turn's start, and its model runs after that commit) and is run
when the dispatch frees it."""

from __future__ import annotations

import pytest

from mailboxes import deliveries
from seats.models import TurnSlot, TurnWait
from tests.conftest import OWNER, run_in_threads
from tests.seats.test_turn_slot_concurrency import conversation_items, model, pending  # noqa: F401 (fixtures)
from workforce.dispatch import dispatch
from workforce.notify import ON_MAILBOX_POST

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CONVERSATION = "eng.incidents:eng.lead"


def test_a_dispatch_and_a_delivery_of_one_seat_never_run_its_turns_at_once(pending, model, org):  # noqa: F811
    first, second = pending("eng.incidents", "eng.incidents")
    assert deliveries.do_deliver(first.pk) == "done"  # the conversation and its slot exist
    model.spans.clear()
    payload = {"mailboxId": "eng.incidents", "member": "eng.lead", "postId": "p-direct", "body": "direct", "principal": OWNER}

    def run(i: int):
        if i == 0:
            return deliveries.do_deliver(second.pk)
        request = dispatch(org=org, kind="agent", session_id=CONVERSATION, action=ON_MAILBOX_POST, payload=payload, user_id=OWNER)
        return request.status, (request.error or {}).get("reason")

    delivered, dispatched = run_in_threads(run, 2)
    assert dispatched in {("completed", None), ("failed", "seat-busy")}
    # The delivery ran at once, or found the dispatch's hold, waited, and was run by its
    # release (sync cluster: in the dispatch's thread).
    assert delivered == "done" or (delivered == "waiting" and dispatched == ("completed", None))
    second.refresh_from_db()
    assert second.status == "done"
    if dispatched[0] == "completed":
        assert len(model.spans) == 2 and not model.overlapped()
    else:
        assert len(model.spans) == 1
    roles = [role for role, _ in conversation_items(CONVERSATION)]
    assert roles == ["user", "assistant"] * (len(roles) // 2)  # each turn's items contiguous
    assert len(roles) == 2 * (1 + len(model.spans))
    assert TurnSlot.objects.get(seat_id="eng.lead").claim_token == ""
    assert not TurnWait.objects.exists()
