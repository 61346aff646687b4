"""Busy runs and waiting on a real ``serve`` and cluster: while a seat's model holds its
answer, the post's runs link lists the seat's turn; a read of that turn with
``?wait=`` answers once it finished, and the runs are gone."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import wait_for
from tests.e2e.sse import SseStream
from tests.fakes import FakeOpenAIServer, chat_completion

pytestmark = pytest.mark.e2e


class HeldModel(FakeOpenAIServer):
    """Answers every chat call once ``release`` is set (at most 60 s)."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def reply(self, request):
        self.release.wait(timeout=60)
        return 200, chat_completion("done thinking", model=request["body"]["model"])


def test_a_posts_runs_while_its_seat_thinks_then_a_wait_for_its_turn(start_server, tmp_path):
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Status.", members=("eng.slow",)),
            "teams/eng/workers/slow/WORKER.md": "---\ndescription: Thinks slowly.\nmodel: openai/held\n---\n\nYou think.\n",
        },
    )
    with HeldModel() as model:
        server = start_server(
            tree, env={"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "test", "WORKFORCE_WEB_CONCURRENCY": "2"}
        )
        stream = SseStream(server.base, "/api/sessions/eng.standup:eng.slow/stream?itemTypes=message")
        assert stream.status == 404  # no conversation yet
        answer = server.call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": "why red?"}}
        )
        assert answer.status == 202
        links = answer.body["links"]
        runs_path = links["runs"].removeprefix(server.base)

        runs = wait_for(lambda: server.call("GET", runs_path).body["runs"], timeout=30, what="the seat's run", log=server.log)
        (run,) = runs
        assert run["flowId"] == "eng.slow" and run["status"] == "active" and run["startedBy"] == answer.body["requestId"]
        assert run["workingOn"]["body"] == "why red?"

        waited = server.call("GET", f"/api/requests/{run['requestId']}?wait=1")
        assert waited.status == 200 and waited.body["status"] == "running"  # a second was not enough

        stream = SseStream(server.base, "/api/sessions/eng.standup:eng.slow/stream?itemTypes=message")
        assert stream.status == 200
        # Four reads waiting on the turn, two ordinary slots: a read of the transcript
        # still answers while they wait (they hold no slot).
        with ThreadPoolExecutor(max_workers=4) as pool:
            waits = [pool.submit(server.call, "GET", f"/api/requests/{run['requestId']}?wait=30") for _ in range(4)]
            assert server.call("GET", "/api/mailboxes/eng.standup/transcript").status == 200
            assert not any(w.done() for w in waits)
            model.release.set()
            for finished in (w.result() for w in waits):
                assert finished.status == 200 and finished.body["status"] == "completed", finished.body
        assert finished.body["output"]["reply"] == "done thinking"
        assert server.call("GET", runs_path).body["runs"] == []
        # The seat's conversation streamed its turn: the prompt, then the reply (with the
        # answer's text as it was written, ``partial-text`` events, in between: no items).
        items = []
        while len(items) < 2:
            event = stream.next_event()
            if event.event != "partial-text":
                items.append(event)
        roles = [e.data["data"]["role"] for e in items]
        assert roles == ["user", "assistant"]
        stream.close()
