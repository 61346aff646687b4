"""One turn at a time per seat per conversation (spec "Waking agent seats"), for the
runs mail starts: a mail to an agent still running a turn in its mail session, and a
chat message sent while the agent still answers the last one, wait for that turn and
then run, with their claim handed back untouched."""

from __future__ import annotations

from rest_framework.test import APIClient

from mail.models import ChatRun, MailRun
from mail.runs import RUN_TASK, mail_session
from seats.models import Seat, TurnWait
from seats.turns import Wake, free_turn_slot, take_turn_slot
from tests.mail.test_chat import TREE as CHAT_TREE
from tests.mail.test_send import mail_turns
from workforce.models import Session
from workforce.refusals import Refusal


def test_a_mail_to_an_agent_still_running_a_turn_waits_and_runs_when_it_ends(agents, org, send, committed):
    agents()
    seat = Seat.objects.get(seat_id="eng.alpha")
    session = mail_session(org, seat)
    holder = take_turn_slot(session, "eng.alpha", wake=Wake("tests.holder"))  # a mail turn still running
    thread = send("eng.alpha", "Can you look at the printer?")
    run = MailRun.objects.get(thread=thread)
    assert (run.status, run.attempts, run.claim_token) == ("pending", 0, "")
    assert list(TurnWait.objects.values_list("task", "args")) == [(RUN_TASK, [run.pk])]
    assert mail_turns(org, "eng.alpha") == []
    committed(free_turn_slot, session, "eng.alpha", holder)  # that turn ended
    run.refresh_from_db()
    assert (run.status, run.attempts) == ("done", 1)
    [turn] = mail_turns(org, "eng.alpha")
    assert turn.status == "completed" and turn.output["toolCalls"] == ["mail_reply"]
    assert not TurnWait.objects.exists()


def test_a_chat_message_sent_while_the_agent_still_answers_waits_its_turn(agents, committed):
    agents(CHAT_TREE)
    client = APIClient()
    first = committed(client.post, "/api/workers/eng.chatty/chat", {"userId": "ann", "message": "one"}, format="json")
    assert first.status_code == 202
    session = Session.objects.get(session_id="chat:eng.chatty:ann")
    holder = take_turn_slot(session, "eng.chatty", wake=Wake("tests.holder"))  # still answering
    second = committed(client.post, "/api/workers/eng.chatty/chat", {"userId": "ann", "message": "two"}, format="json")
    run = ChatRun.objects.get(request__request_id=second.json()["requestId"])
    assert (run.status, run.attempts) == ("pending", 0)
    waiting = client.get("/api/sessions/chat:eng.chatty:ann/items?userId=ann").json()["items"]
    assert [i["data"]["text"] for i in waiting] == ["one", "eng.chatty heard: one"]  # "two" is written when it runs
    committed(free_turn_slot, session, "eng.chatty", holder)
    run.refresh_from_db()
    assert run.status == "done"
    items = client.get("/api/sessions/chat:eng.chatty:ann/items?userId=ann").json()["items"]
    assert [(i["data"]["role"], i["data"]["text"]) for i in items] == [
        ("user", "one"),
        ("assistant", "eng.chatty heard: one"),
        ("user", "two"),
        ("assistant", "eng.chatty heard: two"),
    ]


def test_a_mail_the_vault_refuses_to_mark_working_fails_its_run_with_that_refusal(agents, org, send, monkeypatch):
    # The refusal comes before the turn starts: the run fails with it, no turn is recorded.
    agents()

    def refuse(org, thread):
        raise Refusal("vault-unavailable", "the vault is locked")

    monkeypatch.setattr("mail.runs.do_mark_working", refuse)
    thread = send("eng.alpha", "Can you look at the printer?")
    run = MailRun.objects.get(thread=thread)
    assert (run.status, run.error["reason"], run.request_id) == ("failed", "vault-unavailable", None)
    assert mail_turns(org, "eng.alpha") == []
