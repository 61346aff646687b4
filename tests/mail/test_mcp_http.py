"""The MCP server's HTTP mount (``/mcp``, ``mail.mcp_http``) reached by the ``mcp`` SDK's
own Streamable HTTP client, against the real ASGI app (``workforce_project.asgi``) under
uvicorn on loopback in a thread: the tools ``manage.py mcp`` serves, each with its JSON
schema; ``mail_send`` lands in the recipient's vault and the index; the REST API's
refusals with its reason codes; token auth (``Bearer`` or ``Token``) or 401 with a
challenge; and in development the REST API's ``userId`` rule."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx2
import pytest
import uvicorn
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from mail.models import LedgerEntry, Thread
from mail.vault import VaultStore
from tests.e2e.conftest import free_port
from workforce.models import Membership
from workforce.sessions import ensure_organization

pytestmark = pytest.mark.django_db(transaction=True)

TOOLS = ["agent_chat", "agent_chat_reply", "fileTask", "mail_send", "post", "read", "readBoard"]


@pytest.fixture(params=["on", "off"], ids=["lifespan", "no-lifespan"])
def mcp_url(request):
    """The mount's address on a uvicorn serving the project's ASGI app in a thread, with
    the ASGI lifespan (as ``serve`` runs it) and without (the mount starts itself)."""
    port = free_port()
    config = uvicorn.Config(
        "workforce_project.asgi:application", host="127.0.0.1", port=port, lifespan=request.param, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=30)


def person(org, name: str, *, may_send: bool = True) -> str:
    """A user of ``org`` (with the ``mail.send`` permission unless told otherwise); its
    API token's key."""
    user = User.objects.create_user(name, email=f"{name}@example.org")
    Membership.objects.create(user=user, organization=org)
    if may_send:
        user.user_permissions.add(Permission.objects.get(content_type__app_label="mail", codename="send"))
    return Token.objects.create(user=user).key


async def _session(url: str, headers: dict, calls: list[tuple[str, dict]]):
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = await client.list_tools()
            return tools, [await client.call_tool(name, args) for name, args in calls]


def session(url: str, calls=(), *, token: str | None = None, scheme: str = "Bearer"):
    """List the tools and make ``calls`` through the SDK's client; ``(tools, results)``."""
    headers = {"Authorization": f"{scheme} {token}"} if token else {}
    return asyncio.run(_session(url, headers, list(calls)))


def text(result) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


def reason_of(result) -> str:
    """The reason code of a refused call: the SDK writes ``Error executing tool <name>: ``
    before the refusal's message, ``<reason>: <detail>``."""
    assert result.is_error
    message = text(result).partition("Error executing tool ")[2].partition(": ")[2]
    return message.partition(": ")[0]


def raw_post(url: str, headers: dict | None = None) -> httpx2.Response:
    """A JSON-RPC ``initialize`` as an MCP client sends it, without the SDK."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **(headers or {})}
    return httpx2.post(url, json=body, headers=head, timeout=30)


@override_settings(WORKFORCE_AUTH="token")
def test_an_mcp_client_lists_the_tools_and_sends_a_mail_with_a_token(mcp_url, agents, org, vaults):
    agents()
    key = person(org, "ann")
    tools, (sent, again) = session(
        mcp_url,
        [
            ("mail_send", {"to": "eng.idle", "subject": "Hello", "body": "Are you there?"}),
            ("mail_send", {"to": "eng.idle", "body": "A second one."}),
        ],
        token=key,
    )
    by_name = {tool.name: tool for tool in tools.tools}
    assert sorted(by_name) == TOOLS
    for tool in tools.tools:  # each a JSON schema; the SDK's request context is no argument
        assert tool.input_schema["type"] == "object" and tool.input_schema["properties"], tool.name
        assert "ctx" not in tool.input_schema["properties"] and "ctx" not in tool.input_schema.get("required", [])
    schema = by_name["mail_send"].input_schema
    assert set(schema["required"]) == {"to", "body"} and "subject" in schema["properties"]
    assert set(by_name["fileTask"].input_schema["required"]) == {"mailbox", "board", "goal"}

    assert not sent.is_error, text(sent)
    assert json.loads(text(sent))["thread"] == "eng.idle:1" and not again.is_error
    # In the recipient's vault (a git repository) and in the index, from the token's user.
    issue = VaultStore(vaults, notify=False).get_issue("default", "eng.idle", 1)
    assert issue.title == "Hello" and issue.labels == ("mail:new",)
    assert "From: human:ann@example.org" in issue.body and issue.body.endswith("Are you there?")
    thread = Thread.objects.get(recipient="eng.idle", number=1)
    assert (thread.sender, thread.state, thread.labels) == ("human:ann@example.org", "new", ["mail:new"])
    assert [m.body for m in thread.messages.all()] == ["Are you there?"]
    assert LedgerEntry.objects.filter(event="mail.sent", principal="human:ann@example.org").count() == 2


@override_settings(WORKFORCE_AUTH="token")
def test_the_mount_refuses_what_the_rest_api_refuses_with_the_same_reason(mcp_url, agents, org):
    agents()
    ann, bob = person(org, "ann"), person(org, "bob", may_send=False)
    _, (nobody, empty) = session(
        mcp_url, [("mail_send", {"to": "eng.nobody", "body": "x"}), ("mail_send", {"to": "eng.reader", "body": " "})], token=ann
    )
    _, (not_permitted,) = session(mcp_url, [("mail_send", {"to": "eng.reader", "body": "x"})], token=bob, scheme="Token")
    rest = APIClient()
    answers = {}
    for name, body in (("ann", {"to": "eng.nobody", "body": "x"}), ("ann", {"to": "eng.reader", "body": " "})):
        rest.force_authenticate(User.objects.get(username=name))
        answers[body["to"]] = rest.post("/api/mail", body, format="json")
    rest.force_authenticate(User.objects.get(username="bob"))
    answers["bob"] = rest.post("/api/mail", {"to": "eng.reader", "body": "x"}, format="json")
    for result, answer, status in (
        (nobody, answers["eng.nobody"], 404),
        (empty, answers["eng.reader"], 400),
        (not_permitted, answers["bob"], 403),
    ):
        assert answer.status_code == status and reason_of(result) == answer.json()["error"]["reason"], text(result)
    assert [reason_of(r) for r in (nobody, empty, not_permitted)] == [
        "recipient-not-found",
        "invalid-input",
        "mail-send-not-permitted",
    ]
    assert not Thread.objects.exists() and not LedgerEntry.objects.exists()


@override_settings(WORKFORCE_AUTH="token")
def test_without_a_valid_token_the_mount_answers_401_with_a_challenge(mcp_url, org):
    key = person(org, "ann")
    for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Basic {key}"}, {"Authorization": "Bearer"}):
        answer = raw_post(mcp_url, headers)
        assert answer.status_code == 401, headers
        assert answer.headers["content-type"] == "application/json"
        assert answer.headers["www-authenticate"].startswith("Bearer ")
        assert answer.json()["error"]["reason"] == "not-authenticated"
    with pytest.raises(Exception):  # noqa: B017  the SDK's client gives up on a 401
        session(mcp_url)
    assert raw_post(mcp_url, {"Authorization": f"Bearer {key}"}).status_code == 200


@override_settings(WORKFORCE_AUTH="token")
def test_the_401_names_the_resource_metadata_which_says_a_token_not_a_sign_in(mcp_url, org):
    """RFC 9728 and the MCP authorization spec: the 401's Bearer challenge carries
    ``resource_metadata``; the document there names the resource as dialed and a bearer
    token in the header, and no authorization server (none is offered); the challenge's
    ``error_description`` says how to use a token instead."""
    base = mcp_url.removesuffix("/mcp")
    for headers, error in (({}, None), ({"Authorization": "Bearer not-a-token"}, "invalid_token")):
        answer = raw_post(mcp_url, headers)
        assert answer.status_code == 401
        bearer, token = answer.headers.get_list("www-authenticate")
        assert token == 'Token realm="workforce"'
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in bearer
        assert ('error="invalid_token"' in bearer) == (error is not None)
        assert 'error_description="This server signs no one in (no OAuth authorization server): ' in bearer
        assert "Authorization: Bearer <token>" in bearer
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        document = httpx2.get(base + path, timeout=30)
        assert document.status_code == 200 and document.headers["content-type"] == "application/json"
        metadata = document.json()
        assert metadata["resource"] == mcp_url
        assert metadata["bearer_methods_supported"] == ["header"]
        assert "authorization_servers" not in metadata
        assert "drf_create_token" in metadata["workforce_sign_in"]


@override_settings(WORKFORCE_AUTH="token")
def test_mail_send_takes_the_requests_idempotency_key(mcp_url, agents, org):
    """One tool call per HTTP request: its Idempotency-Key is the call's, as on ``POST
    /api/mail`` (the same arguments answer the first thread; others are refused)."""
    agents()
    key = person(org, "ann")
    headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": "once"}

    async def calls():
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(mcp_url, http_client=http)) as client:
                send = {"to": "eng.idle", "body": "only once"}
                return [
                    await client.call_tool("mail_send", send),
                    await client.call_tool("mail_send", send),
                    await client.call_tool("mail_send", {**send, "body": "another"}),
                ]

    first, again, other = asyncio.run(calls())
    assert json.loads(text(first))["thread"] == json.loads(text(again))["thread"] == "eng.idle:1"
    assert reason_of(other) == "idempotency-key-reused"
    assert Thread.objects.count() == 1 and LedgerEntry.objects.filter(event="mail.sent").count() == 1


def test_in_development_there_is_no_resource_metadata(mcp_url, org):
    answer = httpx2.get(mcp_url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource/mcp", timeout=30)
    assert answer.status_code == 404


@pytest.mark.parametrize("auth", ["token", "none"])
def test_a_database_outage_while_the_mount_checks_the_caller_answers_json_503(mcp_url, org, monkeypatch, auth):
    """The caller's check reads the database (the token, the membership): with the database
    refusing connections it answers the REST API's 503 ``database-unavailable`` with
    ``Retry-After``, never a bare 500."""
    from django.db import OperationalError

    import mail.mcp_server

    def refused(*args, **kwargs):
        raise OperationalError('connection failed: FATAL: database "x" is not currently accepting connections')

    monkeypatch.setattr(mail.mcp_server, "token_user", refused)
    monkeypatch.setattr(mail.mcp_server, "resolve_principal", refused)
    with override_settings(WORKFORCE_AUTH=auth):
        answer = raw_post(mcp_url + ("?userId=u_42" if auth == "none" else ""), {"Authorization": "Bearer some-key"})
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/json" and answer.headers["retry-after"] == "2"
    assert answer.json()["error"]["reason"] == "database-unavailable"


@override_settings(WORKFORCE_THROTTLE_USER="2/min", WORKFORCE_THROTTLE_ORG="")
def test_tool_calls_count_against_the_apis_write_rate(mcp_url, open_tree, org):
    """An MCP tool call is the API's action by another door: it was never counted, so a
    user the API throttled went on writing through /mcp (issue 22 item 4)."""
    from django.core.cache import cache

    cache.clear()
    open_tree()
    head = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "read", "arguments": {"mailbox": "eng.standup"}},
    }
    answers = [httpx2.post(mcp_url + "?userId=u_42", json=call, headers=head, timeout=30).json() for _ in range(3)]
    assert [a["result"].get("isError", False) for a in answers] == [False, False, True], answers
    assert "throttled: " in answers[2]["result"]["content"][0]["text"]
    rest = APIClient().post("/api/flows/mailbox/eng.standup/actions/read", {"userId": "u_42", "input": {}}, format="json")
    assert rest.status_code == 429 and rest["Retry-After"]
    cache.clear()


@override_settings(WORKFORCE_AUTH="token")
def test_each_call_acts_as_its_tokens_user_in_its_organization(mcp_url, agents, org):
    agents()
    acme = ensure_organization("acme")
    zed = person(acme, "zed")
    _, (sent,) = session(mcp_url, [("mail_send", {"to": "eng.reader", "body": "from acme"})], token=zed)
    assert not sent.is_error, text(sent)
    thread = Thread.objects.get()
    assert (thread.organization_id, thread.sender) == (acme.pk, "human:zed@example.org")
    # A userId naming someone else is the REST API's 403; a user in no organization too.
    answer = raw_post(mcp_url + "?userId=ann", {"Authorization": f"Bearer {zed}"})
    assert answer.status_code == 403 and answer.json()["error"]["reason"] == "principal-mismatch"
    stranger = User.objects.create_user("stranger")
    answer = raw_post(mcp_url, {"Authorization": f"Token {Token.objects.create(user=stranger).key}"})
    assert answer.status_code == 403 and answer.json()["error"]["reason"] == "not-a-member"
    # Another organization's thread is not found, as on the REST API.
    rest = APIClient()
    rest.force_authenticate(User.objects.create_user("ann"))
    Membership.objects.create(user=User.objects.get(username="ann"), organization=org)
    assert rest.get(f"/api/mail/{thread.thread_id}").status_code == 404


def test_in_development_the_caller_names_itself_with_user_id(mcp_url, agents, org):
    agents()
    tools, (sent,) = session(mcp_url + "?userId=ann", [("mail_send", {"to": "eng.reader", "body": "dev"})])
    assert sorted(t.name for t in tools.tools) == TOOLS
    assert not sent.is_error and Thread.objects.get().sender == "human:ann"
    answer = raw_post(mcp_url)
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"


@override_settings(ALLOWED_HOSTS=["workforce.example.org"])
def test_a_host_django_would_refuse_is_refused(mcp_url, org):
    answer = raw_post(mcp_url + "?userId=ann")
    assert answer.status_code == 400 and "Host" in answer.json()["error"]["message"]


def test_a_get_is_refused_405_and_holds_no_slot(mcp_url, org):
    """The stateless mount never opens the SDK's standalone event stream: a GET (which
    would hold a request open until the client left) is 405 with ``Allow: POST``, and
    many at once leave the rest of the server answering."""
    answer = httpx2.get(mcp_url + "?userId=ann", headers={"Accept": "application/json, text/event-stream"}, timeout=10)
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.json()["error"]["reason"] == "method-not-allowed"
    assert httpx2.delete(mcp_url + "?userId=ann", timeout=10).status_code == 405


@override_settings(WORKFORCE_WEB_CONCURRENCY=1, WORKFORCE_STREAM_LIMIT=1)
def test_mcp_calls_count_against_the_stream_limit_not_the_web_slots(mcp_url, agents, org):
    """An MCP call may wait for an agent's turn (``agent_chat``): it is counted with the
    streams, so a call open leaves the one web slot to the REST API, and a call beyond
    the limit is refused ``too-many-streams`` rather than queued."""
    from workforce_project import asgi

    agents()
    api = mcp_url.removesuffix("/mcp") + "/api/"
    asgi._server.open_streams += 1  # as if one MCP call were waiting for its agent
    try:
        refused = raw_post(mcp_url + "?userId=ann")
        assert refused.status_code == 503 and refused.json()["error"]["reason"] == "too-many-streams"
        assert httpx2.get(api, timeout=10).status_code == 200  # the web slot is free
    finally:
        asgi._server.open_streams -= 1
    tools, _ = session(mcp_url + "?userId=ann")
    assert sorted(t.name for t in tools.tools) == TOOLS


@override_settings(CSRF_TRUSTED_ORIGINS=["https://tools.example.org", "https://*.trusted.example"])
def test_a_foreign_origin_is_refused_403(mcp_url, org):
    """24.13: the MCP transport must validate ``Origin`` (a web page on another site
    could otherwise drive a local server through the browser): a foreign one is 403
    before the SDK or the credentials are read; no Origin (not a browser), the server's
    own and one of ``CSRF_TRUSTED_ORIGINS`` are served."""
    own = mcp_url.removesuffix("/mcp")
    for origin in ("https://evil.example", "null", own.replace("127.0.0.1", "localhost"), "http://127.0.0.1:1"):
        answer = raw_post(mcp_url + "?userId=ann", {"Origin": origin})
        assert answer.status_code == 403, (origin, answer.content)
        assert answer.json()["error"]["reason"] == "forbidden"
    for origin in (None, own, "https://tools.example.org", "https://a.trusted.example"):
        answer = raw_post(mcp_url + "?userId=ann", {"Origin": origin} if origin else {})
        assert answer.status_code == 200, (origin, answer.content)
