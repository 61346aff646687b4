"""The pages in process (docs/pages.md "The pages"): who is acting, what each page lists and
refuses, and the post form. The same pages in a real browser, live, are in
``tests/e2e/test_web_browser.py``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from boards.models import BoardTask
from mailboxes.models import Line
from tests.conftest import MEMBER
from web.views import SESSION_USER
from workforce.models import Membership, Session
from workforce.sessions import do_record_request, do_run_action, ensure_child_session


@pytest.fixture
def acting(client, db):
    """The browser session acts as MEMBER (development mode's /who)."""
    session = client.session
    session[SESSION_USER] = MEMBER
    session.save()
    return client


def post(org, body, mailbox="eng.standup", **extra):
    return do_run_action(
        org=org, kind="mailbox", session_id=mailbox, action="post", input={"body": body, **extra}, user_id=MEMBER
    )


def test_without_a_user_the_pages_ask_who_you_are(client, open_tree):
    open_tree()
    answer = client.get("/mailboxes/eng.standup/")
    assert answer.status_code == 302 and answer["Location"] == "/who?next=%2Fmailboxes%2Feng.standup%2F"
    page = client.get(answer["Location"])
    assert page.status_code == 200 and b'name="userId"' in page.content
    refused = client.post("/who", {"userId": "a:b", "next": "/"})
    assert refused.status_code == 200 and b"can&#x27;t contain" in refused.content
    bad = client.post("/who", {"userId": "bad user!", "next": "/"}).content.decode()
    assert 'value="bad user!"' in bad and 'id="who-error"' in bad  # what was typed is kept
    chosen = client.post("/who", {"userId": MEMBER, "next": "/mailboxes/eng.standup/"})
    assert chosen.status_code == 302 and chosen["Location"] == "/mailboxes/eng.standup/"
    assert client.get("/mailboxes/eng.standup/").status_code == 200
    offsite = client.post("/who", {"userId": MEMBER, "next": "https://evil.example/"})
    assert offsite["Location"] == "/"


def test_home_lists_the_organizations_mailboxes_workers_and_boards(acting, open_tree):
    open_tree()
    page = acting.get("/").content.decode()
    assert 'href="/mailboxes/eng.standup/"' in page and 'href="/mailboxes/eng.incidents/"' in page
    assert "Where the engineering team posts daily status." in page
    assert 'href="/boards/eng.incidents.followups/"' in page
    assert f'<strong id="acting-as">{MEMBER}</strong>' in page
    assert "/static/web/vendor/htmx-2.0.11.min.js" in page and "/static/web/vendor/htmx-ext-sse-2.2.4.js" in page
    assert "https://" not in page  # nothing from a CDN


def test_the_vendored_scripts_are_served(acting, open_tree):
    for path in ("/static/web/vendor/htmx-2.0.11.min.js", "/static/web/vendor/htmx-ext-sse-2.2.4.js", "/static/web/web.js"):
        answer = acting.get(path)
        assert answer.status_code == 200, path
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        assert len(body) > 100


def test_the_mailbox_page_shows_lines_routes_and_runs_and_streams_after_them(acting, open_tree, org):
    open_tree()
    first = post(org, "shipped the reader", author="eng.lead")
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    child = ensure_child_session(mailbox, "eng.standup:eng.lead", kind="agent", state={})
    do_record_request(
        child, action="onMailboxPost", input={"body": "shipped the reader"}, user_id="u", running=True, parent=first
    )
    mailbox.refresh_from_db()
    page = acting.get("/mailboxes/eng.standup/").content.decode()
    assert 'id="item-1"' in page and "shipped the reader" in page
    assert f'sse-connect="/mailboxes/eng.standup/events?after={mailbox.item_seq}"' in page
    assert 'data-flow="eng.lead"' in page  # who is working now
    busy = acting.get("/mailboxes/eng.standup/busy").content.decode()
    assert 'data-flow="eng.lead"' in busy and "onMailboxPost" in busy


def test_the_post_form_posts_as_the_acting_user(acting, open_tree, org):
    open_tree()
    answer = acting.post("/mailboxes/eng.standup/post", {"body": "from the page", "author": "eng.lead"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 200 and b"posted" in answer.content
    refused = acting.post("/mailboxes/eng.standup/post", {"body": "x", "author": "mallory"}, HTTP_HX_REQUEST="true")
    assert b"author-not-a-member" in refused.content
    plain = acting.post("/mailboxes/eng.standup/post", {"body": "no script"})  # without htmx: back to the page
    assert plain.status_code == 302 and plain["Location"] == "/mailboxes/eng.standup/"
    assert [(line.body, line.author) for line in Line.objects.order_by("seq")] == [
        ("from the page", "eng.lead"),
        ("no script", None),
    ]
    assert {r.user_id for r in Session.objects.get(session_id="eng.standup").requests.filter(action="post")} == {MEMBER}


def test_the_board_page_shows_rows_by_status(acting, open_tree, org):
    open_tree()
    do_run_action(
        org=org,
        kind="mailbox",
        session_id="eng.incidents",
        action="fileTask",
        input={"board": "followups", "goal": "Write it up", "title": "Postmortem"},
        user_id=MEMBER,
    )
    task = BoardTask.objects.get()
    page = acting.get("/boards/eng.incidents.followups/").content.decode()
    assert f'id="task-{task.task_id}" data-status="pending"' in page and "Postmortem" in page
    assert page.index('data-status="pending"') < page.index('data-status="in_progress"') < page.index('data-status="completed"')
    assert acting.get("/boards/eng.incidents.nothing/").status_code == 404


def test_unknown_pages_are_404(acting, open_tree):
    open_tree()
    assert acting.get("/mailboxes/eng.nowhere/").status_code == 404
    assert acting.get("/mailboxes/eng.nowhere/events").status_code == 404


@override_settings(WORKFORCE_AUTH="token")
def test_with_authentication_the_pages_log_in_and_another_organizations_mailbox_is_404(client, open_tree, org, other_org):
    open_tree()
    answer = client.get("/mailboxes/eng.standup/")
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next=")
    assert client.get("/accounts/login/").status_code == 200
    alice = User.objects.create_user("alice", password="pw")
    Membership.objects.create(user=alice, organization=other_org)
    bob = User.objects.create_user("bob", password="pw")
    Membership.objects.create(user=bob, organization=org)
    client.force_login(alice)
    assert client.get("/mailboxes/eng.standup/").status_code == 404
    assert client.get("/mailboxes/eng.standup/events").status_code == 404
    assert client.get("/boards/eng.incidents.followups/").status_code == 404
    assert b"eng.standup" not in client.get("/").content
    client.force_login(bob)
    page = client.get("/mailboxes/eng.standup/")
    assert page.status_code == 200 and b'<strong id="acting-as">bob</strong>' in page.content
    assert b'action="/accounts/logout/"' in page.content
    client.post("/accounts/logout/")
    assert client.get("/mailboxes/eng.standup/").status_code == 302  # logged out: to the login again


def test_a_refused_post_keeps_what_was_typed_and_clears_only_on_success(acting, open_tree, org):
    """The form clears its text on the ``posted`` event (HX-Trigger), sent only with a post
    that was taken; without script the refusal and the text come back on the page."""
    open_tree()
    url = "/mailboxes/eng.standup/post"
    long = "x" * 33_000
    refused = acting.post(url, {"body": long, "author": ""}, HTTP_HX_REQUEST="true")
    text = refused.content.decode()
    assert "HX-Trigger" not in refused and 'data-reason="invalid-input"' in text and "no more than 32000" in text
    taken = acting.post(url, {"body": "fine", "author": ""}, HTTP_HX_REQUEST="true")
    assert taken["HX-Trigger"] == "posted" and b"posted" in taken.content
    page = acting.get("/mailboxes/eng.standup/").content.decode()
    assert "hx-on:posted=" in page and "after-request" not in page
    plain = acting.post(url, {"body": "   ", "author": ""})  # without script: back to the page, the text kept
    assert plain.status_code == 302 and plain["Location"] == "/mailboxes/eng.standup/"
    page = acting.get("/mailboxes/eng.standup/").content.decode()
    form = page.split('id="post-form"', 1)[1].split("</form>", 1)[0]
    assert ">   </textarea>" in form and 'data-reason="invalid-input"' in form and 'aria-invalid="true"' in form
    again = acting.get("/mailboxes/eng.standup/").content.decode()  # flashed for that one load
    assert "></textarea>" in again.split('id="post-form"', 1)[1] and 'data-reason="invalid-input"' not in again
    assert [line.body for line in Line.objects.all()] == ["fine"]
