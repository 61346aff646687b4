"""Tool servers over MCP as a seat's tools (issue 27; docs/tools.md): the tree's
``org/tool-servers.yaml``, grants in WORKER.md and their hire refusals, and calls from a
turn to a real tool server on the SDK (tests/toolservers/orders_server.py, over stdio)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.db import IntegrityError, OperationalError
from django.test import override_settings

from mailboxes import flow as mailbox_flow
from mailboxes.notify import configure_notify, wake_member_seats
from seats.hiring import WorkerTreeError, do_hire_tree_workers, hire_problems
from seats.mcp_client import pool
from seats.models import ToolCallEntry
from seats.queries import tool_call_counts
from seats.tool_servers import TOOL_SERVERS_FILE, declared_servers, tool_server_capability, wire_name
from seats.workers import read_workforce
from tests.conftest import OWNER, mailbox_md, open_mailboxes
from tests.e2e.conftest import free_port
from tests.seats.conftest import worker_md
from tests.toolservers import ROGUE, SERVER, start_http_orders, start_http_rogue
from workforce.llm import use_model_resolver
from workforce.models import Item, Request, Session
from workforce.testing import create_mock_model_resolver

SERVERS_YAML = f"servers:\n  orders:\n    description: Order lookup.\n    command: python\n    args: [{SERVER}]\n    env: [ORDERS_GREETING]\n"


def http_server_yaml(port: int) -> str:
    return f"  crm:\n    url: http://127.0.0.1:{port}/mcp\n    headers: {{Authorization: CRM_AUTHORIZATION}}\n"


def tree(tools: str = "[post-to-mailbox, orders/lookup_order]", servers: str = SERVERS_YAML, **more) -> dict[str, str]:
    files = {
        "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Where incidents are worked.", members=("eng.lead",)),
        "teams/eng/workers/lead/WORKER.md": worker_md("Answers about orders.", tools=tools),
        TOOL_SERVERS_FILE: servers,
    }
    files.update(more)
    return files


@pytest.fixture(autouse=True)
def _fresh_pool():
    yield
    pool().close()


# ----------------------------------------------------------------------------- (1) the tree's file


def test_every_problem_of_the_file_is_named_at_once_by_file(make_tree):
    root = make_tree(
        tree(
            servers=(
                "servers:\n"
                "  orders:\n    command: python\n    url: http://127.0.0.1:1/mcp\n"
                "  crm:\n    url: ftp://crm\n    token: s3cret\n"
                "  Bad_Name:\n    command: x\n"
                "  files:\n    command: node\n    headers: {Authorization: CRM_TOKEN}\n    env: [not a name]\n"
            )
        )
    )
    _, errors = read_workforce(root)
    messages = [e.message for e in errors if e.path == TOOL_SERVERS_FILE]
    assert {e.kind for e in errors if e.path == TOOL_SERVERS_FILE} == {"tool-servers-load-failed"}
    assert "servers.orders: declares exactly one of command: (a stdio server) and url: (a streamable-HTTP server)" in messages
    assert "servers.crm: url: must be an http:// or https:// address" in messages
    assert any(m.startswith('servers.crm: "token" is not a key a tool server takes') for m in messages)
    assert any(m.startswith("servers.Bad_Name:") for m in messages)
    assert any("servers.files: env: must be a list of environment variable names" in m for m in messages)
    assert any("servers.files: headers: is for a server at a url:" in m for m in messages)
    with pytest.raises(WorkerTreeError) as failed:
        do_hire_tree_workers(root)
    assert any(line.startswith(f"{TOOL_SERVERS_FILE}: [tool-servers-load-failed]") for line in failed.value.lines)


def test_the_file_is_read_with_the_strict_loader(make_tree):
    root = make_tree(tree(servers="servers:\n  orders:\n    command: python\n  orders:\n    command: python\n"))
    [error] = [e for e in read_workforce(root).errors if e.path == TOOL_SERVERS_FILE]
    assert "duplicate" in error.message and "orders" in error.message
    root = make_tree(tree(servers="servers:\n  on:\n    command: python\n    args: [no, 0755]\n"))
    servers = declared_servers(root)
    assert servers["on"].args == ("no", "0755")  # YAML 1.1 would have made False and 493


def test_a_declared_stdio_and_http_server(make_tree):
    root = make_tree(
        tree(servers=SERVERS_YAML + "  crm:\n    url: http://127.0.0.1:9/mcp\n    headers: {Authorization: CRM_AUTHORIZATION}\n")
    )
    servers = declared_servers(root)
    assert servers["orders"].transport == "stdio" and servers["orders"].command == "python"
    assert servers["orders"].env == ("ORDERS_GREETING",) and servers["orders"].cwd == str(root.resolve())
    assert servers["crm"].transport == "http" and servers["crm"].headers == (("Authorization", "CRM_AUTHORIZATION"),)


# ----------------------------------------------------------------------------- (2) grants and hire


def hire_lines(root) -> list[str]:
    with pytest.raises(WorkerTreeError) as failed:
        do_hire_tree_workers(root)
    return failed.value.lines


def test_hire_refuses_an_unknown_server_by_name(make_tree, db):
    lines = hire_lines(make_tree(tree(tools="[billing/refund]")))
    assert lines == [
        f'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names the tool server "billing", which {TOOL_SERVERS_FILE} does not declare (it declares orders)'
    ]


def test_hire_refuses_an_unknown_server_when_none_is_declared(make_tree, db):
    files = tree(tools="[billing/*]")
    del files[TOOL_SERVERS_FILE]
    assert hire_lines(make_tree(files)) == [
        f'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names the tool server "billing", which {TOOL_SERVERS_FILE} does not declare (it declares none)'
    ]


def test_hire_refuses_a_tool_the_server_does_not_list_by_name(make_tree, db):
    lines = hire_lines(make_tree(tree(tools="[orders/refund_order]")))
    assert lines == [
        'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names "orders/refund_order", which the tool server orders does not offer '
        "(it offers crash, lookup_order, nul, sleep, whoami)"
    ]


def test_hire_refuses_a_grant_of_a_server_that_cannot_start(make_tree, db):
    servers = "servers:\n  orders:\n    command: /nonexistent/orders-server\n"
    [line] = hire_lines(make_tree(tree(tools="[orders/lookup_order]", servers=servers)))
    assert line.startswith(
        'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names "orders/lookup_order", but the tool server orders could not list its tools:'
    )


def test_a_whole_set_and_named_tools_hire(make_tree, db):
    [seat] = do_hire_tree_workers(make_tree(tree(tools="[orders/*, post-to-mailbox]")))
    assert seat.tools == ["orders/*", "post-to-mailbox"]


def test_the_turn_is_offered_exactly_the_granted_tools_with_their_schemas(make_tree, db):
    root = make_tree(tree(tools="[orders/lookup_order, orders/whoami]"))
    [seat] = do_hire_tree_workers(root)
    with override_settings(WORKFORCE_ROOT=str(root)):
        tools = tool_server_capability(seat)
    assert [t.name for t in tools] == ["orders__lookup_order", "orders__whoami"]
    schema = tools[0].openai_schema()["function"]
    assert schema["parameters"]["properties"]["order_id"]["type"] == "string"
    assert schema["parameters"]["required"] == ["order_id"]
    assert "Look up one order" in schema["description"]


def test_a_tool_whose_schema_is_no_json_schema_is_left_out_and_the_others_offered(make_tree, db, caplog):
    # Break-it: a server listing one tool with a broken input schema had it sent to the
    # model as it was; OpenAI refuses the whole request (400), so every turn of the seat
    # failed model-error while the server's other tools were fine.
    rogue = Path(__file__).resolve().parents[1] / "toolservers" / "rogue_server.py"
    root = make_tree(tree(tools="[rogue/*]", servers=f"servers:\n  rogue:\n    command: python\n    args: [{rogue}]\n"))
    [seat] = do_hire_tree_workers(root)
    with override_settings(WORKFORCE_ROOT=str(root)):
        tools = tool_server_capability(seat)
    assert [t.name for t in tools] == ["rogue__good"]
    assert "the tool rogue/bad_schema is not offered: its input schema is not a JSON schema" in caplog.text


def test_wire_names_keep_to_what_a_provider_takes():
    assert wire_name("orders", "lookup_order") == "orders__lookup_order"
    assert wire_name("crm-eu", "contacts.search/v2") == "crm-eu__contacts_search_v2"


# ----------------------------------------------------------------------------- (3) calls in a turn


@pytest.fixture
def run_turn_with(make_tree, org, django_capture_on_commit_callbacks, monkeypatch):
    """``run_turn_with(script, tools=..., body=...) -> list of tool-call results``: the tree
    with the orders server, eng.lead's turn on a post in eng.incidents, scripted."""
    from workforce.sessions import do_run_action

    def _run(script, *, tools: str = "[orders/lookup_order]", body: str = "where is A-1001?", servers=SERVERS_YAML, **settings_):
        root = make_tree(tree(tools=tools, servers=servers))
        open_mailboxes(root, org)
        seats = do_hire_tree_workers(root)
        configure_notify("mailbox", wake_member_seats(seats))
        mock = create_mock_model_resolver({"eng.lead": script, "*": lambda call: "ok"})
        with override_settings(WORKFORCE_ROOT=str(root), **settings_), use_model_resolver(mock):
            with django_capture_on_commit_callbacks(execute=True):
                do_run_action(
                    org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": body}, user_id="u_owner"
                )
        session = Session.objects.get(organization=org, session_id="eng.incidents:eng.lead")
        items = Item.objects.filter(session=session, component="tool-call").order_by("seq")
        return mock, [i.data for i in items]

    return _run


def calls(*pairs):
    return {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}


def test_the_answer_uses_the_tool_servers_result(run_turn_with, org):
    def script(call):
        tool_messages = [m for m in call.messages if m.get("role") == "tool"]
        if not tool_messages:
            return calls(("orders__lookup_order", {"order_id": "A-1001"}))
        return f"Your order: {tool_messages[-1]['content']}"

    mock, items = run_turn_with(script)
    [item] = items
    assert item["name"] == "orders__lookup_order" and item["arguments"] == {"order_id": "A-1001"}
    assert item["result"]["structuredContent"] == {"order_id": "A-1001", "status": "shipped", "carrier": "Parcelways"}
    assert '"status": "shipped"' in item["result"]["text"]
    first, second = mock.calls_for("eng.lead")
    assert first.tools == ["orders__lookup_order"]
    assert "Parcelways" in second.messages[-1]["content"]  # the model read the result
    [entry] = ToolCallEntry.objects.all()
    assert (entry.event, entry.seat_id, entry.server, entry.tool) == ("tool.called", "eng.lead", "orders", "lookup_order")


def test_an_is_error_result_is_a_refusal(run_turn_with):
    _, [item] = run_turn_with([calls(("orders__lookup_order", {"order_id": "Z-9"})), "not found"])
    assert item["result"] == {
        "refused": "tool-error: orders/lookup_order answered with an error: Error executing tool lookup_order: no order Z-9"
    }


def test_an_answer_longer_than_the_limit_is_refused_and_not_kept(run_turn_with, settings):
    settings.WORKFORCE_TOOL_RESULT_CHARS = 50  # the order's answer is about 200 characters as JSON
    _, [item] = run_turn_with([calls(("orders__lookup_order", {"order_id": "A-1001"})), "too long"])
    refused = item["result"]["refused"]
    assert refused.startswith("tool-result-too-large: orders/lookup_order answered ") and refused.endswith(
        "characters, more than the 50 a call may bring back."
    )
    assert "Parcelways" not in refused


def test_an_ungranted_tool_is_refused_and_ledgered_run_denied(run_turn_with, org):
    _, [item] = run_turn_with([calls(("orders__whoami", {})), "no"])
    assert item["result"] == {"refused": "tool-not-granted: orders/whoami is not one of your tools; nothing was called."}
    [entry] = ToolCallEntry.objects.all()
    assert (entry.event, entry.seat_id, entry.server, entry.tool) == ("run.denied", "eng.lead", "orders", "whoami")
    assert entry.data == {"reason": "tool-not-granted"} and entry.request_id.startswith("req_")


def test_a_server_that_dies_mid_call_fails_that_call_and_the_next_call_succeeds(run_turn_with, org):
    _, items = run_turn_with(
        [calls(("orders__crash", {})), calls(("orders__whoami", {})), "done"], tools="[orders/crash, orders/whoami]"
    )
    crashed, answered = items
    assert crashed["result"]["refused"].startswith("tool-server-unavailable: orders/crash: the tool server orders failed")
    assert answered["result"]["structuredContent"]["pid"] > 0
    assert [e.event for e in ToolCallEntry.objects.all()] == ["tool.failed", "tool.called"]
    assert tool_call_counts(org) == [{"seatId": "eng.lead", "server": "orders", "calls": 2, "failed": 1, "denied": 0}]


DEADLOCK = "deadlock detected\nDETAIL: Process 1 waits for ShareLock on transaction 2"
WITHHELD = "the database refused the statement (OperationalError); the error's detail is in the server's log"


def _deadlock(*args, **kwargs):
    raise OperationalError(DEADLOCK)


def _tool_messages(mock) -> list[dict]:
    """What the model read of each tool call's result."""
    return [json.loads(m["content"]) for call in mock.calls_for("eng.lead") for m in call.messages if m.get("role") == "tool"]


def test_a_database_error_in_a_tool_is_stored_and_told_without_its_detail(run_turn_with, monkeypatch, caplog):
    """The driver's DETAIL (key values, backend pids) stays in the log: the tool-call item,
    which the API serves, and the model's message name the error's class only. (An
    OperationalError raised by the tool itself is taken for an outage and runs the turn
    again, workforce.holders.is_outage; the next test has one inside the posted action.)"""

    def duplicate(*args, **kwargs):
        raise IntegrityError("duplicate key value violates unique constraint\nDETAIL: Key (id)=(5) already exists.")

    monkeypatch.setattr("seats.capabilities.dispatch", duplicate)
    monkeypatch.setattr("seats.capabilities.dispatch_once", duplicate)
    mock, [item] = run_turn_with(
        [calls(("post-to-mailbox", {"mailbox": "eng.incidents", "body": "on it"})), "done"], tools="[post-to-mailbox]"
    )
    withheld = WITHHELD.replace("OperationalError", "IntegrityError")
    assert item["result"] == {"refused": f"internal-error: {withheld}"}
    assert _tool_messages(mock) == [{"refused": f"internal-error: {withheld}"}]
    assert "Key (id)=(5) already exists." in caplog.text  # logged instead


def test_a_database_error_in_the_posted_action_is_stored_on_its_request_without_its_detail(run_turn_with, monkeypatch, caplog):
    person_s_post = mailbox_flow.do_post_line

    def seat_line_deadlocks(*args, seat_authored=False, **kwargs):  # the person's post goes through
        return _deadlock() if seat_authored else person_s_post(*args, seat_authored=seat_authored, **kwargs)

    monkeypatch.setattr("mailboxes.flow.do_post_line", seat_line_deadlocks)  # the seat's line (woken, not routed)
    monkeypatch.setattr("mailboxes.flow.do_answer_post", _deadlock)
    mock, [item] = run_turn_with(
        [calls(("post-to-mailbox", {"mailbox": "eng.incidents", "body": "on it"})), "done"], tools="[post-to-mailbox]"
    )
    [answer] = Request.objects.filter(action__in=["answer", "seatPost"])
    assert answer.status == "failed" and answer.error == {"reason": "internal-error", "message": f"internal-error: {WITHHELD}"}
    assert item["result"] == {"refused": f"internal-error: {WITHHELD}"}
    assert _tool_messages(mock) == [{"refused": f"internal-error: {WITHHELD}"}]
    assert "Process 1 waits for ShareLock on transaction 2" in caplog.text


def test_a_call_past_its_time_limit_fails_cleanly(run_turn_with):
    _, [item] = run_turn_with(
        [calls(("orders__sleep", {"seconds": 5})), "late"], tools="[orders/sleep]", WORKFORCE_TOOL_CALL_TIMEOUT=1
    )
    assert item["result"] == {
        "refused": "tool-timeout: orders/sleep: the call passed its time limit of 1 seconds; nothing came back."
    }


def test_tool_calls_count_against_the_turns_deadline(run_turn_with, org):
    # Break-it: a hanging server and a model asking for several calls in one reply. Each
    # call was given the whole WORKFORCE_TOOL_CALL_TIMEOUT, whatever was left of the turn,
    # so the turn ran calls x that past its deadline (with the defaults, 4 calls of 30 s
    # outlived the cluster's 120 s task timeout and the worker was killed mid-turn).
    from workforce.models import Request

    hang = ("orders__sleep", {"seconds": 30})
    _, items = run_turn_with(
        [calls(hang, hang, hang), "late"],
        tools="[orders/sleep]",
        WORKFORCE_TURN_TIMEOUT=3,
        WORKFORCE_TOOL_CALL_TIMEOUT=10,
    )
    # The first call gets only what is left of the turn; no call is made past its deadline.
    [item] = items
    assert item["result"]["refused"].startswith("tool-timeout: orders/sleep: the call passed its time limit of ")
    assert [e.event for e in ToolCallEntry.objects.all()] == ["tool.failed"]
    turn = Request.objects.get(organization=org, session__session_id="eng.incidents:eng.lead")
    assert turn.status == Request.Status.FAILED and turn.error["reason"] == "turn-timeout", turn.error


def test_a_worker_killed_mid_call_leaves_no_stdio_server_behind(tmp_path):
    # Break-it: a worker process killed outright (kill -9, the cluster's timeout) during a
    # call left its stdio server running, reparented to init, for as long as the call ran
    # (forever for one that hangs): one more stray process per killed turn.
    import os
    import signal
    import subprocess
    import sys
    import time

    marker = tmp_path / "server-pid"
    code = (
        "from seats.mcp_client import ToolServer, pool\n"
        f"server = ToolServer(name='orders', command='python', args=({str(SERVER)!r},), cwd={str(tmp_path)!r})\n"
        f"pool().call_tool(server, 'sleep', {{'seconds': 600, 'marker': {str(marker)!r}}}, timeout=700)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
            assert worker.poll() is None, "the worker ended before its call started"
            time.sleep(0.1)
        server_pid = int(marker.read_text())
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().split(") ")[1][0] != "Z"
        except FileNotFoundError:
            return False

    deadline = time.monotonic() + 30
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(server_pid):
        os.kill(server_pid, signal.SIGKILL)
        raise AssertionError(f"the tool server {server_pid} outlived its killed worker")


def test_a_server_that_hangs_at_its_start_holds_the_turn_up_no_longer_than_the_turn_may_last(run_turn_with, org, tmp_path):
    # Break-it: the turn's tools were listed before its clock started, each granted server
    # given the whole WORKFORCE_TOOL_CALL_TIMEOUT: a server that never answers its
    # handshake held every turn of the seat up 20 s more than WORKFORCE_TURN_TIMEOUT (one
    # such server per 20 s past the cluster's task timeout, and the worker was killed).
    from workforce.models import Request

    marker = tmp_path / "hang-started"
    servers = SERVERS_YAML + f"  hang:\n    command: sh\n    args: ['-c', 'touch {marker}; sleep 60']\n"
    _, items = run_turn_with(["answered"], tools="[orders/lookup_order, hang/*]", servers=servers, WORKFORCE_TURN_TIMEOUT=3)
    assert marker.exists() and items == []
    turn = Request.objects.get(organization=org, session__session_id="eng.incidents:eng.lead")
    assert turn.status == Request.Status.FAILED and turn.error["reason"] == "turn-timeout", turn.error


def test_a_turn_makes_at_most_the_set_number_of_tool_calls(run_turn_with):
    args = {"order_id": "A-1001"}
    _, items = run_turn_with(
        [calls(("orders__lookup_order", args), ("orders__lookup_order", args), ("orders__lookup_order", args)), "done"],
        WORKFORCE_TURN_MAX_TOOL_CALLS=2,
    )
    assert [("refused" in i["result"]) for i in items] == [False, False, True]
    assert items[2]["result"] == {"refused": "tool-call-limit: a turn makes at most 2 tool calls; answer with what you have."}
    assert ToolCallEntry.objects.count() == 2


def test_an_answer_the_store_cannot_keep_is_a_refusal(run_turn_with):
    _, [item] = run_turn_with([calls(("orders__nul", {})), "ok"], tools="[orders/nul]")
    assert item["result"]["refused"].startswith("tool-error: orders/nul answered what cannot be kept: ")


def test_the_server_is_given_the_variables_env_names(run_turn_with, monkeypatch):
    monkeypatch.setenv("ORDERS_GREETING", "hello from settings")
    _, [item] = run_turn_with([calls(("orders__whoami", {})), "ok"], tools="[orders/whoami]")
    assert item["result"]["structuredContent"]["greeting"] == "hello from settings"


def test_sessions_are_kept_and_reused(run_turn_with):
    _, items = run_turn_with([calls(("orders__whoami", {})), calls(("orders__whoami", {})), "ok"], tools="[orders/whoami]")
    assert items[0]["result"]["structuredContent"]["pid"] == items[1]["result"]["structuredContent"]["pid"]


@pytest.fixture
def http_orders():
    port = free_port()
    process = start_http_orders(port, "t0ken")
    yield port
    process.kill()
    process.wait()


def test_a_streamable_http_server_is_called_with_headers_from_the_environment(run_turn_with, http_orders, monkeypatch):
    monkeypatch.setenv("CRM_AUTHORIZATION", "Bearer t0ken")
    _, [item] = run_turn_with(
        [calls(("crm__whoami", {})), "ok"], tools="[crm/whoami]", servers=SERVERS_YAML + http_server_yaml(http_orders)
    )
    assert item["result"]["structuredContent"]["greeting"] == "over http"


def test_an_http_server_that_refuses_the_session_offers_nothing_and_its_call_fails_cleanly(
    run_turn_with, http_orders, monkeypatch
):
    monkeypatch.setenv("CRM_AUTHORIZATION", "Bearer wrong")  # a whole set is not listed at hire
    mock, [item] = run_turn_with(
        [calls(("crm__whoami", {})), "ok"], tools="[crm/*]", servers=SERVERS_YAML + http_server_yaml(http_orders)
    )
    assert mock.calls_for("eng.lead")[0].tools == []
    assert item["result"] == {"refused": "tool-server-unavailable: crm/whoami: the tool server crm cannot be reached now."}
    assert not ToolCallEntry.objects.exists()  # not a denial: the seat holds the grant


def rogue_yaml(*extras: str) -> str:
    args = ", ".join([str(ROGUE), *extras])
    return f"servers:\n  rogue:\n    command: python\n    args: [{args}]\n"


def test_a_whole_sets_tool_the_server_does_not_list_is_not_offered_not_unreachable(run_turn_with):
    # Break-it: with orders/* granted, a call of a tool the server does not list was
    # refused tool-server-unavailable ("the tool server orders cannot be reached now")
    # though the server had answered as the turn began: it just offers no such tool.
    mock, items = run_turn_with(
        [calls(("orders__refund_order", {"order_id": "A-1001"}), ("orders__whoami", {})), "done"], tools="[orders/*]"
    )
    refused, answered = items
    assert refused["result"] == {
        "refused": "tool-not-offered: orders/refund_order is not one of your tools: "
        "the tool server orders does not offer it; nothing was called."
    }
    assert answered["result"]["structuredContent"]["pid"] > 0  # the server was there all along
    assert "orders__whoami" in mock.calls_for("eng.lead")[0].tools
    assert [e.event for e in ToolCallEntry.objects.all()] == ["tool.called"]  # nothing called, nothing denied


def test_a_listed_tool_whose_name_holds_a_nul_is_not_offered_and_its_call_refused_cleanly(run_turn_with, org, caplog):
    # Break-it: a server listing a tool named "nul\x00name" had it offered (its wire name
    # rogue__nul_name); its call was ledgered with the name as listed, which PostgreSQL's
    # text refuses: the call came back internal-error there (SQLite kept the NUL).
    from workforce.models import Request

    mock, items = run_turn_with(
        [calls(("rogue__nul_name", {}), ("rogue__good", {"x": "1"})), "done"], tools="[rogue/*]", servers=rogue_yaml("nul_name")
    )
    assert mock.calls_for("eng.lead")[0].tools == ["rogue__good"]
    refused, answered = items
    assert refused["result"] == {
        "refused": "tool-not-offered: rogue/nul_name is not one of your tools: "
        "the tool server rogue lists it, but it was left out of this turn; nothing was called."
    }
    assert answered["result"] == {"text": "good 1"}
    assert [(e.event, e.tool) for e in ToolCallEntry.objects.all()] == [("tool.called", "good")]
    assert "the tool rogue/'nul\\x00name' is not offered: its name contains a NUL character" in caplog.text
    turn = Request.objects.get(organization=org, session__session_id="eng.incidents:eng.lead")
    assert turn.status == Request.Status.COMPLETED, turn.error


def test_a_models_call_of_a_server_tool_whose_name_holds_a_nul_is_refused_and_nothing_ledgered(run_turn_with, org):
    # The model's side of the same name: the turn's one input rule refuses the call before
    # any tool sees it (seats.turns._unstorable_call), so no ledger row is written with it.
    from workforce.models import Request

    _, items = run_turn_with([calls(("orders__who\x00ami", {}), ("orders__whoami", {})), "done"], tools="[orders/*]")
    refused, answered = items
    assert refused == {
        "name": "(unstorable)",
        "arguments": None,
        "result": {"refused": "invalid-input: the tool call.name contains a NUL character."},
    }
    assert answered["result"]["structuredContent"]["pid"] > 0
    assert [(e.event, e.tool) for e in ToolCallEntry.objects.all()] == [("tool.called", "whoami")]
    turn = Request.objects.get(organization=org, session__session_id="eng.incidents:eng.lead")
    assert turn.status == Request.Status.COMPLETED, turn.error


def test_a_named_grant_of_a_tool_whose_name_holds_a_nul_is_refused_at_hire(make_tree, db):
    root = make_tree(tree(tools="[rogue/good, rogue/nul_name]", servers=rogue_yaml("nul_name")))
    assert hire_lines(root) == [
        'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names "rogue/nul_name", which the tool server rogue '
        "does not offer (it offers bad_schema, good)"
    ]


def test_an_endless_answer_over_stdio_is_read_no_further_than_the_bound(run_turn_with):
    # Break-it: the SDK's reader kept a server's line whole, however long: an answer
    # with no end was read into memory until the call's time limit (tool-timeout), and an
    # enormous one was read whole before WORKFORCE_TOOL_RESULT_CHARS refused it.
    _, items = run_turn_with(
        [calls(("rogue__endless", {}), ("rogue__good", {"x": "after"})), "done"],
        tools="[rogue/endless, rogue/good]",
        servers=rogue_yaml("endless"),
        WORKFORCE_TOOL_RESULT_CHARS=1000,
        WORKFORCE_TOOL_CALL_TIMEOUT=15,
    )
    bound = 16 * 1024 * 1024  # seats.mcp_client.answer_limit(): its floor (12 x 1000 + 65536 is less)
    refused, answered = items
    assert refused["result"] == {
        "refused": f"tool-result-too-large: rogue/endless: the tool server rogue answered more than {bound} characters, "
        "and its answer was read no further; nothing came back."
    }
    assert answered["result"] == {"text": "good after"}  # the server was started again
    assert [(e.event, e.data) for e in ToolCallEntry.objects.all()] == [
        ("tool.failed", {"reason": "tool-result-too-large"}),
        ("tool.called", {"isError": False}),
    ]
    from seats.mcp_client import answer_limit

    with override_settings(WORKFORCE_TOOL_RESULT_CHARS=1000):
        assert answer_limit() == bound
    with override_settings(WORKFORCE_TOOL_RESULT_CHARS=2_000_000):  # past the floor: no answer within it is cut
        assert answer_limit() == 12 * 2_000_000 + 65536


@pytest.fixture
def http_rogue():
    port = free_port()
    process = start_http_rogue(port, "endless", "endless_events")
    yield port
    process.kill()
    process.wait()


def test_an_endless_answer_over_http_is_read_no_further_than_the_bound(run_turn_with, http_rogue):
    # Break-it: an HTTP server's JSON answer was read whole (response.aread()) whatever
    # its length; one event of an event stream up to the SDK's 1 MiB, then refused
    # tool-server-unavailable, the session dropped.
    servers = f"servers:\n  web:\n    url: http://127.0.0.1:{http_rogue}/mcp\n"
    _, items = run_turn_with(
        [calls(("web__endless", {}), ("web__endless_events", {}), ("web__good", {"x": "after"})), "done"],
        tools="[web/endless, web/endless_events, web/good]",
        servers=servers,
        WORKFORCE_TOOL_RESULT_CHARS=1000,
        WORKFORCE_TOOL_CALL_TIMEOUT=15,
    )
    bound = 16 * 1024 * 1024
    json_body, event, answered = items
    for item, tool in ((json_body, "endless"), (event, "endless_events")):
        assert item["result"] == {
            "refused": f"tool-result-too-large: web/{tool}: the tool server web answered more than {bound} bytes, "
            "and its answer was read no further; nothing came back."
        }
    assert answered["result"] == {"text": "good after"}
    assert [e.event for e in ToolCallEntry.objects.all()] == ["tool.failed", "tool.failed", "tool.called"]


def test_the_conversation_page_shows_each_call_and_its_result(run_turn_with, client):
    from web.views import SESSION_USER

    run_turn_with([calls(("orders__lookup_order", {"order_id": "A-1001"}), ("orders__whoami", {})), "done"])
    session = client.session
    session[SESSION_USER] = OWNER
    session.save()
    page = client.get("/sessions/eng.incidents:eng.lead/").content.decode()
    assert "<code>orders__lookup_order</code> answered: {" in page and "Parcelways" in page
    assert "<code>orders__whoami</code> refused: tool-not-granted: orders/whoami is not one of your tools" in page


# ----------------------------------------------------------------------------- (6) the example tree


def test_the_example_desk_looks_an_order_up_with_its_tool_server(org, django_capture_on_commit_callbacks):
    from django.conf import settings

    from workforce.sessions import do_run_action

    root = Path(settings.BASE_DIR) / "examples" / "support-desk"
    assert set(declared_servers(root)) == {"orders"}
    open_mailboxes(root, org)
    seats = do_hire_tree_workers(root)
    configure_notify("mailbox", wake_member_seats(seats))
    with override_settings(WORKFORCE_ROOT=str(root)), django_capture_on_commit_callbacks(execute=True):
        do_run_action(
            org=org,
            kind="mailbox",
            session_id="support.desk",
            action="post",
            input={"body": "where is my order A-1001? it has not arrived"},
            user_id="u_42",
        )
    conversation = Session.objects.get(organization=org, session_id="support.desk:support.general")
    lookup, answer = [i.data for i in Item.objects.filter(session=conversation, component="tool-call").order_by("seq")]
    assert lookup["name"] == "orders__lookup_order"
    assert lookup["result"]["structuredContent"] == {
        "found": True,
        "order_id": "A-1001",
        "status": "shipped",
        "carrier": "Parcelways",
        "eta": "Thursday",
    }
    assert answer["name"] == "post-to-mailbox" and answer["result"]["ok"] is True


def test_manage_py_check_names_the_files_problems_and_unknown_servers_without_starting_any(make_tree):
    from seats.checks import check_workers

    root = make_tree(
        tree(tools="[billing/refund, orders/no_such_tool]", servers="servers:\n  orders:\n    command: /nonexistent/x\n")
    )
    with override_settings(WORKFORCE_ROOT=str(root)):
        found = [(e.id, e.msg) for e in check_workers()]
    assert found == [
        (
            "seats.E002",
            'teams/eng/workers/lead/WORKER.md: worker eng.lead: tools: names the tool server "billing", which '
            f"{TOOL_SERVERS_FILE} does not declare (it declares orders)",
        )
    ]  # orders/no_such_tool is checked at hire, where the server is started
    root = make_tree(tree(servers="servers: [orders]\n"))
    with override_settings(WORKFORCE_ROOT=str(root)):
        found = [(e.id, e.msg) for e in check_workers()]
    assert (
        "seats.E001",
        f"{TOOL_SERVERS_FILE}: [tool-servers-load-failed] servers: must be a mapping from a server's name to its declaration",
    ) in found


def test_the_checks_start_no_tool_server_for_a_seat_on_an_openai_model(make_tree, tmp_path):
    # Break-it: the tool-name check (seats.W002) built an openai seat's offered tools, its
    # tool-server capability included, so `manage.py check` (and every `serve` start)
    # started each granted server and waited for it: 20 s per server that hangs.
    from django.core import checks

    marker = tmp_path / "started"
    servers = f"servers:\n  hang:\n    command: sh\n    args: ['-c', 'touch {marker}; sleep 60']\n"
    files = {
        "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Where incidents are worked.", members=("eng.lead",)),
        "teams/eng/workers/lead/WORKER.md": worker_md("Answers.", model="openai/gpt-4o-mini", tools="[hang/*]"),
        TOOL_SERVERS_FILE: servers,
    }
    root = make_tree(files)
    with override_settings(WORKFORCE_ROOT=str(root), OPENAI_BASE_URL="http://127.0.0.1:9/v1"):
        found = checks.run_checks(tags=["workforce"])
    assert [e.id for e in found if e.id.startswith("seats.E")] == []
    assert not marker.exists()


def test_a_persons_own_worker_is_refused_its_unknown_grants_by_name(make_tree, db):
    from rest_framework.test import APIClient

    root = make_tree(tree())
    text = worker_md("Mine.", tools="[billing/refund, orders/refund_order, orders/lookup_order]")
    with override_settings(WORKFORCE_ROOT=str(root)):
        answer = APIClient().post("/api/workers", {"userId": "u_42", "id": "u42.scribe", "workerMd": text}, format="json")
        assert answer.status_code == 400, answer.content
        assert answer.json()["error"]["reason"] == "invalid-worker"
        assert answer.json()["error"]["problems"] == [
            f'tools: names the tool server "billing", which {TOOL_SERVERS_FILE} does not declare (it declares orders)',
            'tools: names "orders/refund_order", which the tool server orders does not offer '
            "(it offers crash, lookup_order, nul, sleep, whoami)",
        ]
        ok = APIClient().post(
            "/api/workers",
            {"userId": "u_42", "id": "u42.scribe", "workerMd": worker_md("Mine.", tools="[orders/lookup_order]")},
            format="json",
        )
        assert ok.status_code == 201, ok.content
        assert ok.json()["tools"] == ["orders/lookup_order"]


def test_the_counts_name_only_the_seats_the_reader_reaches(org, other_org):
    """A user's own worker and its calls are theirs: another user of the organization
    (to whom ``GET /api/workers/<id>`` answers 404) does not see it in the counts, nor
    does another organization."""
    from seats.models import Seat, ToolCallEntry

    Seat.objects.create(seat_id="ops", kind="agent", scope="org", organization=org)
    Seat.objects.create(seat_id="alice.tools", kind="agent", scope="own", organization=org, owner_user_id="alice")
    for seat_id in ("ops", "alice.tools"):
        ToolCallEntry.objects.create(
            organization=org, event=ToolCallEntry.Event.CALLED, seat_id=seat_id, server="orders", tool="t"
        )
    seen = {who: [c["seatId"] for c in tool_call_counts(org, user_id=who)] for who in ("alice", "bob", None)}
    assert seen == {"alice": ["alice.tools", "ops"], "bob": ["ops"], None: ["ops"]}
    assert tool_call_counts(other_org, user_id="alice") == []
    assert [c["seatId"] for c in tool_call_counts()] == ["alice.tools", "ops"]  # the admin's view: all


def test_a_file_with_a_problem_is_named_once_and_its_grants_do_not_cascade(make_tree):
    """One bad server in the file: the file's problem is reported (at its path, once), and
    a worker granting another server's tools is told the file needs fixing first, not
    that the server it names is undeclared."""
    root = make_tree(tree(servers=SERVERS_YAML + "  crm: {url: 'ftp://crm.example'}\n", tools="[orders/*]"))
    problems = hire_problems(read_workforce(root)[0], root=root)
    assert problems and all("does not declare" not in message for _, message in problems)
    assert any(
        message.startswith(
            f"tools: grants tool-server tools, but {TOOL_SERVERS_FILE} has 1 problem(s) to fix first (the first: servers.crm: url:"
        )
        for _, message in problems
    )
    [error] = read_workforce(root)[1]
    assert error.path == TOOL_SERVERS_FILE and error.message.startswith("servers.crm: url:")
