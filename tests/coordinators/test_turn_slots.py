"""One turn at a time per seat per conversation, for the coordinator's two callers
(``seats.turns``; spec "Waking agent seats", 004 "Talking to it"): a delegate's run in
its session for a conversation, and the coordinator's own turn in the conversation. A
caller that finds the seat busy hands its claim back and waits; it runs when the turn
that holds the slot ends. SQLite and PostgreSQL."""

from __future__ import annotations

from coordinators.models import Job
from seats.models import TurnWait
from seats.turns import Wake, free_turn_slot, take_turn_slot
from tests.coordinators.conftest import CONVERSATION, DEVICES, HELP, choose
from workforce.models import Item, Request, Session

DELEGATE_SESSION = f"{CONVERSATION}:{DEVICES}"


def test_a_post_for_a_delegate_still_at_work_in_this_conversation_waits_for_its_turn(desk):
    d = desk(routing="round-robin", delegates=(DEVICES,))
    d.run("post 1")
    session = Session.objects.get(session_id=DELEGATE_SESSION)
    holder = take_turn_slot(session, DEVICES, wake=Wake("tests.holder"))  # its run on post 1 still going
    second = d.run("post 2")
    [waiting] = d.deliveries(post__post_id=second.request_id)
    assert (waiting.status, waiting.attempts, waiting.claim_token) == ("pending", 0, "")
    assert list(TurnWait.objects.values_list("task", "args")) == [("coordinators.tasks.deliver_delegated_post", [waiting.pk])]
    assert Request.objects.filter(session=session, action="onDelegatedPost").count() == 1
    with d.capture(execute=True):
        free_turn_slot(session, DEVICES, holder)
    waiting.refresh_from_db()
    assert (waiting.status, waiting.attempts) == ("answered", 1)
    assert [a for a, _ in d.answers()] == [DEVICES, DEVICES]
    roles = [i.data["role"] for i in Item.objects.filter(session=session, type="message").order_by("seq")]
    assert roles == ["user", "assistant", "user", "assistant"]


def test_the_coordinators_own_turn_waits_while_another_of_its_turns_runs(desk):
    d = desk(routing="judgment")
    session = Session.objects.get(session_id=CONVERSATION)
    holder = take_turn_slot(session, HELP, wake=Wake("tests.holder"))
    post = d.run("Anyone there?")
    job = Job.objects.get(post__post_id=post.request_id)
    assert (job.status, job.attempts) == ("pending", 0)
    assert not Request.objects.filter(session=session, action="judgment").exists()
    assert d.answers() == []
    with d.capture(execute=True):
        free_turn_slot(session, HELP, holder)
    job.refresh_from_db()
    assert job.status == "done"
    assert [r["by"] for r in d.records(post.request_id)] == ["judgment"]
    assert Request.objects.get(session=session, action="judgment").status == "completed"
    assert len(d.answers()) == 1 and d.answers()[0][0].startswith("coordinator-judgment")


def test_best_fits_call_waits_too_so_a_post_costs_one_evaluator_call(desk):
    """Spec 004 "What it costs": best fit adds at most one evaluator call per round. A
    placement that waits for the coordinator's slot has made no call yet."""
    d = desk(routing="best-fit", answers=[choose(DEVICES)])
    session = Session.objects.get(session_id=CONVERSATION)
    holder = take_turn_slot(session, HELP, wake=Wake("tests.holder"))
    post = d.run("My laptop won't charge.")
    assert Job.objects.get(post__post_id=post.request_id).status == "pending"
    assert d.route.calls == [] and d.records(post.request_id) == []
    with d.capture(execute=True):
        free_turn_slot(session, HELP, holder)
    assert len(d.route.calls) == 1
    assert d.records(post.request_id)[0]["by"] == "evaluated"
    assert [a for a, _ in d.answers()] == [DEVICES]
