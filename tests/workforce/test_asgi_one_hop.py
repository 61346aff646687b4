"""The ASGI app ``serve`` runs (``workforce_project.asgi``): a short request runs Django's
middleware and its view in one worker thread (``OneHopHandler``), answering as the stock
handler does; the request's signals run on that thread, threads are kept between
requests, and two requests still run at once (issue "Speed", the web process's post)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from django.core import signals
from django.db import connection

from tests.conftest import MEMBER, on_postgres
from workforce.models import Request

pytestmark = pytest.mark.django_db(transaction=True)  # the requests run on other threads


async def _call(path: str, *, method: str = "GET", body: bytes = b"", headers=()) -> tuple[int, dict, bytes]:
    from workforce_project.asgi import application

    path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-length", str(len(body)).encode()), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    answer: dict = {"body": b""}
    done = asyncio.Event()
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode().lower(): v.decode() for k, v in message["headers"]}
        else:
            answer["body"] += message.get("body", b"")
            if not message.get("more_body"):
                done.set()

    await application(scope, receive, send)
    done.set()
    return answer["status"], answer["headers"], answer["body"]


def _post(session_id: str, payload: dict, **kw):
    body = json.dumps(payload).encode()
    return _call(
        f"/api/flows/mailbox/{session_id}/actions/post",
        method="POST",
        body=body,
        headers=[(b"content-type", b"application/json")],
        **kw,
    )


def _json(body: bytes) -> dict:
    return json.loads(body)


def test_a_post_answers_202_with_its_request_and_links(open_tree):
    open_tree()
    status, headers, body = asyncio.run(_post("eng.standup", {"userId": MEMBER, "input": {"body": "hello"}}))
    data = _json(body)
    assert status == 202 and headers["content-type"] == "application/json"
    assert (data["status"], data["sessionId"], data["output"]["body"]) == ("completed", "eng.standup", "hello")
    request_id = data["requestId"]
    assert headers["location"] == f"http://127.0.0.1:8000/api/requests/{request_id}"
    assert data["links"] == {
        "request": f"http://127.0.0.1:8000/api/requests/{request_id}?userId={MEMBER}",
        "wait": f"http://127.0.0.1:8000/api/requests/{request_id}?wait=30&userId={MEMBER}",
        "runs": f"http://127.0.0.1:8000/api/sessions/eng.standup/runs?status=active&startedBy={request_id}&userId={MEMBER}",
        "stream": f"http://127.0.0.1:8000/api/sessions/eng.standup/stream?userId={MEMBER}",
    }
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"  # the middleware ran
    assert Request.objects.get(request_id=request_id).status == "completed"


def test_refusals_keep_their_json_shape(open_tree):
    open_tree()
    status, _, body = asyncio.run(_post("eng.standup", {"userId": MEMBER, "input": {"body": "hi", "author": "mallory"}}))
    assert status == 403 and _json(body)["error"]["reason"] == "author-not-a-member"
    assert _json(body)["status"] == "failed" and _json(body)["requestId"].startswith("req_")
    status, _, body = asyncio.run(
        _call(
            "/api/flows/mailbox/eng.standup/actions/post",
            method="POST",
            body=b"{",
            headers=[(b"content-type", b"application/json")],
        )
    )
    assert status == 400 and _json(body)["error"]["reason"] == "invalid-input"
    status, _, body = asyncio.run(_call("/api/no-such-thing"))
    assert status == 404 and _json(body)["status"] == "failed"


def test_a_requests_signals_run_on_its_thread_and_threads_are_kept():
    seen: list[tuple[str, int, bool | None]] = []

    def started(**kwargs):
        seen.append(("started", threading.get_ident(), None))

    def finished(**kwargs):
        # Connected after Django's close_old_connections: this request's connection is
        # already handed back.
        seen.append(("finished", threading.get_ident(), connection.connection is None))

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:

        async def two():
            loop_thread = threading.get_ident()
            for _ in range(2):
                status, _, _ = await _call("/api/mailboxes")  # reads the database
                assert status == 200
            return loop_thread

        loop_thread = asyncio.run(two())
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [event for event, _, _ in seen] == ["started", "finished", "started", "finished"]
    threads = {thread for _, thread, _ in seen}
    assert len(threads) == 1 and loop_thread not in threads  # one kept worker thread, not the loop's
    if on_postgres():  # (SQLite's in-memory test database is never closed)
        assert all(closed for event, _, closed in seen if event == "finished")


def test_two_requests_run_at_once_on_two_threads(monkeypatch, settings):
    from workforce_project import asgi

    # Web slots of this test's own (an earlier test may have left one slot in place).
    settings.WORKFORCE_WEB_CONCURRENCY = 4
    monkeypatch.setattr(asgi._server, "slots", None)
    first_waits = threading.Event()
    waited: list[bool] = []

    def started(scope=None, **kwargs):
        if scope and scope["path"] == "/api/first":
            waited.append(first_waits.wait(10))  # the second request must run meanwhile
        elif scope and scope["path"] == "/api/second":
            first_waits.set()

    signals.request_started.connect(started)
    try:

        async def both():
            return await asyncio.gather(_call("/api/first"), _call("/api/second"))

        answers = asyncio.run(both())
    finally:
        signals.request_started.disconnect(started)
    assert waited == [True]
    assert [status for status, _, _ in answers] == [404, 404]


def test_a_static_file_streams_whole_and_then_finishes_the_request():
    finished: list[int] = []

    def on_finished(**kwargs):
        finished.append(threading.get_ident())

    signals.request_finished.connect(on_finished)
    try:
        status, headers, body = asyncio.run(_call("/static/web/vendor/htmx-2.0.11.min.js"))
    finally:
        signals.request_finished.disconnect(on_finished)
    expected = (Path(__file__).resolve().parents[2] / "web/static/web/vendor/htmx-2.0.11.min.js").read_bytes()
    assert status == 200 and body == expected and int(headers["content-length"]) == len(expected)
    assert len(finished) == 1


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_stream_asked_for_by_get_or_head_goes_to_the_stock_handler(method):
    """A HEAD of a stream is answered as the stream is (streamed, the body dropped by the
    server): on the short path it held a web slot after its client had gone, because
    only Django's stock handler ends a stream when its client disconnects."""
    from workforce_project.asgi import is_long_lived

    assert is_long_lived({"type": "http", "method": method, "path": "/api/sessions/support.desk/stream"})
    assert is_long_lived({"type": "http", "method": method, "path": "/mailboxes/support.desk/events"})
    assert not is_long_lived({"type": "http", "method": "POST", "path": "/api/sessions/support.desk/stream"})
    assert not is_long_lived({"type": "http", "method": method, "path": "/api/sessions/support.desk/items"})


def test_the_short_requests_running_are_counted_while_they_hold_a_slot(monkeypatch, settings):
    """What serve's same-process dispatch asks before it runs a turn here
    (``short_requests_running``, ``serve._web_busy``): each short request counts from its
    slot to its answer."""
    from workforce_project import asgi

    settings.WORKFORCE_WEB_CONCURRENCY = 4
    monkeypatch.setattr(asgi._server, "slots", None)
    monkeypatch.setattr(asgi._server, "short_running", 0)
    release = threading.Event()
    counts: dict[str, int] = {}

    def started(scope=None, **kwargs):
        if scope and scope["path"] == "/api/first":
            counts["first"] = asgi.short_requests_running()
            release.wait(10)
        elif scope and scope["path"] == "/api/second":
            counts["second"] = asgi.short_requests_running()
            release.set()

    signals.request_started.connect(started)
    try:

        async def both():
            first = asyncio.create_task(_call("/api/first"))
            while "first" not in counts:
                await asyncio.sleep(0.01)
            return await asyncio.gather(first, _call("/api/second"))

        asyncio.run(both())
    finally:
        signals.request_started.disconnect(started)
    assert counts == {"first": 1, "second": 2}
    assert asgi.short_requests_running() == 0
