"""Who said what in a chat with an agent and in an agent's mail session (docs/architecture.md
"Who said what"): the person's message in a chat (``POST /api/workers/{worker}/chat``, the
desk's chat form, the MCP tool ``agent_chat``) names the caller the server resolved, the
agent's reply its seat, in the API (the session's items), the stream and the pages (the
desk and the conversation page), with a token and without authentication. No body, form
field or tool argument sets it. A turn's prompt the server builds (a mail run's) carries
none."""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth.models import User
from mcp import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mail.mcp_server import build_server
from mail.models import ChatRun
from tests.mail.conftest import ECHO_READER
from tests.posted_by import ALICE, BOB, MODES, Acting, page_writers, people, seat, stream_events, stream_items, user
from workforce.models import Item

CHATTY = "---\ndescription: Chats.\nmodel: embedded/echo\nrun:\n  triggers: [chat, mail]\n---\n\nChat.\n"
AGENT = "eng.chatty"
TREE = {"teams/eng/workers/chatty/WORKER.md": CHATTY, "teams/eng/workers/reader/WORKER.md": ECHO_READER}


def chat_session(name: str) -> str:
    return f"chat:{AGENT}:{name}"


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture(params=MODES)
def mode(request, settings) -> str:
    settings.WORKFORCE_AUTH = request.param
    return request.param


@pytest.fixture
def acting(client, org, mode, agents) -> Acting:
    """eng.chatty (an echo agent that takes chat and mail) and eng.reader hired; alice and
    bob able to call."""
    agents(TREE)
    return Acting(client, people(org), mode)


@pytest.fixture
def chat(acting, committed):
    """``chat(name, message, **extra) -> response``: ``name`` chats with eng.chatty over
    the API (``userId`` only without authentication), the turn run (sync cluster)."""

    def _chat(name: str, message: str, **extra):
        acting.be(name)
        body = {**({"userId": name} if acting.mode == "none" else {}), "message": message, **extra}
        return committed(acting.client.post, f"/api/workers/{AGENT}/chat", body, format="json")

    return _chat


def messages(acting: Acting, name: str) -> list[tuple[str, str, dict | None]]:
    """``(role, text, postedBy)`` of each message item of ``name``'s chat, read as them."""
    answer = acting.be(name).client.get(f"/api/sessions/{chat_session(name)}/items{acting.query()}")
    assert answer.status_code == 200, answer.json()
    return [
        (i["data"]["role"], i["data"]["text"], i["data"].get("postedBy"))
        for i in answer.json()["items"]
        if i["type"] == "message"
    ]


def said(name: str, mode: str, *texts: str) -> list[tuple[str, str, dict]]:
    """The chat ``name`` had: each of their messages under their name, each reply under
    the agent's seat."""
    found = []
    for text in texts:
        found += [("user", text, user(name, mode)), ("assistant", f"{AGENT} heard: {text}", seat(AGENT))]
    return found


def test_each_persons_chat_message_names_that_person_and_the_reply_its_seat(acting, chat, mode):
    for name in (ALICE, BOB):
        answer = chat(name, f"hello from {name}")
        assert answer.status_code == 202, answer.json()
    for name in (ALICE, BOB):
        assert messages(acting, name) == said(name, mode, f"hello from {name}")
    assert sorted(run.posted_by["id"] for run in ChatRun.objects.all()) == [ALICE, BOB]


def test_another_person_reads_no_one_elses_chat(acting, chat, mode):
    chat(ALICE, "private")
    acting.be(BOB)
    for path in (f"/api/sessions/{chat_session(ALICE)}/items", f"/sessions/{chat_session(ALICE)}/"):
        assert acting.client.get(f"{path}{acting.query()}").status_code == 404
    if mode == "token":  # naming alice while signed in as bob
        answer = chat(BOB, "as alice", userId=ALICE)
        assert answer.status_code == 403 and answer.json()["error"]["reason"] == "principal-mismatch"
        assert ChatRun.objects.count() == 1


def test_a_postedby_in_the_body_is_refused_and_nothing_is_written(acting, chat):
    answer = chat(ALICE, "hi", postedBy={"kind": "user", "id": BOB, "verified": True})
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    assert "postedBy" in answer.json()["error"]["message"]
    assert not ChatRun.objects.exists() and not Item.objects.filter(type="message").exists()


def test_the_desk_and_the_conversation_page_name_the_person_not_user(acting, committed, mode):
    acting.be(ALICE)
    # The desk's chat form, a forged field beside its own: the form reads only its own.
    forged = {"message": "from the desk", "postedBy": BOB, "userId": BOB}
    assert committed(acting.client.post, f"/mail/desk/{AGENT}/chat", forged).status_code == 302
    assert messages(acting, ALICE) == said(ALICE, mode, "from the desk")
    desk = acting.client.get(f"/mail/desk/{AGENT}/").content.decode()
    shown = [(ALICE, user(ALICE, mode)), (AGENT, seat(AGENT))]
    assert page_writers(desk.split('id="chat"')[1]) == shown
    page = acting.client.get(f"/sessions/{chat_session(ALICE)}/").content.decode()
    assert page_writers(page) == shown
    assert 'data-kind="user"' in page and ("signed in" if mode == "token" else "named, not signed in") in page


@pytest.mark.django_db(transaction=True)  # the SDK runs each tool in a thread of its own
def test_a_postedby_argument_to_agent_chat_is_dropped(acting, mode):
    if mode == "none":
        server = build_server(user_id=ALICE)
    else:
        server = build_server(token=Token.objects.create(user=User.objects.get(username=ALICE)).key)

    async def call():
        async with Client(server) as client:
            forged = {"kind": "user", "id": BOB, "verified": True}
            return await client.call_tool("agent_chat", {"worker": AGENT, "message": "over mcp", "postedBy": forged})

    assert not asyncio.run(call()).is_error
    assert messages(acting, ALICE) == said(ALICE, mode, "over mcp")


@pytest.mark.django_db(transaction=True)
def test_the_stream_and_the_pages_stream_carry_it(acting, chat, mode):
    chat(ALICE, "streamed")
    session = chat_session(ALICE)
    acting.be(ALICE)
    items = stream_items(acting.client, f"/api/sessions/{session}/stream{acting.query() or '?'}&after=0", 2)
    assert [(i["data"]["role"], i["data"].get("postedBy")) for i in items] == [
        ("user", user(ALICE, mode)),
        ("assistant", seat(AGENT)),
    ]
    html = "\n".join(stream_events(acting.client, f"/sessions/{session}/events?after=0", 2))
    assert page_writers(html) == [(ALICE, user(ALICE, mode)), (AGENT, seat(AGENT))]


def test_a_mail_runs_prompt_names_nobody_and_its_reply_the_seat(acting, send, mode):
    """The mail session's prompt is the server's framing of a mail (its sender is in its
    text), written on nobody's behalf: no postedBy; the reply is the seat's."""
    send("eng.reader", "is the build green?")
    acting.be(ALICE)
    items = acting.client.get(f"/api/sessions/mail:eng.reader/items{acting.query()}").json()["items"]
    assert [(i["data"]["role"], i["data"].get("postedBy")) for i in items if i["type"] == "message"] == [
        ("user", None),
        ("assistant", seat("eng.reader")),
    ]
    page = acting.client.get(f"/sessions/mail:eng.reader/{acting.query()}").content.decode()
    assert page_writers(page) == [("user", None), ("eng.reader", seat("eng.reader"))]
