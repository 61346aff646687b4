"""Every page passes axe-core (``tests/e2e/vendor/axe-4.14.1.min.js``) with no serious or
critical violation, in Debian's ``chromium`` against a real ``serve``: the pages as a
person first sees them, with a refusal shown beside a field, and the 404 and 403 pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.test_web_browser import act_as, browser, page  # noqa: F401
from tests.e2e.test_web_page_actions import REPLIER

pytestmark = pytest.mark.e2e

AXE = Path(__file__).parent / "vendor" / "axe-4.14.1.min.js"
SERIOUS = ("serious", "critical")


def violations(page) -> list[str]:
    """axe-core's serious and critical violations on the page, one line each."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("async () => (await axe.run(document, {resultTypes: ['violations']})).violations")
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v["impact"] in SERIOUS
    ]


def test_every_page_has_no_serious_accessibility_violation(start_server, tmp_path, page):
    tree = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/triage/MAILBOX.md": mailbox_md(
                "Triage.", members=("eng.alpha",), boards="[queue]", boardActions="true"
            ),
            "teams/eng/workers/alpha/WORKER.md": REPLIER.replace("triggers: [mail]", "triggers: [mail, chat]"),
            "teams/support/workers/help/WORKER.md": "---\ndescription: Ask support.\nflow: coordinator\n"
            "model: embedded/echo\ndelegates: [eng.alpha]\nrouting: everyone\nrounds: 0\n---\n\nThe desk.\n",
        },
    )
    server = start_server(tree)
    assert server.call("POST", "/api/mail", {"userId": "u_42", "to": "eng.alpha", "body": "Green?"}).status == 201
    filed = server.call(
        "POST", "/api/flows/mailbox/eng.triage/actions/fileTask", {"userId": "u_42", "input": {"board": "queue", "goal": "Sort"}}
    )
    assert filed.status == 202, filed.body
    assert server.call("POST", "/api/projects", {"userId": "u_42", "title": "Launch", "id": "launch"}).status == 201
    assert server.call("POST", "/api/workers/support.help/sessions", {"userId": "u_42"}).status in (200, 201)
    found: dict[str, list[str]] = {}
    page.goto(server.base + "/who")
    found["/who"] = violations(page)
    page.goto(server.base + "/accounts/login/")
    found["/accounts/login/"] = violations(page)
    act_as(page, server.base)
    for path in (
        "/",
        "/mailboxes/eng.triage/",
        "/boards/eng.triage.queue/",
        "/sessions/support.help:u_42/",
        "/projects/launch/",
        "/mail/",
        "/mail/eng.alpha:1/",
        "/mail/desk/eng.alpha/",
        "/roster/",
    ):
        page.goto(server.base + path)
        page.wait_for_load_state("networkidle") if path != "/roster/" else None
        found[path] = violations(page)
    page.goto(server.base + "/roster/")
    page.fill("#hire-id", "helper")
    page.fill("#hire-workerMd", "---\nmodel: [x]\n---\n")
    page.click("#hire button")
    page.wait_for_selector("#hire-workerMd-error")
    found["/roster/ (a refused hire)"] = violations(page)
    page.goto(server.base + "/boards/eng.triage.queue/")
    page.click(".task summary")
    found["/boards/… (a card's actions open)"] = violations(page)
    # The styled error pages: a path nothing answers (404) and a form sent without its
    # CSRF token (403), each with the site's navigation.
    answer = page.goto(server.base + "/no/such/page/")
    assert answer is not None and answer.status == 404
    page.wait_for_selector("#not-found")
    found["/no/such/page/ (404)"] = violations(page)
    page.goto(server.base + "/")
    page.evaluate(
        "() => { const f = document.createElement('form'); f.method = 'post'; f.action = '/mailboxes/eng.triage/post';"
        " document.body.appendChild(f); f.submit(); }"
    )
    page.wait_for_selector("#forbidden")
    found["/mailboxes/eng.triage/post without its CSRF token (403)"] = violations(page)
    # The browser logs each error page's own status once (the point of these two); any
    # other failed load (a stylesheet of the error page, say) stays and fails the test.
    for status in ("404 (Not Found)", "403 (Forbidden)"):
        page.errors.remove(f"Failed to load resource: the server responded with a status of {status}")
    assert {path: v for path, v in found.items() if v} == {}
    page.evaluate("document.querySelector('main').insertAdjacentHTML('beforeend', '<input name=unlabelled>')")
    assert any(v.startswith("label (critical)") for v in violations(page))  # the check does find one
