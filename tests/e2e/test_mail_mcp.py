"""The MCP server reached by the ``mcp`` SDK's own clients, over stdio (``manage.py mcp``)
and over HTTP (the ``/mcp`` mount of ``serve``, with token auth): it lists the tools with
their JSON schemas, sends a mail that an agent answers on the ``serve`` cluster, and
refuses what the REST API refuses, with the same reasons."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

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
    assert sorted(by_name) == ["agent_chat", "agent_chat_reply", "fileTask", "mail_send", "post", "read", "readBoard"]
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


def make_person(server, name: str, *, may_send: bool) -> str:
    """A user of the default organization on the server's database; its API token."""
    code = (
        "from django.contrib.auth.models import Permission, User;"
        "from rest_framework.authtoken.models import Token;"
        "from workforce.models import DEFAULT_ORG_ID, Membership;"
        "from workforce.sessions import ensure_organization;"
        f"u = User.objects.create_user({name!r}, email={name + '@example.org'!r});"
        "Membership.objects.create(user=u, organization=ensure_organization(DEFAULT_ORG_ID));"
        + ("u.user_permissions.add(Permission.objects.get(content_type__app_label='mail', codename='send'));" if may_send else "")
        + "print(Token.objects.create(user=u).key)"
    )
    env = {**server.env, "WORKFORCE_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "shell", "-c", code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


async def http_session(url: str, token: str, *calls):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool(name, args) for name, args in calls]


def test_an_mcp_client_reaches_the_http_mount_of_serve_with_a_token(tmp_path, start_server):
    root = write_tree(
        tmp_path / "tree",
        {"teams/eng/workers/alpha/WORKER.md": worker("Answers every mail.", body=f"Answer.\n{REPLY}")},
    )
    server = start_server(root, env={"WORKFORCE_AUTH": "token"})
    ann, bob = make_person(server, "ann", may_send=True), make_person(server, "bob", may_send=False)
    url = server.base + "/mcp"
    tools, (sent, nobody) = asyncio.run(
        http_session(
            url,
            ann,
            ("mail_send", {"to": "eng.alpha", "subject": "Hello", "body": "Are you there?"}),
            ("mail_send", {"to": "eng.nobody", "body": "x"}),
        )
    )
    by_name = {tool.name: tool for tool in tools.tools}
    assert sorted(by_name) == ["agent_chat", "agent_chat_reply", "fileTask", "mail_send", "post", "read", "readBoard"]
    assert all(tool.input_schema["type"] == "object" for tool in tools.tools)
    assert not sent.is_error and '"thread":"eng.alpha:1"' in text(sent).replace(" ", "")
    assert nobody.is_error and "recipient-not-found: " in text(nobody)
    _, (not_permitted,) = asyncio.run(http_session(url, bob, ("mail_send", {"to": "eng.alpha", "body": "x"})))
    rest = server.call("POST", "/api/mail", {"to": "eng.alpha", "body": "x"}, headers={"Authorization": f"Token {bob}"})
    assert rest.status == 403 and rest.body["error"]["reason"] == "mail-send-not-permitted"
    assert not_permitted.is_error and "mail-send-not-permitted: " in text(not_permitted)
    # No token: 401 with a challenge, the REST API's error body.
    refused = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, timeout=30)
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer ")
    assert refused.json()["error"]["reason"] == "not-authenticated"

    auth = {"Authorization": f"Token {ann}"}
    thread = wait_for(
        lambda: (lambda t: t if t["state"] == "replied" else None)(
            server.call("GET", "/api/mail/eng.alpha:1", headers=auth).body
        ),
        timeout=60,
        what="eng.alpha's reply",
        log=server.log,
    )
    assert thread["from"] == "human:ann@example.org" and thread["messages"][1]["from"] == "agent:eng.alpha"
    # The rest of the app is served as before beside the mount.
    assert server.call("GET", "/api/", headers=auth).status == 200
