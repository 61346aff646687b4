"""Chat beside mail (spec "Mail versus chat"): started by a person, stored in the office
database (a private session per person and agent), run kind ``chat``, admitted by the
worker's run.triggers."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mail.models import ChatRun, Thread
from workforce.llm import set_model_resolver
from workforce.models import Request, Session
from workforce.testing import create_mock_model_resolver

CHATTY = """---
description: Chats.
model: embedded/echo
run:
  triggers: [chat]
---

Chat.
"""
MAIL_ONLY = """---
description: Mail only.
model: embedded/echo
run:
  triggers: [mail]
---

Mail.
"""
TREE = {"teams/eng/workers/chatty/WORKER.md": CHATTY, "teams/eng/workers/mailer/WORKER.md": MAIL_ONLY}


@pytest.fixture
def client():
    return APIClient()


def chat(client, committed, worker: str, message: str, user: str = "ann"):
    return committed(client.post, f"/api/workers/{worker}/chat", {"userId": user, "message": message}, format="json")


def test_a_person_chats_with_an_agent_run_kind_chat(client, agents, committed):
    agents(TREE)
    answer = chat(client, committed, "eng.chatty", "hello")
    assert answer.status_code == 202, answer.json()
    body = answer.json()
    assert body["sessionId"] == "chat:eng.chatty:ann" and body["flowKind"] == "chat" and body["action"] == "onChat"
    done = client.get(f"/api/requests/{body['requestId']}?userId=ann").json()
    assert done["status"] == "completed"
    assert done["output"]["runKind"] == "chat" and done["output"]["reply"] == "eng.chatty heard: hello"
    request = Request.objects.get(request_id=body["requestId"])
    assert request.input == {"message": "hello", "worker": "eng.chatty", "runKind": "chat"}
    assert ChatRun.objects.get(request=request).status == "done"
    items = client.get("/api/sessions/chat:eng.chatty:ann/items?userId=ann").json()["items"]
    assert [(i["data"]["role"], i["data"]["text"]) for i in items] == [
        ("user", "hello"),
        ("assistant", "eng.chatty heard: hello"),
    ]
    assert not Thread.objects.exists()  # chat is not mail: nothing on a vault


def test_another_person_cannot_read_the_chat(client, agents, committed):
    agents(TREE)
    body = chat(client, committed, "eng.chatty", "private").json()
    assert client.get("/api/sessions/chat:eng.chatty:ann/items?userId=bob").status_code == 404
    assert client.get(f"/api/requests/{body['requestId']}?userId=bob").status_code == 404
    assert client.get("/api/sessions/chat:eng.chatty:ann/items").status_code == 404  # nobody named


def test_the_next_turn_remembers_the_conversation(client, agents, committed):
    seen = []

    def look(call):
        seen.append([m["content"] for m in call.messages if m["role"] != "system"])
        return f"answer {len(seen)}"

    agents(TREE)
    set_model_resolver(create_mock_model_resolver({"eng.chatty": look}))
    chat(client, committed, "eng.chatty", "first")
    chat(client, committed, "eng.chatty", "second")
    assert seen[1] == ["first", "answer 1", "second"]


@pytest.mark.parametrize(
    "worker, message, status, reason",
    [
        ("eng.mailer", "hi", 409, "trigger-not-allowed"),
        ("eng.nobody", "hi", 404, "recipient-not-found"),
        ("eng.chatty", "  ", 400, "invalid-input"),
    ],
)
def test_refused_chats_write_nothing(client, agents, committed, worker, message, status, reason):
    agents(TREE)
    answer = chat(client, committed, worker, message)
    assert answer.status_code == status and answer.json()["error"]["reason"] == reason
    assert not Session.objects.filter(flow_kind="chat").exists() and not ChatRun.objects.exists()


def test_a_redelivered_chat_task_runs_the_turn_once(client, agents, committed):
    from mail.chat import do_run_chat

    agents(TREE)
    chat(client, committed, "eng.chatty", "once")
    run = ChatRun.objects.get()
    assert committed(do_run_chat, run.pk) == "not-claimed"
    assert Request.objects.get(pk=run.request_id).items.filter(type="message").count() == 2
