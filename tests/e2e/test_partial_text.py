"""An answer as it is written (issue 25 item 10; docs/api.md "Watching a session live",
``partial-text``), on a real ``serve`` and cluster, on SQLite (preview files, polled)
and PostgreSQL (NOTIFY) alike: the seat's text reaches the mailbox's stream and its open
page in pieces before the durable line, which lands once, then the preview ends. The
seat's model is ``embedded/scripted`` told to write slowly (``/pace``). The Mail page and a
desk show a mail sent while they are open without a reload."""

from __future__ import annotations

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, session_items, session_requests, transcript, wait_for
from tests.e2e.sse import SseStream
from tests.e2e.test_web_browser import act_as, browser, page  # noqa: F401

pytestmark = pytest.mark.e2e

DESK = "eng.desk"
SEAT = "eng.lead"
BODY = "where is my order?"


@pytest.fixture
def tree(tmp_path):
    return write_tree(
        tmp_path / "tree",
        {
            # Routed: the member's reply is the post's answer, handed over when its turn ends.
            "teams/eng/mailboxes/desk/MAILBOX.md": mailbox_md(
                "Ask the team anything.", members=(SEAT,), routing=f"\n  fallback: {SEAT}"
            ),
            "teams/eng/workers/lead/WORKER.md": "---\ndescription: Answers orders.\nmodel: embedded/scripted\n---\n\nAnswer.\n",
        },
    )


def post(server: Server, body: str) -> dict:
    answer = server.call("POST", f"/api/flows/mailbox/{DESK}/actions/post", {"userId": "u_42", "input": {"body": body}})
    assert answer.status == 202, answer.body
    return answer.body


def test_the_answer_reaches_the_mailbox_stream_in_pieces_before_its_line(start_server, tree):
    server = start_server(tree)
    stream = SseStream(server.base, f"/api/sessions/{DESK}/stream?itemTypes=component", timeout=60)
    try:
        assert stream.status == 200
        post(server, f"{BODY}\n/pace 150")
        events = []
        while not (events and events[-1].event == "partial-text" and events[-1].data["done"]):
            events.append(stream.next_event(timeout=30))
        partials = [e for e in events if e.event == "partial-text"]
        lines = [e for e in events if e.event is None and e.data["component"] == "mailbox-post"]
        assert [line.data["data"]["body"] for line in lines][0] == f"{BODY}\n/pace 150"
        (answer,) = [line for line in lines if line.data["data"].get("seatAuthored")]
        writing = [e for e in partials if not e.data["done"]]
        assert len(writing) >= 2, [e.data for e in partials]  # pieces, not the whole text at once
        texts = [e.data["text"] for e in writing]
        assert all(a != b and b.startswith(a) for a, b in zip(texts, texts[1:], strict=False)), texts
        assert answer.data["data"]["body"].startswith(texts[-1]) and len(texts[0]) < len(answer.data["data"]["body"])
        assert events.index(writing[0]) < events.index(answer) < events.index(partials[-1])  # the line, then the end
        first = writing[0].data
        assert first["agentName"] == SEAT and first["sessionId"] == f"{DESK}:{SEAT}" and first["start"] == 0
        assert first["requestId"].startswith("req_") and partials[-1].data["requestId"] == first["requestId"]
        assert all(e.data["requestId"] == first["requestId"] for e in partials)
        assert stream.quiet_for(1.0) == []  # nothing repeated
    finally:
        stream.close()
    # Never stored: the transcript holds the post and the answer once; the seat's
    # conversation holds the reply once.
    assert [line["body"] for line in transcript(server, DESK)] == [f"{BODY}\n/pace 150", answer.data["data"]["body"]]
    replies = [i for i in session_items(server, f"{DESK}:{SEAT}") if i["type"] == "message" and i["data"]["role"] == "assistant"]
    assert len(replies) == 1


def test_the_seats_own_stream_gets_the_text_too_and_a_quick_answer_ends_it(start_server, tree):
    server = start_server(tree)
    post(server, "warm up")  # the seat's conversation exists from here
    wait_for(lambda: session_requests(server, f"{DESK}:{SEAT}"), timeout=30, what="the warm-up turn", log=server.log)
    stream = SseStream(server.base, f"/api/sessions/{DESK}:{SEAT}/stream", timeout=60)
    try:
        assert stream.status == 200
        post(server, f"{BODY}\n/pace 100")
        seen = []
        while not (seen and seen[-1].event == "partial-text" and seen[-1].data["done"]):
            seen.append(stream.next_event(timeout=30))
        partials = [e for e in seen if e.event == "partial-text"]
        assert len(partials) >= 2 and partials[0].data["sessionId"] == f"{DESK}:{SEAT}"
        reply = [e for e in seen if e.event is None and e.data["type"] == "message" and e.data["data"]["role"] == "assistant"]
        assert len(reply) == 2  # the warm-up's and this one's, each once
        assert seen.index(reply[-1]) < seen.index(partials[-1])
    finally:
        stream.close()


def test_the_mailbox_page_shows_the_answer_growing_then_its_line(start_server, tree, tmp_path, page):
    server = start_server(tree)
    act_as(page, server.base)
    page.goto(f"{server.base}/mailboxes/{DESK}/")
    page.evaluate("window.notReloaded = true")
    page.fill("#post-form textarea", f"{BODY}\n/pace 400")
    page.click("#post-form button")
    page.wait_for_selector("#post-status .ok")
    partial = page.wait_for_selector("#partials li.partial", timeout=30_000)
    first = partial.inner_text()
    assert SEAT in first and "is answering" in first
    assert page.locator("#lines li.seat").count() == 0  # no line yet: the text is a preview
    busy = page.wait_for_selector(f"#busy li.run[data-flow='{SEAT}']", timeout=10_000)
    assert f"{SEAT} is answering" in " ".join(busy.inner_text().split())
    page.wait_for_function(
        "(first) => { const li = document.querySelector('#partials li.partial'); return li && li.innerText !== first; }",
        arg=first,
        timeout=10_000,
    )
    grown = page.inner_text("#partials li.partial .body")
    assert grown.startswith(f"{SEAT} heard:") and page.locator("#lines li.seat").count() == 0
    page.screenshot(path=str(tmp_path / "partial.png"), full_page=True)

    page.wait_for_selector("#lines li.seat", timeout=30_000)
    landed = page.inner_text("#lines li.seat .body")
    assert " ".join(landed.split()).startswith(" ".join(grown.split())) and landed.count(BODY) == 1
    page.wait_for_selector("#partials li", state="detached", timeout=10_000)  # the line replaced the text
    page.wait_for_selector("#busy .idle", timeout=10_000)  # and nobody is answering any more
    assert page.locator("#lines li.seat").count() == 1 and page.evaluate("window.notReloaded") is True
    page.reload()
    assert page.locator("#lines li").count() == 2 and page.locator("#partials li").count() == 0


def test_the_room_page_shows_a_seats_answer_growing_then_its_line(start_server, tmp_path, page):
    tree = write_tree(
        tmp_path / "tree",
        {
            "org/resources/projects.yaml": "talk:\n  seats: [eng.alpha]\n  charter: Plan the work.\n",
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": "---\ndescription: Alpha.\nmodel: embedded/scripted\n---\n\nAnswer in the room.\n",
        },
    )
    server = start_server(tree)
    created = server.call("POST", "/api/projects", {"userId": "u_ana", "title": "Launch", "id": "launch", "members": ["u_42"]})
    assert created.status == 201, created.body
    joined = server.call("POST", "/api/flows/mailbox/talk_u42/actions/join", {"userId": "u_42", "input": {"projectId": "launch"}})
    assert joined.status == 202 and joined.body["status"] == "completed", joined.body  # so the page watches this talk session
    act_as(page, server.base)
    page.goto(server.base + "/projects/launch/")
    page.evaluate("window.notReloaded = true")
    page.fill("#post-form textarea", "what is blocked?\n/pace 300")
    page.click("#post-form button")
    partial = page.wait_for_selector("#partials li.partial[data-agent='eng.alpha']", timeout=30_000)
    assert "is answering" in partial.inner_text() and page.locator("#lines li.seat").count() == 0
    page.wait_for_selector("#lines li.seat", timeout=30_000)
    page.wait_for_selector("#partials li", state="detached", timeout=10_000)
    assert page.locator("#lines li.seat").count() == 1 and page.evaluate("window.notReloaded") is True


def test_a_mail_sent_while_the_mail_page_and_a_desk_are_open_appears_on_both(start_server, tmp_path, page):
    worker = "---\ndescription: Reads mail.\nmodel: embedded/echo\nrun:\n  triggers: [mail]\n---\n\nRead.\n"
    server = start_server(write_tree(tmp_path / "tree", {"teams/eng/workers/alpha/WORKER.md": worker}))
    act_as(page, server.base)
    page.goto(server.base + "/mail/desk/eng.alpha/")
    page.evaluate("window.notReloaded = true")
    mail_page = page.context.new_page()
    mail_page.goto(server.base + "/mail/")
    mail_page.evaluate("window.notReloaded = true")
    sent = server.call(
        "POST", "/api/mail", {"userId": "ann@example.org", "to": "eng.alpha", "subject": "Build", "body": "Green?"}
    )
    assert sent.status == 201, sent.body
    row = page.wait_for_selector("#desk li.thread:has-text('Build')", timeout=15_000)
    assert "eng.alpha:1" in row.inner_text() and page.evaluate("window.notReloaded") is True
    mail_page.wait_for_selector("#threads li.thread:has-text('Build')", timeout=15_000)
    assert mail_page.evaluate("window.notReloaded") is True
