"""Cancelling across processes, on a real django-q2 cluster, over HTTP (README
"Cancelling"): a post wakes a seat whose model, a fake OpenAI-compatible server in this
test process, holds its first answer (a tool call, so a second model call would
follow). While the cluster's worker waits on it, the web process takes
``POST /api/requests/{id}/cancel``; the worker sees the cancel at its next safe point:
no second model call, no reply, the turn aborted and the delivery failed ``cancelled``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, session_requests, transcript, wait_for
from tests.fakes import FakeOpenAIServer, chat_completion

pytestmark = pytest.mark.e2e

MAILBOX = "eng.standup"
PRINCIPAL = "workforce"  # WORKFORCE_OPEN_USER: a seat's turn in a mailbox runs as the mailbox's principal


class HeldModel(FakeOpenAIServer):
    """Holds its first answer (a call to a tool nobody offers) until ``release``."""

    def __init__(self):
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def reply(self, request: dict) -> tuple[int, dict]:
        model = request["body"]["model"]
        if len(self.requests) == 1:
            self.entered.set()
            self.release.wait(timeout=120)
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "look-around", "arguments": "{}"}}],
            }
            return 200, chat_completion(message, model=model, finish_reason="tool_calls")
        return 200, chat_completion("a second model call", model=model, id=f"chatcmpl-{len(self.requests)}")

    def close(self) -> None:
        self.release.set()
        super().close()


def tree(root: Path) -> Path:
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.slow",)),
            "teams/eng/workers/slow/WORKER.md": "---\ndescription: Slow.\nmodel: openai/held\n---\n\nAnswer.\n",
        },
    )


def turn(server: Server) -> dict | None:
    found = session_requests(server, f"{MAILBOX}:eng.slow", "onMailboxPost")
    return found[0] if found else None


def test_a_cancel_taken_by_the_web_process_stops_the_turn_a_cluster_worker_runs(start_server, tmp_path):
    with HeldModel() as held:
        env = {"OPENAI_BASE_URL": held.base_url, "OPENAI_API_KEY": "sk-test"}
        server = start_server(tree(tmp_path / "tree"), env=env)
        posted = server.call("POST", f"/api/flows/mailbox/{MAILBOX}/actions/post", {"userId": "u_42", "input": {"body": "hi"}})
        assert posted.status == 202, posted.body
        assert wait_for(held.entered.is_set, timeout=60, what="the seat's first model call", log=server.log)
        running = wait_for(lambda: turn(server), timeout=30, what="the seat's turn", log=server.log)
        assert running["status"] == "running"

        stranger = server.call("POST", f"/api/requests/{running['requestId']}/cancel", {"userId": "u_42"})
        assert stranger.status == 403 and stranger.body["error"]["reason"] == "not-request-owner"  # it reads it
        cancelled = server.call("POST", f"/api/requests/{running['requestId']}/cancel", {"userId": PRINCIPAL})
        assert cancelled.status == 200, cancelled.body
        assert cancelled.body["status"] == "aborted"
        assert cancelled.body["error"] == {"reason": "cancelled", "message": "cancelled: its run was cancelled"}
        again = server.call("POST", f"/api/requests/{running['requestId']}/cancel", {"userId": PRINCIPAL})
        assert again.status == 200 and again.body == cancelled.body
        held.release.set()

        failed = wait_for(
            lambda: session_requests(server, MAILBOX, "deliverPost"), timeout=60, what="the failed delivery", log=server.log
        )
        assert failed[0]["error"]["reason"] == "cancelled"
        assert len(held.requests) == 1  # the worker stopped before its second model call
        final = turn(server)
        assert (final["status"], final["error"]["reason"]) == ("aborted", "cancelled")
        assert [line["body"] for line in transcript(server, MAILBOX)] == ["hi"]
        late = server.call("POST", f"/api/requests/{posted.body['requestId']}/cancel", {"userId": "u_42"})
        assert late.status == 409 and late.body["error"]["reason"] == "request-finished"
