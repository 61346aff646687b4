"""Tool servers over MCP as a seat's tools, end to end (issue 27; docs/tools.md): a real
``serve`` with its task cluster, two real tool servers written on the SDK
(tests/toolservers/orders_server.py: ``orders`` over stdio, started by the cluster's
worker, and ``crm`` over streamable HTTP behind a token the tree names by variable), and
a fake OpenAI-compatible model in this process that calls their tools by what the post
says. Each post's turn is one scenario: the answer uses the results, an ungranted tool is
refused and ledgered, a server killed mid-call fails that call and the next call
succeeds, and a cancel stops the turn before its next tool call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, free_port, session_items, session_requests, transcript, wait_for
from tests.e2e.sse import SseStream
from tests.fakes import FakeOpenAIServer, chat_completion
from tests.toolservers import SERVER, start_http_orders

pytestmark = pytest.mark.e2e

MAILBOX = "support.desk"
SEAT = "support.orders"
CONVERSATION = f"{MAILBOX}:{SEAT}"
PRINCIPAL = "workforce"  # WORKFORCE_OPEN_USER: the mailbox's principal, who may cancel its turns
TOKEN = "crm-t0ken"


def _call(name: str, arguments: dict, n: int) -> dict:
    return {"id": f"call_{name}_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class ScriptedModel(FakeOpenAIServer):
    """Answers by the turn's post (the last user message) and the tool results since."""

    def __init__(self, marker: Path):
        super().__init__()
        self.marker = marker

    def reply(self, request: dict) -> tuple[int, dict]:
        body = request["body"]
        messages = body["messages"]
        last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
        post = messages[last_user]["content"]
        results = [json.loads(m["content"]) for m in messages[last_user + 1 :] if m["role"] == "tool"]
        calls: list[dict] = []
        answer = "done"
        n = len(self.requests)
        if "lookup" in post:
            if not results:
                calls = [_call("orders__lookup_order", {"order_id": "A-1001"}, n), _call("crm__whoami", {}, n)]
            elif len(results) == 2:
                order, crm = results[0]["structuredContent"], results[1]["structuredContent"]
                text = f"A-1001 is {order['status']} with {order['carrier']}; the crm says {crm['greeting']}"
                calls = [_call("post-to-mailbox", {"mailbox": MAILBOX, "body": text}, n)]
        elif "denied" in post:
            if not results:
                calls = [_call("orders__whoami", {}, n)]
            elif len(results) == 1:
                calls = [_call("post-to-mailbox", {"mailbox": MAILBOX, "body": f"whoami: {results[0]['refused']}"}, n)]
        elif "crash" in post:
            if not results:
                calls = [_call("orders__crash", {}, n)]
            elif len(results) == 1:
                calls = [_call("orders__lookup_order", {"order_id": "A-1001"}, n)]
            elif len(results) == 2:
                text = f"crash: {results[0]['refused'].partition(':')[0]}; then {results[1]['structuredContent']['status']}"
                calls = [_call("post-to-mailbox", {"mailbox": MAILBOX, "body": text}, n)]
        elif "cancel" in post and not results:
            calls = [
                _call("orders__sleep", {"seconds": 4, "marker": str(self.marker)}, n),
                _call("orders__lookup_order", {"order_id": "A-1001"}, n),
            ]
        model = body["model"]
        if calls:
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            return 200, chat_completion(message, model=model, id=f"chatcmpl-{n}", finish_reason="tool_calls")
        return 200, chat_completion(answer, model=model, id=f"chatcmpl-{n}")


def tree(root: Path, crm_port: int) -> Path:
    return write_tree(
        root,
        {
            "teams/support/mailboxes/desk/MAILBOX.md": mailbox_md("Where customers ask about orders.", members=(SEAT,)),
            "teams/support/workers/orders/WORKER.md": (
                "---\ndescription: Answers about orders.\nmodel: openai/scripted\n"
                "tools: [post-to-mailbox, orders/lookup_order, orders/crash, orders/sleep, crm/whoami]\n---\n\n"
                "Look orders up with your tools and answer in the mailbox.\n"
            ),
            "org/tool-servers.yaml": (
                f"servers:\n  orders:\n    command: python\n    args: [{SERVER}]\n    env: [ORDERS_GREETING]\n"
                f"  crm:\n    url: http://127.0.0.1:{crm_port}/mcp\n    headers: {{Authorization: CRM_AUTHORIZATION}}\n"
            ),
        },
    )


def post(server: Server, body: str) -> None:
    answer = server.call("POST", f"/api/flows/mailbox/{MAILBOX}/actions/post", {"userId": "u_42", "input": {"body": body}})
    assert answer.status == 202, answer.body


def seat_lines(server: Server) -> list[str]:
    return [line["body"] for line in transcript(server, MAILBOX) if line.get("author") == SEAT]


def tool_calls(server: Server) -> list[dict]:
    return [i["data"] for i in session_items(server, CONVERSATION, PRINCIPAL) if i.get("component") == "tool-call"]


def counts(server: Server) -> dict[str, dict]:
    answer = server.call("GET", "/api/tool-servers?userId=u_42")
    assert answer.status == 200, answer.body
    assert {s["name"]: s["transport"] for s in answer.body["servers"]} == {"orders": "stdio", "crm": "http"}
    return {row["server"]: row for row in answer.body["counts"] if row["seatId"] == SEAT}


@pytest.fixture
def crm_port():
    port = free_port()
    process = start_http_orders(port, TOKEN)
    yield port
    process.kill()
    process.wait()


def test_a_seat_answers_with_its_tool_servers_on_a_real_serve(start_server, tmp_path, crm_port):
    marker = tmp_path / "sleeping"
    with ScriptedModel(marker) as model:
        env = {
            "OPENAI_BASE_URL": model.base_url,
            "OPENAI_API_KEY": "sk-test",
            "CRM_AUTHORIZATION": f"Bearer {TOKEN}",
            "ORDERS_GREETING": "hello over stdio",
        }
        server = start_server(tree(tmp_path / "tree", crm_port), env=env)

        # The answer uses both servers' results (stdio and streamable HTTP), and each call
        # and its result is an item of the conversation, on its stream too.
        post(server, "lookup A-1001 please")
        wait_for(lambda: seat_lines(server), timeout=90, what="the seat's answer", log=server.log)
        assert seat_lines(server) == ["A-1001 is shipped with Parcelways; the crm says over http"]
        first_tools = [t["function"]["name"] for t in model.bodies[0]["tools"]]
        assert first_tools == ["post-to-mailbox", "orders__lookup_order", "orders__crash", "orders__sleep", "crm__whoami"]
        calls = tool_calls(server)
        assert [c["name"] for c in calls] == ["orders__lookup_order", "crm__whoami", "post-to-mailbox"]
        assert calls[0]["result"]["structuredContent"]["carrier"] == "Parcelways"
        stream = SseStream(server.base, f"/api/sessions/{CONVERSATION}/stream?after=0&userId={PRINCIPAL}")
        try:
            assert stream.status == 200
            seen = []
            while len(seen) < 3:
                event = stream.next_event(timeout=15)
                if event.data and event.data.get("component") == "tool-call":
                    seen.append(event.data["data"]["name"])
            assert seen == ["orders__lookup_order", "crm__whoami", "post-to-mailbox"]
        finally:
            stream.close()

        # An ungranted tool of a declared server: refused and ledgered run.denied.
        post(server, "denied: who are you?")
        wait_for(lambda: len(seat_lines(server)) == 2, timeout=60, what="the denied turn's answer", log=server.log)
        assert seat_lines(server)[1] == "whoami: tool-not-granted: orders/whoami is not one of your tools; nothing was called."
        assert counts(server)["orders"]["denied"] == 1

        # A server killed mid-call fails that call; the next call starts it again and succeeds.
        post(server, "crash the server")
        wait_for(lambda: len(seat_lines(server)) == 3, timeout=60, what="the crash turn's answer", log=server.log)
        assert seat_lines(server)[2] == "crash: tool-server-unavailable; then shipped"
        crash = [c for c in tool_calls(server) if c["name"] == "orders__crash"][0]
        assert crash["result"]["refused"].startswith("tool-server-unavailable: orders/crash: the tool server orders failed")
        assert counts(server) == {
            "orders": {"seatId": SEAT, "server": "orders", "calls": 3, "failed": 1, "denied": 1},
            "crm": {"seatId": SEAT, "server": "crm", "calls": 1, "failed": 0, "denied": 0},
        }

        # A cancel during a tool call stops the turn before its next tool call.
        model_calls = len(model.requests)
        post(server, "cancel me while you look")
        wait_for(marker.exists, timeout=60, what="the sleeping tool call", log=server.log)
        running = [r for r in session_requests(server, CONVERSATION, "onMailboxPost", PRINCIPAL) if r["status"] == "running"]
        assert len(running) == 1
        cancelled = server.call("POST", f"/api/requests/{running[0]['requestId']}/cancel", {"userId": PRINCIPAL})
        assert cancelled.status == 200 and cancelled.body["status"] == "aborted", cancelled.body
        wait_for(
            lambda: [c for c in tool_calls(server) if c["name"] == "orders__sleep"],
            timeout=30,
            what="the sleeping call's end",
            log=server.log,
        )
        failed = wait_for(
            lambda: [r for r in session_requests(server, MAILBOX, "deliverPost") if (r.get("error") or {}).get("reason")],
            timeout=30,
            what="the cancelled delivery",
            log=server.log,
        )
        assert failed[-1]["error"]["reason"] == "cancelled"
        assert [c["name"] for c in tool_calls(server)][-1] == "orders__sleep"  # the lookup after it never ran
        assert counts(server)["orders"]["calls"] == 4  # the sleep only
        assert len(model.requests) == model_calls + 1  # no model call after the cancel
        assert len(seat_lines(server)) == 3
