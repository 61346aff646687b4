"""Back-pressure on mail, chat and the MCP tools (workforce.backlog): past
WORKFORCE_BACKLOG_LIMIT a person's mail, a chat turn and the MCP ``post``, ``mail_send``
and ``agent_chat`` tools are refused with ``backlog-full`` before anything is written
(the REST answers with 503 and ``Retry-After``, the tools in their one refusal shape:
an error whose text is the refusal's message). The count itself is tested in
tests/mailboxes/test_backlog.py; here the backlog is set by hand."""

from __future__ import annotations

import asyncio

import pytest
from rest_framework.test import APIClient

from mail.mcp_server import build_server
from mail.models import ChatRun, MailRun, Thread
from mailboxes.models import Line
from workforce import backlog
from workforce.models import Request

from .conftest import MAIL_TREE
from .test_mcp import CHATTY, call, text

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGE = "backlog-full: 7 wakes are waiting for the workers (the bound is 5); nothing was posted. Retry in 5 s (Retry-After)."


@pytest.fixture
def full(monkeypatch, settings):
    """A backlog of 7 against a bound of 5."""
    settings.WORKFORCE_BACKLOG_LIMIT = 5
    monkeypatch.setattr(backlog, "count_backlog", lambda: 7)
    backlog.reset_backlog_cache()
    yield
    backlog.reset_backlog_cache()


def test_a_persons_mail_is_refused_503_with_retry_after_and_nothing_sent(agents, full):
    agents()
    answer = APIClient().post("/api/mail", {"userId": "ann", "to": "eng.alpha", "body": "Hello"}, format="json")
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == "5"
    assert answer.json() == {"requestId": None, "status": "failed", "error": {"reason": "backlog-full", "message": MESSAGE}}
    assert (Thread.objects.count(), MailRun.objects.count()) == (0, 0)


CHAT_TREE = {**MAIL_TREE, "teams/eng/workers/chatty/WORKER.md": CHATTY}


def test_a_chat_turn_is_refused_503_and_none_started(agents, full):
    agents(CHAT_TREE)
    answer = APIClient().post("/api/workers/eng.chatty/chat", {"userId": "ann", "message": "hi"}, format="json")
    assert answer.status_code == 503, answer.content
    assert answer["Retry-After"] == "5"
    assert answer.json()["error"] == {"reason": "backlog-full", "message": MESSAGE}
    assert (ChatRun.objects.count(), Request.objects.count()) == (0, 0)


def test_the_mcp_tools_that_add_work_refuse_in_the_tools_shape(agents, open_tree, full):
    open_tree()
    agents(CHAT_TREE)
    server = build_server(user_id="ann")
    for tool, args in (
        ("post", {"mailbox": "eng.standup", "body": "from MCP"}),
        ("mail_send", {"to": "eng.alpha", "body": "from MCP"}),
        ("agent_chat", {"worker": "eng.chatty", "message": "hi"}),
    ):
        refused = asyncio.run(call(server, tool, args))
        assert refused.is_error, tool
        assert text(refused) == f"Error executing tool {tool}: {MESSAGE}"
    assert (Line.objects.count(), Thread.objects.count(), ChatRun.objects.count(), Request.objects.count()) == (0, 0, 0, 0)
    read = asyncio.run(call(server, "read", {"mailbox": "eng.standup"}))
    assert not read.is_error, text(read)
