"""Live streams on a real ``serve`` (docs/api.md "Watching a session live"): a session's items
as server-sent events, from any process, resumable with ``Last-Event-ID``, bounded apart
from the web concurrency limit, and ended promptly when ``serve`` stops. Runs on SQLite
(a short poll) and on PostgreSQL (LISTEN/NOTIFY) alike."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, Server, wait_for
from tests.e2e.sse import SseStream

pytestmark = pytest.mark.e2e

STANDUP = "eng.standup"
STREAM = f"/api/sessions/{STANDUP}/stream"


@pytest.fixture
def tree(tmp_path):
    return write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
                "Where the engineering team posts daily status.", members=("eng.lead", "eng.analyst")
            ),
        },
    )


def post(server: Server, body: str) -> dict:
    answer = server.call("POST", f"/api/flows/mailbox/{STANDUP}/actions/post", {"userId": "u_42", "input": {"body": body}})
    assert answer.status == 202, answer.body
    return answer.body


def post_from_another_process(server: Server, root, body: str) -> None:
    """Post ``body`` from a separate Python process on the server's database (booted on
    the same tree, as a cluster worker would be)."""
    code = (
        "from workforce.runtime import ensure_booted; ensure_booted();"
        "from workforce.models import DEFAULT_ORG_ID;"
        "from workforce.sessions import do_run_action, ensure_organization;"
        f"r = do_run_action(org=ensure_organization(DEFAULT_ORG_ID), kind='mailbox', session_id={STANDUP!r},"
        f" action='post', input={{'body': {body!r}}}, user_id='u_other');"
        "assert r.status == 'completed', r.error"
    )
    env = {**server.env, "WORKFORCE_ROOT": str(root), "WORKFORCE_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "shell", "-c", code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def bodies(events) -> list[str]:
    return [e.data["data"]["body"] for e in events]


def test_a_stream_sends_the_backlog_then_an_item_stored_by_another_process(start_server, tree):
    server = start_server(tree, "--no-cluster")
    post(server, "first")
    stream = SseStream(server.base, STREAM + "?itemTypes=component")
    try:
        assert stream.status == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert stream.headers["cache-control"] == "no-cache"
        (backlog,) = stream.events(1)
        assert backlog.id == "1" and backlog.data["seq"] == 1
        assert backlog.data["component"] == "mailbox-post" and backlog.data["data"]["body"] == "first"
        assert backlog.data["requestId"].startswith("req_")

        post_from_another_process(server, tree, "from elsewhere")
        (live,) = stream.events(1, timeout=20)
        assert live.id == "2" and bodies([live]) == ["from elsewhere"]
        assert stream.quiet_for(1.0) == []  # nothing repeated
    finally:
        stream.close()


def test_a_reconnect_with_last_event_id_gets_exactly_the_missed_items(start_server, tree):
    server = start_server(tree, "--no-cluster")
    for n in range(2):
        post(server, f"seen {n}")
    first = SseStream(server.base, STREAM + "?after=0")
    try:
        seen = first.events(2)
    finally:
        first.close()
    assert [e.id for e in seen] == ["1", "2"]
    for n in range(3):
        post(server, f"missed {n}")

    # An EventSource reconnects to the URL it was opened with, sending the last id it saw.
    again = SseStream(server.base, STREAM + "?after=0", headers={"Last-Event-ID": seen[-1].id})
    try:
        missed = again.events(3)
        assert [e.id for e in missed] == ["3", "4", "5"]
        assert bodies(missed) == ["missed 0", "missed 1", "missed 2"]
        post(server, "live")
        (live,) = again.events(1)
        assert live.id == "6" and bodies([live]) == ["live"]
        assert again.quiet_for(1.0) == []
    finally:
        again.close()

    after = SseStream(server.base, STREAM + "?after=4")  # the cursor as a query parameter
    try:
        assert [e.id for e in after.events(2)] == ["5", "6"]
    finally:
        after.close()


def test_a_stream_filters_by_item_type_and_sends_heartbeats(start_server, tree):
    server = start_server(tree, "--no-cluster", env={"WORKFORCE_STREAM_HEARTBEAT_SECONDS": "1"})
    post(server, "hello")
    stream = SseStream(server.base, STREAM + "?itemTypes=message")
    try:
        beat = stream.next_event(timeout=10, comments=True)
        assert beat.comment == "heartbeat" and beat.id is None
        assert stream.quiet_for(1.5) == []  # the post's item is a component, not a message
    finally:
        stream.close()


def test_a_stream_refuses_like_the_items_endpoint(start_server, tree):
    server = start_server(tree, "--no-cluster")
    missing = SseStream(server.base, "/api/sessions/eng.nowhere/stream")
    assert missing.status == 404 and missing.body["error"]["reason"] == "session-not-found"
    assert missing.headers["Content-Type"] == "application/json"
    bad = SseStream(server.base, STREAM, headers={"Last-Event-ID": "soon"})
    assert bad.status == 400 and bad.body["error"]["reason"] == "invalid-input"


def test_streams_beyond_the_web_concurrency_limit_do_not_starve_a_post(start_server, tree):
    """Four ordinary slots, ten streams open: a post still answers, every stream gets its
    item, and one stream over WORKFORCE_STREAM_LIMIT is refused at once."""
    server = start_server(tree, "--no-cluster", env={"WORKFORCE_WEB_CONCURRENCY": "4", "WORKFORCE_STREAM_LIMIT": "10"})
    streams = [SseStream(server.base, STREAM) for _ in range(10)]
    try:
        assert [s.status for s in streams] == [200] * 10
        for s in streams:  # each has started (its retry line is read before any event)
            assert s.quiet_for(0.1) == []
        over = SseStream(server.base, STREAM)
        assert over.status == 503 and over.body["error"]["reason"] == "too-many-streams"
        assert over.headers["retry-after"] == "5"

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda i: post(server, f"while streaming {i}"), range(8)))
        assert {a["status"] for a in answers} == {"completed"}
        assert server.call("GET", "/api/mailboxes/eng.standup/transcript").status == 200
        for s in streams:
            assert sorted(int(e.id) for e in s.events(8)) == list(range(1, 9))
    finally:
        for s in streams:
            s.close()
    # Closed streams give their places back.
    wait_for(lambda: SseStream(server.base, STREAM).status == 200, timeout=10, what="a stream place freed")


def test_serve_stops_promptly_with_streams_open(start_server, tree):
    # A 30 s stop budget: uvicorn alone would wait 24 s for the open streams.
    server = start_server(tree, "--no-cluster", env={"WORKFORCE_STOP_SECONDS": "30"})
    post(server, "hello")
    streams = [SseStream(server.base, STREAM) for _ in range(3)]
    for s in streams:
        assert s.events(1)[0].id == "1"
    started = time.monotonic()
    server.stop()
    took = time.monotonic() - started
    assert server.process.returncode is not None
    for s in streams:
        assert s.closed.wait(5), "the stream was not ended"
    assert took < 12, f"serve took {took:.1f}s to stop with streams open:\n{server.log.read_text()[-3000:]}"


def test_an_event_is_the_items_endpoint_item(start_server, tree):
    server = start_server(tree, "--no-cluster")
    post(server, "same shape")
    stream = SseStream(server.base, STREAM)
    try:
        (event,) = stream.events(1)
    finally:
        stream.close()
    (item,) = server.call("GET", f"/api/sessions/{STANDUP}/items").body["items"]
    assert event.data == item
    assert json.dumps(event.data)  # plain JSON
