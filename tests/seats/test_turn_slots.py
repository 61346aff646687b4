"""One turn at a time per seat per conversation (spec "Waking agent seats": the second
post a seat hears lands in the same conversation, so it remembers the thread), on
SQLite and PostgreSQL: the turn slot (``seats.turns``) and a mailbox delivery that
finds its seat busy. The coordinator's callers are in ``tests/coordinators``, the board
drain's in ``tests/boards``; real threads in ``test_turn_slot_concurrency.py``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailboxes.models import Delivery
from seats import turns
from seats.models import TurnSlot, TurnWait
from seats.turns import Wake, do_sweep_turn_waits, free_turn_slot, take_turn_slot
from tests.conftest import mailbox_md
from tests.seats.conftest import ECHO_LISTENER
from workforce.leases import LeaseLost
from workforce.llm import set_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.testing import create_mock_model_resolver

TREE = {
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", members=("eng.lead",)),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
}
CONVERSATION = "eng.incidents:eng.lead"
DELIVER = "mailboxes.tasks.deliver_post"


@pytest.fixture
def conversation(wired, post) -> Session:
    """eng.lead's conversation in eng.incidents, after one post it answered."""
    wired(TREE)
    post("eng.incidents", "post 1")
    return Session.objects.get(session_id=CONVERSATION)


def turns_in(session_id: str = CONVERSATION):
    return Request.objects.filter(session__session_id=session_id, action=ON_MAILBOX_POST).order_by("pk")


def messages(session_id: str = CONVERSATION) -> list[tuple[str, str]]:
    items = Item.objects.filter(session__session_id=session_id, type="message").order_by("seq")
    return [(i.data["role"], i.data["text"]) for i in items]


# ----------------------------------------------------------------------------- the slot


def test_a_free_slot_is_taken_once_and_a_second_caller_waits(conversation):
    token = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (1,)))
    assert token
    slot = TurnSlot.objects.get(session=conversation, seat_id="eng.lead")
    assert slot.claim_token == token and slot.lease_until > timezone.now()
    waited = []
    assert take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (2,)), on_wait=lambda: waited.append(1)) is None
    assert take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (2,))) is None  # one wait per caller
    assert waited == [1]
    assert list(TurnWait.objects.values_list("task", "args")) == [("tests.noop", [2])]


def test_another_seat_or_another_session_is_another_slot(conversation, org):
    other = Session.objects.create(organization=org, session_id="eng.other:eng.lead", flow_kind="agent", user_id="u")
    assert take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop"))
    assert take_turn_slot(conversation, "eng.analyst", wake=Wake("tests.noop"))
    assert take_turn_slot(other, "eng.lead", wake=Wake("tests.noop"))


def test_freeing_the_slot_wakes_the_oldest_wait_once(conversation, monkeypatch):
    woken = []
    monkeypatch.setattr(turns, "enqueue", lambda task, *args: woken.append((task, args)))
    token = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (0,)))
    for n in (1, 2):
        take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (n,)))
    assert free_turn_slot(conversation, "eng.lead", token) is True
    assert woken == [("tests.noop", (1,))]
    assert TurnSlot.objects.get(session=conversation).claim_token == ""
    assert list(TurnWait.objects.values_list("args", flat=True)) == [[2]]
    assert free_turn_slot(conversation, "eng.lead", token) is False  # freed already: its token no longer holds it


def test_a_hold_that_lapsed_is_taken_over_and_its_holder_cannot_free_the_new_one(conversation, monkeypatch):
    monkeypatch.setattr(turns, "enqueue", lambda *args: None)
    dead = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop"), now=timezone.now() - timedelta(hours=1))
    live = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (1,)))
    assert live and live != dead
    assert free_turn_slot(conversation, "eng.lead", dead) is False
    assert TurnSlot.objects.get(session=conversation).claim_token == live


def test_a_wait_whose_claim_was_lost_leaves_nothing(conversation):
    take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop"))

    def lost():
        raise LeaseLost()

    with pytest.raises(LeaseLost):
        take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (1,)), on_wait=lost)
    assert not TurnWait.objects.exists()


def test_the_sweep_wakes_who_waits_on_a_slot_whose_holder_died(conversation, monkeypatch):
    woken = []
    monkeypatch.setattr(turns, "enqueue", lambda task, *args: woken.append((task, args)))
    take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop"))
    take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop", (1,)))
    assert do_sweep_turn_waits() == []  # the holder's hold is live: it wakes them itself
    TurnSlot.objects.update(lease_until=timezone.now() - timedelta(seconds=1))
    [wait_id] = do_sweep_turn_waits()
    assert woken == [("tests.noop", (1,))] and not TurnWait.objects.filter(pk=wait_id).exists()
    assert do_sweep_turn_waits() == []


# ----------------------------------------------------------------------------- a delivery


def test_a_post_to_a_seat_still_answering_waits_and_runs_when_the_turn_ends(
    conversation, post, django_capture_on_commit_callbacks
):
    holder = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.claim_token"))  # a turn still running
    post("eng.incidents", "post 2")
    waiting = Delivery.objects.order_by("-pk").first()
    # Nothing ran: the claim was handed back untouched, and the delivery waits its turn.
    assert (waiting.status, waiting.attempts, waiting.claim_token) == ("pending", 0, "")
    assert list(TurnWait.objects.values_list("task", "args")) == [(DELIVER, [waiting.pk])]
    assert turns_in().count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        free_turn_slot(conversation, "eng.lead", holder)  # that turn ended
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempts) == ("done", 1)
    assert [t.status for t in turns_in()] == ["completed", "completed"]
    assert [role for role, _ in messages()] == ["user", "assistant", "user", "assistant"]
    assert messages()[2][1].endswith("post 2")
    assert not TurnWait.objects.exists() and TurnSlot.objects.get(session=conversation).claim_token == ""


def test_a_delivery_frees_its_seats_slot_when_its_turn_fails(conversation, post, resolver_that_fails):
    post("eng.incidents", "post 2")
    assert turns_in().last().status == "failed"
    assert TurnSlot.objects.get(session=conversation).claim_token == ""


@pytest.fixture
def resolver_that_fails():
    set_model_resolver(create_mock_model_resolver({"eng.lead": [RuntimeError("down")]}))


def test_taking_and_freeing_a_slot_costs_a_few_queries_whatever_came_before(conversation, django_assert_num_queries):
    """The slot is on every wake's path: one UPDATE … RETURNING to take it (which also
    says nobody waits, so no wait is looked for) and one to free it, each in its own
    transaction here (the savepoint and its release around it)."""
    for _ in range(3):
        with django_assert_num_queries(3):
            token = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.noop"))
        with django_assert_num_queries(3):
            free_turn_slot(conversation, "eng.lead", token)
