"""The MCP server with token auth, reached in-process by the ``mcp`` SDK's client: it acts
as the token's user, and mail_send needs the ``mail.send`` permission as ``POST
/api/mail`` does."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from mcp import Client
from rest_framework.authtoken.models import Token

from mail.mcp_server import build_server
from mail.models import Thread
from workforce.models import Membership
from workforce.refusals import Refusal

pytestmark = pytest.mark.django_db(transaction=True)


def person(org, name: str, *, may_send: bool) -> str:
    user = User.objects.create_user(name, email=f"{name}@example.org")
    Membership.objects.create(user=user, organization=org)
    if may_send:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="mail", codename="send"))
    return Token.objects.create(user=user).key


async def call(server, name: str, args: dict):
    async with Client(server) as client:
        return await client.call_tool(name, args)


def text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


@override_settings(WORKFORCE_AUTH="token")
def test_the_mcp_server_acts_as_the_tokens_user(agents, org):
    agents()
    server = build_server(token=person(org, "ann", may_send=True))
    sent = asyncio.run(call(server, "mail_send", {"to": "eng.idle", "body": "from MCP"}))
    assert not sent.is_error, text(sent)
    thread = Thread.objects.get(recipient="eng.idle")
    assert thread.sender == "human:ann@example.org" and thread.messages.get().body == "from MCP"


@override_settings(WORKFORCE_AUTH="token")
def test_without_the_permission_mail_send_is_refused(agents, org):
    agents()
    server = build_server(token=person(org, "bob", may_send=False))
    refused = asyncio.run(call(server, "mail_send", {"to": "eng.idle", "body": "x"}))
    assert refused.is_error and "mail-send-not-permitted: " in text(refused)
    assert not Thread.objects.exists()


@override_settings(WORKFORCE_AUTH="token")
def test_a_bad_token_serves_nothing(org):
    with pytest.raises(Refusal) as refused:
        build_server(token="not-a-token")
    assert refused.value.reason == "not-authenticated"


CHATTY = """---
description: Chats.
model: embedded/echo
run:
  triggers: [chat]
---

Chat.
"""


def test_agent_chat_answers_with_the_agents_reply(agents, org):
    agents({"teams/eng/workers/chatty/WORKER.md": CHATTY})
    server = build_server(user_id="ann")
    answer = asyncio.run(call(server, "agent_chat", {"worker": "eng.chatty", "message": "hi there"}))
    assert not answer.is_error, text(answer)
    data = json.loads(text(answer))
    assert (data["sessionId"], data["status"], data["reply"]) == (
        "chat:eng.chatty:ann",
        "completed",
        "eng.chatty heard: hi there",
    )
    refused = asyncio.run(call(server, "agent_chat", {"worker": "eng.nobody", "message": "x"}))
    assert refused.is_error and "recipient-not-found: " in text(refused)


@override_settings(WORKFORCE_AUTH="none")
def test_the_command_says_a_token_needs_token_auth(db):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--token needs WORKFORCE_AUTH=token"):
        call_command("mcp", "--token", "abc")
