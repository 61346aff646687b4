"""The pages in a real browser (docs/pages.md "The pages"): Debian's ``chromium`` driven by
Playwright (``executable_path``; no browser is downloaded) against a real ``serve`` and
cluster. The mailbox page posts through its form and shows the seat's answer with no
reload; the board page shows a row move to completed; the room page shows the seats' answers
to a form post; the Mail page, a thread and a desk open. Each page is screenshotted under
the test's tmp dir, and any console error fails the test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (.ci/run installs it)
ANSWERS = '/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}'


@pytest.fixture
def browser():
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: apt-get install -y chromium"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    """A page that records console errors and uncaught exceptions; the test fails on any."""
    context = browser.new_context()
    opened = context.new_page()
    opened.errors = []
    opened.on("console", lambda message: message.type == "error" and opened.errors.append(message.text))
    opened.on("pageerror", lambda error: opened.errors.append(str(error)))
    yield opened
    context.close()
    assert opened.errors == [], opened.errors


def act_as(page, base: str, user_id: str = "u_42") -> None:
    page.goto(base + "/")
    assert page.url.startswith(base + "/who")  # development mode asks who you are
    page.fill("input[name=userId]", user_id)
    page.click("form.who-form button")
    page.wait_for_url(base + "/")
    assert page.inner_text("#acting-as") == user_id


def test_a_form_post_past_the_backlog_bound_says_so_in_the_form(start_server, tmp_path, page):
    # Break-it: htmx swaps no 5xx answer, so a post refused backlog-full showed nothing.
    slow = "---\ndescription: Slow.\nmodel: embedded/scripted\n---\n\nAnswer.\n"
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts status.", members=("eng.lead",)),
            "teams/eng/workers/lead/WORKER.md": slow,
        },
    )
    server = start_server(tree, env={"WORKFORCE_BACKLOG_LIMIT": "1", "WORKFORCE_INLINE_TURNS": "0"})
    act_as(page, server.base)
    page.goto(server.base + "/mailboxes/eng.standup/")
    held = server.call(
        "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_1", "input": {"body": "hold\n/sleep 30000"}}
    )
    assert held.status == 202
    page.wait_for_timeout(1200)  # past the kept count's second (workforce.backlog)
    page.fill("#post-form textarea", "while the workers are behind")
    page.click("#post-form button")
    refused = page.wait_for_selector("#post-status .error", timeout=10_000)
    assert refused.inner_text().startswith(
        "backlog-full: 1 wakes are waiting for the workers (the bound is 1); nothing was posted."
    )
    assert page.input_value("#post-form textarea") == "while the workers are behind"  # kept for a retry
    assert [e for e in page.errors if "503" not in e] == []
    page.errors.clear()  # the browser logs the 503 itself


def test_the_mailbox_page_shows_the_seats_answer_to_a_form_post_without_reload(start_server, tmp_path, page):
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts status.", members=("eng.lead",)),
            "teams/eng/workers/lead/WORKER.md": "---\ndescription: Answers.\nmodel: embedded/echo\n"
            f"tools: [post-to-mailbox]\n---\n\nAnswer in the mailbox.\n{ANSWERS}\n",
        },
    )
    server = start_server(tree)
    act_as(page, server.base)
    assert "eng.standup" in page.inner_text("#mailboxes") and "eng.lead" in page.inner_text("#workers")
    page.screenshot(path=str(tmp_path / "home.png"), full_page=True)

    page.click("#mailboxes a")
    page.wait_for_url(server.base + "/mailboxes/eng.standup/")
    page.evaluate("window.notReloaded = true")
    page.fill("#post-form textarea", "shipped the reader")
    page.select_option("#post-form select[name=author]", "eng.lead")
    page.click("#post-form button")
    page.wait_for_selector("#post-status .ok")
    answer = page.wait_for_selector("#lines li.seat", timeout=30_000)
    assert "eng.lead heard: eng.lead in eng.standup: shipped the reader" in answer.inner_text()
    lines = page.locator("#lines li")
    assert lines.count() == 2  # the post and the answer, each once
    assert "shipped the reader" in lines.nth(0).inner_text()
    assert page.evaluate("window.notReloaded") is True
    assert page.input_value("#post-form textarea") == ""
    page.wait_for_selector("#busy .idle")  # nobody is working once the turn finished
    page.screenshot(path=str(tmp_path / "mailbox.png"), full_page=True)

    page.reload()  # the same transcript after a reload, nothing doubled
    assert page.locator("#lines li").count() == 2


def test_the_board_page_shows_a_row_move_to_completed(start_server, tmp_path, page):
    board = "eng.incidents.followups"
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
                "Where the team works incidents.", members=("eng.lead",), boards="[followups]"
            ),
            "teams/eng/workers/lead/WORKER.md": "---\ndescription: Works the followups.\nmodel: embedded/echo\n"
            f"drains: [{board}]\n---\n\nWork the row; your reply is its output.\n",
        },
    )
    server = start_server(tree)
    act_as(page, server.base)
    page.click(f"#boards a[href='/boards/{board}/']")
    page.wait_for_url(f"{server.base}/boards/{board}/")
    page.evaluate("window.notReloaded = true")
    assert page.locator(".task").count() == 0

    filed = server.call(
        "POST",
        "/api/flows/mailbox/eng.incidents/actions/fileTask",
        {"userId": "u_42", "input": {"board": "followups", "goal": "Write the postmortem", "title": "Postmortem"}},
    )
    assert filed.status == 202, filed.body
    task = filed.body["output"]["taskId"]
    done = page.wait_for_selector(f".column[data-status=completed] #task-{task}", timeout=30_000)
    assert "Postmortem" in done.inner_text()
    assert page.evaluate("window.notReloaded") is True
    assert page.locator(f"#task-{task}").count() == 1
    page.screenshot(path=str(tmp_path / "board.png"), full_page=True)


def test_the_conversation_page_shows_each_answer_under_its_delegates_name(start_server, tmp_path, page):
    delegates = ("support.devices", "support.accounts")
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/support/workers/help/WORKER.md": "---\ndescription: Ask support anything.\nflow: coordinator\n"
            f"model: embedded/echo\ndelegates: [{', '.join(delegates)}]\nrouting: everyone\nrounds: 0\n---\n\nThe desk.\n",
            "teams/support/workers/devices/WORKER.md": "---\ndescription: Phones.\nmodel: embedded/echo\n---\n\nAnswer.\n",
            "teams/support/workers/accounts/WORKER.md": "---\ndescription: Billing.\nmodel: embedded/echo\n---\n\nAnswer.\n",
        },
    )
    server = start_server(tree)
    opened = server.call("POST", "/api/workers/support.help/sessions", {"userId": "u_42"})
    assert opened.status in (200, 201), opened.body
    act_as(page, server.base)
    page.click("#conversations a")
    page.wait_for_url(server.base + "/sessions/support.help:u_42/")
    page.evaluate("window.notReloaded = true")
    page.fill("#post-form textarea", "my laptop will not charge")
    page.click("#post-form button")
    for delegate in delegates:
        answer = page.wait_for_selector(f"#messages li[data-agent='{delegate}']", timeout=30_000)
        assert "my laptop will not charge" in answer.inner_text() and delegate in answer.inner_text()
    assert page.locator("#messages li[data-role=user]").count() == 1
    page.wait_for_selector("#notes li[data-component=coordinator-route]")
    assert page.evaluate("window.notReloaded") is True
    page.screenshot(path=str(tmp_path / "conversation.png"), full_page=True)


def test_the_room_page_shows_the_seats_answers_to_a_form_post_without_reload(start_server, tmp_path, page):
    seats = ("eng.alpha", "eng.beta")
    worker = "---\ndescription: {d}\nmodel: embedded/echo\n---\n\nAnswer in the room.\n"
    tree = write_tree(
        tmp_path / "tree",
        {
            "org/resources/projects.yaml": f"talk:\n  seats: [{', '.join(seats)}]\n  charter: Plan the work.\n",
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=seats),
            "teams/eng/workers/alpha/WORKER.md": worker.format(d="Alpha."),
            "teams/eng/workers/beta/WORKER.md": worker.format(d="Beta."),
        },
    )
    server = start_server(tree)
    created = server.call("POST", "/api/projects", {"userId": "u_ana", "title": "Launch", "id": "launch", "members": ["u_42"]})
    assert created.status == 201, created.body
    act_as(page, server.base)  # u_42: a member with no talk session yet
    page.click("#rooms a[href='/projects/launch/']")
    page.wait_for_url(server.base + "/projects/launch/")
    assert page.inner_text("#charter") == "Plan the work." and page.locator("#seats li").count() == 2
    page.evaluate("window.notReloaded = true")
    page.fill("#post-form textarea", "what is blocked?")
    page.click("#post-form button")
    page.wait_for_selector("#post-status .ok")
    for seat in seats:
        answer = page.wait_for_selector(f"#lines li.seat:has(.from:text-is('{seat}'))", timeout=30_000)
        assert "what is blocked?" in answer.inner_text()
    assert page.locator("#lines li:not(.seat)").count() == 1
    assert page.evaluate("window.notReloaded") is True
    page.screenshot(path=str(tmp_path / "room.png"), full_page=True)


def test_the_mail_page_a_thread_and_a_desk(start_server, tmp_path, page):
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/workers/alpha/WORKER.md": "---\ndescription: Replies.\nmodel: embedded/echo\n"
            'capabilities:\n  mail.send: ["*"]\nrun:\n  triggers: [mail]\n---\n\nAnswer every mail.\n'
            '/tool mail_reply {"thread": "{mailbox}", "body": "{heard}"}\n',
        },
    )
    server = start_server(tree)
    sent = server.call(
        "POST", "/api/mail", {"userId": "ann@example.org", "to": "eng.alpha", "subject": "Build", "body": "Green?"}
    )
    assert sent.status == 201, sent.body
    act_as(page, server.base)
    page.click("header nav a[href='/mail/']")
    page.wait_for_url(server.base + "/mail/")
    page.click("#threads a[href='/mail/eng.alpha:1/']")
    page.wait_for_url(server.base + "/mail/eng.alpha:1/")
    assert "Green?" in page.inner_text("#messages")
    assert "mail.sent" in page.inner_text("#ledger")
    page.screenshot(path=str(tmp_path / "mail-thread.png"), full_page=True)
    page.goto(server.base + "/mail/desk/eng.alpha/")
    assert page.locator("#desk .thread").count() == 1
    page.screenshot(path=str(tmp_path / "mail-desk.png"), full_page=True)
