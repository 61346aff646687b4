"""Every turn runs through one function (``seats.turns.drive_turn``): here the callers
in the seats and mailboxes layers, each through its real entry point: a mailbox
delivery (``delivery``), a delivery to a kind of your own (``delivery-other-kind``) and
``onMailboxPost`` by dispatch (``mailbox-post``), which now takes the seat's turn slot
like every other caller. The board row, the coordinator's callers and mail's are
checked beside their own fixtures (``tests/boards``, ``tests/coordinators``,
``tests/mail``)."""

from __future__ import annotations

from mailboxes.models import Delivery
from seats.models import TurnSlot, TurnWait
from seats.turns import TURN_KINDS, Wake, free_turn_slot, take_turn_slot
from tests.conftest import OWNER
from tests.seats.conftest import SEATS_TREE, worker_md
from tests.turn_log import TURN_LOG, ScriptedTurn, spy_drive_turn, turn_log
from workforce.dispatch import dispatch
from workforce.flows import Action, FlowKind, registry
from workforce.llm import use_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput
from workforce.testing import create_mock_model_resolver

CONVERSATION = "eng.incidents:eng.lead"


def _dispatch_on_mailbox_post(org, post_id: str) -> Request:
    payload = {"mailboxId": "eng.incidents", "member": "eng.lead", "postId": post_id, "body": "direct", "principal": OWNER}
    return dispatch(org=org, kind="agent", session_id=CONVERSATION, action=ON_MAILBOX_POST, payload=payload, user_id=OWNER)


def test_the_eight_callers_are_named():
    assert TURN_KINDS == (
        "delivery",
        "delivery-other-kind",
        "mailbox-post",
        "board-row",
        "delegated-post",
        "coordinator",
        "mail",
        "chat",
    )


def test_a_mailbox_delivery_runs_its_turn_through_the_one_function(wired, post, monkeypatch):
    wired()
    kinds = spy_drive_turn(monkeypatch)
    with use_model_resolver(create_mock_model_resolver({"*": lambda call: "ok"})):
        post("eng.incidents", "hi")
    woken = Delivery.objects.filter(mode="wake")
    assert woken.count() == 2 and set(woken.values_list("status", flat=True)) == {"done"}
    assert kinds == ["delivery", "delivery"]  # one per delivery, each its seat's turn


def test_a_delivery_to_a_kind_of_your_own_runs_through_the_one_function(wired, post, monkeypatch):
    seen = []

    def triage(ctx, data):
        seen.append(data["member"])
        return {"triaged": True}

    registry.register(
        FlowKind(
            kind="triager",
            internal_actions={ON_MAILBOX_POST: Action(ON_MAILBOX_POST, triage, MailboxNotifyInput)},
            facets={"worker": True, "tools": {}},
        )
    )
    try:
        files = dict(SEATS_TREE)
        files["teams/eng/workers/analyst/WORKER.md"] = worker_md("Triages.", flow="triager")
        wired(files)
        kinds = spy_drive_turn(monkeypatch)
        with use_model_resolver(create_mock_model_resolver({"*": lambda call: "ok"})):
            post("eng.incidents", "disk full")
        assert seen == ["eng.analyst"]
        assert sorted(kinds) == ["delivery", "delivery", "delivery-other-kind"]  # the analyst's: claimed, then run after
        delivery = Delivery.objects.get(member="eng.analyst")
        assert delivery.status == "done" and delivery.turn_request.output == {"triaged": True}
        assert TurnSlot.objects.get(session__session_id="eng.incidents:eng.analyst").claim_token == ""
    finally:
        registry.unregister("triager")


def test_on_mailbox_post_by_dispatch_runs_through_the_one_function_under_the_slot(wired, org, monkeypatch):
    wired()
    kinds = spy_drive_turn(monkeypatch)
    script = ScriptedTurn(ON_MAILBOX_POST)
    with use_model_resolver(create_mock_model_resolver({"eng.lead": script})):
        request = _dispatch_on_mailbox_post(org, "p-1")
    assert kinds == ["mailbox-post"]
    assert request.status == "completed" and turn_log(request) == TURN_LOG
    slot = TurnSlot.objects.get(session__session_id=CONVERSATION, seat_id="eng.lead")
    assert slot.claim_token == "" and slot.lease_until is None  # taken for the turn, freed with its commit


def test_on_mailbox_post_by_dispatch_is_refused_while_the_seat_runs_a_turn_there(wired, org):
    # Before the one path, a dispatch ran the model beside the delivery's turn in the
    # same conversation (it took no slot).
    wired()
    conversation = Session.objects.create(
        organization=org, session_id=CONVERSATION, flow_kind="agent", user_id=OWNER, state={"seat": "eng.lead"}
    )
    holder = take_turn_slot(conversation, "eng.lead", wake=Wake("tests.holder"))
    assert holder
    model = create_mock_model_resolver({"eng.lead": lambda call: "should not run"})
    with use_model_resolver(model):
        request = _dispatch_on_mailbox_post(org, "p-1")
    assert request.status == "failed" and request.error["reason"] == "seat-busy"
    assert request.error["message"] == (
        f"seat-busy: eng.lead is running a turn in {CONVERSATION}; dispatch this post again later."
    )
    assert model.calls_for("eng.lead") == []
    assert not Item.objects.filter(request=request).exists()
    assert TurnWait.objects.count() == 0  # a dispatch never waits
    assert TurnSlot.objects.get(seat_id="eng.lead").claim_token == holder  # the holder's turn is left alone
    assert free_turn_slot(conversation, "eng.lead", holder) is True
    with use_model_resolver(create_mock_model_resolver({"eng.lead": lambda call: "now"})):
        again = _dispatch_on_mailbox_post(org, "p-2")
    assert again.status == "completed" and again.output["reply"] == "now"
