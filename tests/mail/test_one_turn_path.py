"""Every turn runs through one function (``seats.turns.drive_turn``): a mail run
(``mail``) and a chat turn (``chat``), each through its real entry point."""

from __future__ import annotations

from rest_framework.test import APIClient

from mail.models import ChatRun, MailRun
from seats.models import TurnSlot
from tests.mail.test_chat import TREE as CHAT_TREE
from tests.mail.test_send import mail_turns
from tests.turn_log import spy_drive_turn


def test_a_mail_run_runs_its_turn_through_the_one_function(agents, org, send, monkeypatch):
    agents()
    kinds = spy_drive_turn(monkeypatch)
    thread = send("eng.alpha", "Can you look at the printer?")
    assert kinds == ["mail"]
    assert MailRun.objects.get(thread=thread).status == "done"
    [turn] = mail_turns(org, "eng.alpha")
    assert turn.status == "completed" and turn.output["toolCalls"] == ["mail_reply"]
    assert TurnSlot.objects.get(session__session_id="mail:eng.alpha").claim_token == ""


def test_a_chat_turn_runs_through_the_one_function(agents, committed, monkeypatch):
    agents(CHAT_TREE)
    kinds = spy_drive_turn(monkeypatch)
    response = committed(APIClient().post, "/api/workers/eng.chatty/chat", {"userId": "ann", "message": "one"}, format="json")
    assert response.status_code == 202
    assert kinds == ["chat"]
    run = ChatRun.objects.get(request__request_id=response.json()["requestId"])
    assert run.status == "done" and run.request.output["reply"] == "eng.chatty heard: one"
    assert TurnSlot.objects.get(session__session_id="chat:eng.chatty:ann").claim_token == ""
