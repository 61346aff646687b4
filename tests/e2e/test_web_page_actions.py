"""The pages' actions in a real browser (docs/pages.md "The pages", "Acting from the pages"):
Debian's ``chromium`` driven by Playwright against a real ``serve`` and cluster. Each
form's success and a refusal shown beside its field with what was typed kept, through
htmx (the page is never reloaded). The plain (no-script) path, CSRF and other
organizations are in ``tests/web/test_page_actions.py``."""

from __future__ import annotations

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import session_requests, wait_for
from tests.e2e.test_cancel_cluster import HeldModel
from tests.e2e.test_web_browser import act_as, browser, page  # noqa: F401

pytestmark = pytest.mark.e2e

REPLIER = (
    "---\ndescription: Replies.\nmodel: embedded/echo\n"
    'capabilities:\n  mail.send: ["*"]\nrun:\n  triggers: [mail]\n---\n\nAnswer every mail.\n'
    '/tool mail_reply {"thread": "{mailbox}", "body": "{heard}"}\n'
)


def stay(page) -> None:
    page.evaluate("window.notReloaded = true")


def stayed(page) -> bool:
    return page.evaluate("window.notReloaded") is True


def refusal_beside(page, form: str, field: str, reason: str) -> str:
    shown = page.wait_for_selector(f"#{form}-{field}-error[data-reason='{reason}']", timeout=15_000)
    return shown.inner_text()


def test_mail_is_sent_from_the_mail_page_and_a_desk(start_server, tmp_path, page):
    server = start_server(write_tree(tmp_path / "tree", {"teams/eng/workers/alpha/WORKER.md": REPLIER}))
    act_as(page, server.base)
    page.goto(server.base + "/mail/")
    stay(page)
    page.fill("#mail-send-to", "eng.nobody")
    page.fill("#mail-send-subject", "Build")
    page.fill("#mail-send-body", "Is the build green?")
    page.click("#mail-send button")
    assert "recipient-not-found" in refusal_beside(page, "mail-send", "to", "recipient-not-found")
    assert page.input_value("#mail-send-body") == "Is the build green?" and page.input_value("#mail-send-subject") == "Build"
    assert stayed(page)
    page.fill("#mail-send-to", "eng.alpha")
    page.click("#mail-send button")
    page.wait_for_url(server.base + "/mail/eng.alpha:1/")
    assert page.inner_text("h1") == "Build"
    page.wait_for_selector("#messages li:nth-child(2)", timeout=30_000)  # the reply, followed without a reload
    assert "eng.alpha heard" in page.inner_text("#messages") and page.inner_text("#state") == "replied"
    page.screenshot(path=str(tmp_path / "thread.png"), full_page=True)

    page.goto(server.base + "/mail/desk/eng.alpha/")
    assert page.input_value("#mail-send-to") == "eng.alpha"
    page.fill("#mail-send-body", "From the desk")
    page.click("#mail-send button")
    page.wait_for_url(server.base + "/mail/eng.alpha:2/")


def test_the_board_page_files_settles_reassigns_and_cancels(start_server, tmp_path, page):
    board = "eng.incidents.followups"
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", members=("eng.lead",), boards="[followups]"),
            "teams/eng/mailboxes/triage/MAILBOX.md": mailbox_md(
                "Triage.", members=("eng.lead",), boards="[queue]", boardActions="true"
            ),
            "teams/eng/workers/lead/WORKER.md": "---\ndescription: Works the followups.\nmodel: embedded/echo\n"
            f"drains: [{board}]\n---\n\nWork the row; your reply is its output.\n",
        },
    )
    server = start_server(tree)
    act_as(page, server.base)
    page.goto(f"{server.base}/boards/{board}/")
    assert page.inner_text(".column[data-status=in_progress] h2").startswith("In progress")
    stay(page)
    page.fill("#file-task-title", "Postmortem")
    page.fill("#file-task-goal", "Write the postmortem")
    page.fill("#file-task-assignee", "eng.nobody")
    page.click("#file-task button")
    refused = refusal_beside(page, "file-task", "assignee", "unknown-assignee")
    assert '"eng.nobody" is not a worker of board' in refused
    assert page.input_value("#file-task-goal") == "Write the postmortem"
    page.fill("#file-task-assignee", "lead")
    page.click("#file-task button")
    page.wait_for_selector("#file-task .ok")
    done = page.wait_for_selector(".column[data-status=completed] .task", timeout=30_000)
    text = done.inner_text()
    assert "Write the postmortem" in text and "lead" in text and "1 of" in text and "Output" in text
    run = done.query_selector(".run a").get_attribute("href")
    assert stayed(page)
    page.screenshot(path=str(tmp_path / "board.png"), full_page=True)
    opened = page.goto(server.base + run)  # the run that worked the row: its messages
    assert opened.status == 200 and "Write the postmortem" in page.inner_text("#messages")

    page.goto(f"{server.base}/boards/eng.triage.queue/")
    stay(page)
    page.fill("#file-task-goal", "Sort the queue")
    page.click("#file-task button")
    page.wait_for_selector("#file-task .ok")
    card = page.wait_for_selector(".column[data-status=pending] .task")
    task = card.get_attribute("id").removeprefix("task-")
    page.click(f"#task-{task} summary")
    # A pending row offers only what the transition table allows from pending.
    offered = [b.get_attribute("value") for b in page.query_selector_all(f"#task-{task}-form button[name=op]")]
    assert offered == ["block", "cancel", "assign"]
    page.fill(f"#task-{task}-assignee", "x" * 201)
    page.click(f"#task-{task}-form button[value=assign]")
    assert "assignee" in refusal_beside(page, f"task-{task}", "assignee", "invalid-input")
    page.fill(f"#task-{task}-note", "waiting on legal")
    page.click(f"#task-{task}-form button[value=block]")
    page.wait_for_selector(f".column[data-status=blocked] #task-{task}")
    assert page.inner_text("#row-done") == f"Blocked {task}; it is now blocked."
    page.click(f"#task-{task} summary")
    page.click(f"#task-{task}-form button[value=unblock]")
    page.wait_for_selector(f".column[data-status=pending] #task-{task}")
    page.click(f"#task-{task} summary")
    page.fill(f"#task-{task}-assignee", "eng.other")
    page.click(f"#task-{task}-form button[value=assign]")
    page.wait_for_selector(f"#task-{task} .assignee:text-is('eng.other')")
    assert page.inner_text("#row-done") == f"Reassigned {task} to eng.other."  # kept over the board's re-render
    page.click(f"#task-{task} summary")
    page.fill(f"#task-{task}-note", "not needed")
    page.click(f"#task-{task}-form button[value=cancel]")
    page.wait_for_selector(f".column[data-status=cancelled] #task-{task}")
    assert stayed(page)


def test_a_refused_post_keeps_what_was_typed_and_a_taken_one_clears_it(start_server, tmp_path, page):
    """The post form clears its text only on a post that was taken (the ``posted``
    event); a refusal (33,000 characters, or only spaces) shows and keeps the text."""
    tree = write_tree(tmp_path / "tree", {"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily.", members=("eng.a",))})
    server = start_server(tree)
    act_as(page, server.base)
    page.goto(server.base + "/mailboxes/eng.standup/")
    stay(page)
    long = "w" * 33_000
    for typed, said in ((long, "no more than 32000 characters"), ("   ", "body:")):
        page.fill("#post-form textarea", typed)
        page.click("#post-form button")
        shown = page.wait_for_selector("#post-status .error")
        assert page.input_value("#post-form textarea") == typed  # kept, not cleared
        assert said in shown.inner_text() and shown.get_attribute("data-reason") == "invalid-input"
        page.evaluate("document.getElementById('post-status').textContent = ''")
    page.fill("#post-form textarea", "shipped")
    page.click("#post-form button")
    page.wait_for_selector("#post-status .ok")
    wait_for(lambda: page.input_value("#post-form textarea") == "", timeout=10, what="the taken post's text cleared")
    page.wait_for_selector("#lines li:has-text('shipped')", timeout=15_000)
    assert stayed(page)


def test_a_project_is_created_from_home_and_its_owner_adds_members(start_server, tmp_path, page):
    tree = write_tree(tmp_path / "tree", {"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily.", members=("eng.a",))})
    server = start_server(tree)
    act_as(page, server.base)
    stay(page)
    page.fill("#project-create-title", "Launch")
    page.fill("#project-create-brief", "Ship the reader")
    page.fill("#project-create-id", "Bad Id!")
    page.click("#project-create button")
    assert "name rule" in refusal_beside(page, "project-create", "id", "invalid-input")
    assert page.input_value("#project-create-title") == "Launch" and stayed(page)
    page.fill("#project-create-id", "launch")
    page.fill("#project-create-members", "u_7")
    page.click("#project-create button")
    page.wait_for_url(server.base + "/projects/launch/")
    assert "u_7" in page.inner_text("#members")
    stay(page)
    page.fill("#project-member-member", "a:b")
    page.click("#project-member button")
    refusal_beside(page, "project-member", "member", "invalid-input")
    page.fill("#project-member-member", "u_9")
    page.click("#project-member button")
    page.wait_for_selector("#project-member .ok:text('Added u_9.')")
    assert "u_9" in page.inner_text("#members")  # the members line follows
    assert stayed(page)
    page.goto(server.base + "/")
    assert page.locator("#rooms a[href='/projects/launch/']").count() == 1


def test_your_roster_hires_forks_and_fires(start_server, tmp_path, page):
    tree = write_tree(tmp_path / "tree", {"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily.", members=("eng.a",))})
    server = start_server(tree)
    act_as(page, server.base)
    page.click("nav a[href='/roster/']")
    page.wait_for_url(server.base + "/roster/")
    stay(page)
    bad = "---\ndescription: 7\nmodel: [x]\nnonsense: 1\n---\n"
    page.fill("#hire-id", "helper")
    page.fill("#hire-workerMd", bad)
    page.click("#hire button")
    refusal_beside(page, "hire", "workerMd", "invalid-worker")
    assert page.locator("[data-field=workerMd] .problems li").count() >= 2
    assert page.input_value("#hire-workerMd") == bad
    page.fill("#hire-workerMd", "---\ndescription: Helps.\nmodel: embedded/echo\n---\n\nHelp.\n")
    page.click("#hire button")
    page.wait_for_selector("#worker-helper[data-scope=own]")
    page.fill("#fork-helper-id", "helper-two")
    page.click("#worker-helper form.fork button")
    page.wait_for_selector("#worker-helper-two[data-scope=own]")
    page.fill("#fork-helper-id", "helper-two")
    page.click("#worker-helper form.fork button")
    refusal_beside(page, "fork-helper", "id", "worker-already-on-roster")
    page.click("#worker-helper-two form.fire button")
    page.wait_for_selector("#worker-helper-two", state="detached")
    assert stayed(page)


def test_a_running_turn_is_cancelled_from_the_mailbox_page(start_server, tmp_path, page):
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.slow",)),
            "teams/eng/workers/slow/WORKER.md": "---\ndescription: Slow.\nmodel: openai/held\n---\n\nAnswer.\n",
        },
    )
    with HeldModel() as held:
        server = start_server(tree, env={"OPENAI_BASE_URL": held.base_url, "OPENAI_API_KEY": "sk-test"})
        act_as(page, server.base, "workforce")  # a seat's turn in a mailbox runs as the mailbox's principal
        page.goto(server.base + "/mailboxes/eng.standup/")
        stay(page)
        page.fill("#post-form textarea", "hi")
        page.click("#post-form button")
        assert wait_for(held.entered.is_set, timeout=60, what="the seat's first model call", log=server.log)
        page.click("#busy form.cancel button", timeout=15_000)
        turn = wait_for(
            lambda: [
                r
                for r in session_requests(server, "eng.standup:eng.slow", "onMailboxPost", "workforce")
                if r["status"] == "aborted"
            ],
            timeout=15,
            what="the aborted turn",
            log=server.log,
        )
        assert turn[0]["error"]["reason"] == "cancelled"
        held.release.set()
        page.wait_for_selector("#busy .idle", timeout=30_000)
        assert stayed(page) and len(held.requests) == 1


def test_a_conversation_is_started_and_its_delegates_changed_from_its_page(start_server, tmp_path, page):
    worker = "---\ndescription: {d}\nmodel: embedded/echo\n---\n\nAnswer.\n"
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/support/workers/help/WORKER.md": "---\ndescription: Ask support anything.\nflow: coordinator\n"
            "model: embedded/echo\ndelegates: [support.devices]\nrouting: everyone\nrounds: 0\n---\n\nThe desk.\n",
            "teams/support/workers/devices/WORKER.md": worker.format(d="Phones."),
            "teams/support/workers/accounts/WORKER.md": worker.format(d="Billing."),
        },
    )
    server = start_server(tree)
    act_as(page, server.base)
    stay(page)
    page.fill("#conversation-start-worker", "support.devices")
    page.click("#conversation-start button")
    refusal_beside(page, "conversation-start", "worker", "worker-not-on-roster")
    assert stayed(page)
    page.fill("#conversation-start-worker", "support.help")
    page.click("#conversation-start button")
    page.wait_for_url(server.base + "/sessions/support.help:u_42/")
    assert page.locator("#delegate-list li[data-worker='support.devices']").count() == 1
    stay(page)
    page.fill("#delegates-worker", "support.nobody")
    page.click("#delegates button[value=add]")
    refusal_beside(page, "delegates", "worker", "worker-not-on-roster")
    assert page.input_value("#delegates-worker") == "support.nobody"
    page.fill("#delegates-worker", "support.accounts")
    page.fill("#delegates-note", "billing")
    page.click("#delegates button[value=add]")
    page.wait_for_selector("#delegate-list li[data-worker='support.accounts']")
    page.fill("#delegates-worker", "support.accounts")
    page.click("#delegates button[value=fallback]")
    page.wait_for_selector("#fallback:text-is('support.accounts')")
    page.fill("#delegates-worker", "support.devices")
    page.click("#delegates button[value=remove]")
    page.wait_for_selector("#delegate-list li[data-worker='support.devices']", state="detached")
    page.fill("#post-form textarea", "my card was charged twice")
    page.click("#post-form button")
    page.wait_for_selector("#messages li[data-agent='support.accounts']", timeout=30_000)
    assert stayed(page)


def test_a_desk_chats_with_its_agent_live(start_server, tmp_path, page):
    chatty = "---\ndescription: Chats.\nmodel: embedded/echo\nrun:\n  triggers: [chat]\n---\n\nAnswer.\n"
    tree = write_tree(
        tmp_path / "tree",
        {"teams/eng/workers/alpha/WORKER.md": REPLIER, "teams/eng/workers/chatty/WORKER.md": chatty},
    )
    server = start_server(tree)
    act_as(page, server.base)
    page.goto(server.base + "/mail/desk/eng.alpha/")  # no chat in its run.triggers: a sentence, no form
    assert "eng.alpha takes no chat" in page.inner_text("#no-chat") and page.query_selector("#chat-form") is None
    page.goto(server.base + "/mail/desk/eng.chatty/")
    stay(page)
    page.fill("#chat-message", "   ")
    page.click("#chat-form button")
    refused = refusal_beside(page, "chat", "message", "invalid-input")
    assert "may not be empty" in refused and page.input_value("#chat-message") == "   "
    page.fill("#chat-message", "hello there")
    page.click("#chat-form button")
    answer = page.wait_for_selector("#messages li[data-role=assistant]", timeout=30_000)
    assert "hello there" in answer.inner_text()
    assert page.locator("#messages li[data-role=user]").count() == 1 and stayed(page)
    page.fill("#chat-message", "and again")
    page.click("#chat-form button")
    page.wait_for_selector("#messages li[data-role=assistant]:nth-of-type(4)", timeout=30_000)
    assert page.locator("#messages li").count() == 4 and stayed(page)
    page.screenshot(path=str(tmp_path / "desk.png"), full_page=True)
