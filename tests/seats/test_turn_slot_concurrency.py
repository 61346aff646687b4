"""One turn at a time per seat per conversation, under real concurrency on PostgreSQL
(spec "Waking agent seats": the second post a seat hears lands in the same
conversation, so it remembers the thread; two posts that arrive together each run once,
in no guaranteed order).

Two deliveries of one seat in one conversation, run by two threads at the same moment,
run one after the other: the second finds the seat's turn slot taken, hands its claim
back and waits; the first, when its turn ends, frees the slot and enqueues it (sync
cluster: it runs right there). Each turn's items are contiguous. The controls: the
same seat in two conversations still runs both turns at once, and without the slot
the two turns of one conversation overlap and interleave their items."""

from __future__ import annotations

import threading
import time

import pytest

from mailboxes import deliveries, fairness, notify
from mailboxes.models import Delivery
from seats import turns
from seats.models import TurnSlot, TurnWait
from tests.conftest import MEMBER, mailbox_md, run_in_threads
from tests.seats.conftest import ECHO_LISTENER
from workforce.llm import ModelReply, set_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import do_run_action

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TREE = {
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", members=("eng.lead",)),
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Standup.", members=("eng.lead",)),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
}
TURN_SECONDS = 1.0


class SlowModel:
    """eng.lead's model and its resolver: each call takes ``TURN_SECONDS`` and notes
    when it ran. Calls run side by side (the mock resolver of ``workforce.testing``
    answers one call at a time, which would hide an overlap)."""

    def __init__(self):
        self.spans: list[tuple[float, float, str]] = []
        self.lock = threading.Lock()

    def resolve(self, model_id: str, *, block: str = "") -> SlowModel:
        return self

    def complete(self, call) -> ModelReply:
        turn = next(m["content"] for m in reversed(call.messages) if m["role"] == "user")
        start = time.monotonic()
        time.sleep(TURN_SECONDS)
        with self.lock:
            self.spans.append((start, time.monotonic(), turn))
        return ModelReply(text=f"reply to {turn.rsplit(': ', 1)[-1]}")

    def overlapped(self) -> bool:
        (a0, a1, _), (b0, b1, _) = sorted(self.spans)
        return b0 < a1


@pytest.fixture
def model():
    slow = SlowModel()
    set_model_resolver(slow)
    return slow


@pytest.fixture
def pending(wired, org, monkeypatch, model):
    """``pending(*mailboxes) -> [Delivery]``: one committed post per mailbox named
    (``post 1``, ``post 2``, ...), their deliveries written but not handed to the cluster."""
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired(TREE)

    def _pending(*mailboxes: str) -> list[Delivery]:
        for n, mailbox in enumerate(mailboxes, start=1):
            do_run_action(org=org, kind="mailbox", session_id=mailbox, action="post", input={"body": f"post {n}"}, user_id=MEMBER)
        return list(Delivery.objects.order_by("pk"))

    return _pending


def conversation_items(session_id: str) -> list[tuple[str, str]]:
    """``(role, text)`` of the conversation's message items, in order."""
    items = Item.objects.filter(session__session_id=session_id, type="message").order_by("seq")
    return [(i.data["role"], i.data["text"]) for i in items]


def test_two_deliveries_of_one_seat_in_one_conversation_run_one_after_the_other(pending, model):
    first, second = pending("eng.incidents", "eng.incidents")
    outcomes = run_in_threads(lambda i: deliveries.do_deliver((first, second)[i].pk), 2)
    # One ran at once; the other found the seat busy, waited, and was run by the first's
    # release (sync cluster: in the same thread) once that turn had ended.
    assert sorted(outcomes) == ["done", "waiting"]
    assert not model.overlapped()
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    assert [d.attempts for d in Delivery.objects.order_by("pk")] == [1, 1]  # the wait gave its claim back
    items = conversation_items("eng.incidents:eng.lead")
    assert [role for role, _ in items] == ["user", "assistant", "user", "assistant"]
    heard = [text.rsplit(": ", 1)[-1] for role, text in items if role == "user"]
    assert items[1] == ("assistant", f"reply to {heard[0]}") and items[3] == ("assistant", f"reply to {heard[1]}")
    assert sorted(heard) == ["post 1", "post 2"]
    turns_run = Request.objects.filter(session__session_id="eng.incidents:eng.lead", action=ON_MAILBOX_POST)
    assert sorted(t.status for t in turns_run) == ["completed", "completed"]
    assert TurnWait.objects.count() == 0
    assert TurnSlot.objects.get(seat_id="eng.lead").claim_token == ""


def test_control_the_same_seat_in_two_conversations_runs_both_turns_at_once(pending, model):
    incidents, standup = pending("eng.incidents", "eng.standup")
    outcomes = run_in_threads(lambda i: deliveries.do_deliver((incidents, standup)[i].pk), 2)
    assert outcomes == ["done", "done"]
    assert model.overlapped()  # the rule is per conversation: nothing else waits


def test_control_without_the_slot_two_turns_of_one_conversation_overlap_and_interleave(pending, model, monkeypatch):
    monkeypatch.setattr(turns, "take_turn_slot", lambda *args, **kwargs: "no-rule")
    monkeypatch.setattr(turns, "free_turn_slot", lambda *args, **kwargs: True)
    # The wake takes and frees the slot inside its own transactions (take_slot, free_slot).
    monkeypatch.setattr(deliveries, "take_slot", lambda *args, **kwargs: "no-rule")
    monkeypatch.setattr(deliveries, "free_slot", lambda *args, **kwargs: True)
    monkeypatch.setattr(deliveries, "free_turn_slot", lambda *args, **kwargs: True)
    first, second = pending("eng.incidents", "eng.incidents")
    outcomes = run_in_threads(lambda i: deliveries.do_deliver((first, second)[i].pk), 2)
    assert outcomes == ["done", "done"]
    assert model.overlapped()
    roles = [role for role, _ in conversation_items("eng.incidents:eng.lead")]
    assert roles == ["user", "user", "assistant", "assistant"]  # the departure the slot closes


def test_many_callers_at_once_get_one_slot_and_every_other_one_waits(wired, org):
    """The slot itself: of eight tasks taking it at the same moment exactly one holds it;
    the seven others each leave one wait, and freeing it wakes the oldest."""
    wired(TREE)
    do_run_action(org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": "x"}, user_id=MEMBER)
    session = Session.objects.get(session_id="eng.incidents:eng.lead")
    tokens = run_in_threads(lambda i: turns.take_turn_slot(session, "eng.lead", wake=turns.Wake("tests.noop", (i,))), 8)
    held = [t for t in tokens if t is not None]
    assert len(held) == 1
    assert TurnWait.objects.count() == 7
    woken = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(turns, "enqueue", lambda task, *args: woken.append((task, args)))
        assert turns.free_turn_slot(session, "eng.lead", held[0]) is True
    assert len(woken) == 1 and TurnWait.objects.count() == 6
