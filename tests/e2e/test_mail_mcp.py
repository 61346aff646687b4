"""The MCP server (``manage.py mcp``, stdio) reached by the ``mcp`` SDK's own client: it
lists the tools with their JSON schemas, sends a mail that an agent answers on the
``serve`` cluster, and refuses what the REST API refuses, with the same reasons."""

from __future__ import annotations

import asyncio
import sys

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, wait_for
from tests.e2e.test_mail_cluster import REPLY, worker

pytestmark = pytest.mark.e2e


async def session(server, *calls):
    params = StdioServerParameters(
        command=sys.executable, args=[str(REPO / "manage.py"), "mcp", "--user", "ann@example.org"], env=server.env, cwd=str(REPO)
    )
    async with Client(params) as client:
        tools = await client.list_tools()
        results = [await client.call_tool(name, args) for name, args in calls]
        return tools, results


def text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def test_an_mcp_client_lists_the_tools_and_sends_a_mail(tmp_path, start_server):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": worker("Answers every mail.", body=f"Answer.\n{REPLY}"),
        },
    )
    server = start_server(root)
    tools, (sent, nobody, posted, unbound) = asyncio.run(
        session(
            server,
            ("mail_send", {"to": "eng.alpha", "subject": "Hello", "body": "Are you there?"}),
            ("mail_send", {"to": "eng.nobody", "body": "x"}),
            ("post", {"mailbox": "eng.standup", "body": "shipped the fix"}),
            ("post", {"mailbox": "eng.nowhere", "body": "x"}),
        )
    )
    by_name = {tool.name: tool for tool in tools.tools}
    assert sorted(by_name) == ["agent_chat", "fileTask", "mail_send", "post", "read", "readBoard"]
    schema = by_name["mail_send"].input_schema
    assert schema["type"] == "object" and set(schema["required"]) == {"to", "body"} and "subject" in schema["properties"]
    assert not sent.is_error and '"thread":"eng.alpha:1"' in text(sent).replace(" ", "")
    assert nobody.is_error and 'recipient-not-found: No agent "eng.nobody"' in text(nobody)
    assert not posted.is_error
    assert unbound.is_error and "mailbox-not-bound" in text(unbound)

    thread = wait_for(
        lambda: (lambda t: t if t["state"] == "replied" else None)(server.call("GET", "/api/mail/eng.alpha:1").body),
        timeout=60,
        what="eng.alpha's reply",
        log=server.log,
    )
    assert thread["from"] == "human:ann@example.org" and thread["messages"][1]["from"] == "agent:eng.alpha"
