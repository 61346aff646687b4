"""``agent_chat`` answers within ``WORKFORCE_MCP_CHAT_WAIT_SECONDS`` (under the 60 s
request timeout of hosts built on the TypeScript SDK): the reply, or a turn still
running reported as such (``status`` "running", ``reply`` null, and ``next``: the tool
``agent_chat_reply`` with the requestId), never as a finished turn with no reply. While
it waits it sends progress notifications to a client that asked for them (a
``progressToken``), in-process and over the HTTP mount (answered then as an event
stream). Reached with the official ``mcp`` SDK client."""

from __future__ import annotations

import asyncio
import json

import httpx2
import pytest
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mail.chat import do_run_chat
from mail.mcp_server import build_server
from mail.models import ChatRun
from tests.mail.test_mcp_http import mcp_url, person  # noqa: F401  (mcp_url: a fixture)
from workforce.models import Request

pytestmark = pytest.mark.django_db(transaction=True)

CHATTY = """---
description: Chats.
model: embedded/echo
run:
  triggers: [chat]
---

Chat.
"""


def text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


@pytest.fixture
def stalled(monkeypatch, settings):
    """The chat turns are not run until the test runs them (``do_run_chat``): the cluster
    is busy. The tools wait 1.5 s, reporting progress every 0.2 s."""
    monkeypatch.setattr("mail.chat.enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr("mail.mcp_server.PROGRESS_SECONDS", 0.2)
    settings.WORKFORCE_MCP_CHAT_WAIT_SECONDS = 1.5


async def _calls(target, calls, headers=None):
    """Make ``calls`` (``(name, args)``) through the SDK's client; each answer with the
    progress notifications it got, ``[(result, [(progress, total, message)])]``."""
    answers = []

    async def run(client):
        for name, args in calls:
            seen: list = []

            async def on_progress(progress, total, message, seen=seen):
                seen.append((progress, total, message))

            answers.append((await client.call_tool(name, args, progress_callback=on_progress), seen))

    if isinstance(target, str):
        async with httpx2.AsyncClient(headers=headers or {}, timeout=60) as http:
            async with Client(streamable_http_client(target, http_client=http)) as client:
                await run(client)
    else:
        async with Client(target) as client:
            await run(client)
    return answers


def check_unfinished_then_fetched(first, later) -> None:
    (result, progress) = first
    assert not result.is_error, text(result)
    data = json.loads(text(result))
    request = Request.objects.get(action="onChat")
    assert data == {
        "requestId": request.request_id,
        "sessionId": "chat:eng.chatty:ann",
        "status": "running",
        "reply": None,
        "next": {
            "tool": "agent_chat_reply",
            "arguments": {"requestId": request.request_id},
            "http": f"GET /api/requests/{request.request_id}?wait=30",
            "message": "The agent is still answering: call the tool (or the URL) for its reply.",
        },
    }
    assert len(progress) >= 2
    assert all(total == 1.5 and message == "waiting for eng.chatty's reply" for _, total, message in progress)
    assert [p for p, _, _ in progress] == sorted(p for p, _, _ in progress)
    (result, _) = later
    assert json.loads(text(result)) == {
        "requestId": request.request_id,
        "sessionId": "chat:eng.chatty:ann",
        "status": "completed",
        "reply": "eng.chatty heard: hi there",
    }


def test_a_turn_still_running_is_answered_as_such_and_fetched_later(agents, org, stalled):
    agents({"teams/eng/workers/chatty/WORKER.md": CHATTY})
    server = build_server(user_id="ann")
    ((first, progress),) = asyncio.run(_calls(server, [("agent_chat", {"worker": "eng.chatty", "message": "hi there"})]))
    assert do_run_chat(ChatRun.objects.get().pk) == "done"
    request_id = Request.objects.get(action="onChat").request_id
    (later,) = asyncio.run(_calls(server, [("agent_chat_reply", {"requestId": request_id})]))
    check_unfinished_then_fetched((first, progress), later)


def test_agent_chat_reply_reads_only_the_callers_chat_turns(agents, org, stalled):
    agents({"teams/eng/workers/chatty/WORKER.md": CHATTY})
    asyncio.run(_calls(build_server(user_id="ann"), [("agent_chat", {"worker": "eng.chatty", "message": "hi"})]))
    request_id = Request.objects.get(action="onChat").request_id
    ((bob, _), (nothing, _)) = asyncio.run(
        _calls(
            build_server(user_id="bob"),
            [("agent_chat_reply", {"requestId": request_id}), ("agent_chat_reply", {"requestId": "req_nope"})],
        )
    )
    assert bob.is_error and "request-not-found: " in text(bob)
    assert nothing.is_error and "request-not-found: " in text(nothing)


@override_settings(WORKFORCE_AUTH="token")
def test_over_http_progress_comes_as_an_event_stream_and_the_reply_later(mcp_url, agents, org, stalled):  # noqa: F811
    agents({"teams/eng/workers/chatty/WORKER.md": CHATTY})
    key = person(org, "ann")
    headers = {"Authorization": f"Bearer {key}"}
    (first,) = asyncio.run(_calls(mcp_url, [("agent_chat", {"worker": "eng.chatty", "message": "hi there"})], headers))
    assert do_run_chat(ChatRun.objects.get().pk) == "done"
    request_id = Request.objects.get(action="onChat").request_id
    (later,) = asyncio.run(_calls(mcp_url, [("agent_chat_reply", {"requestId": request_id})], headers))
    # The token's user is "ann" (its username), so the session is chat:eng.chatty:ann.
    check_unfinished_then_fetched(first, later)
