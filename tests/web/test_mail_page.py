"""The Mail page in process (docs/pages.md "The pages", "Agent mail"): the organization's
threads, each thread with its messages and ledger, each agent's desk by state; another
organization's thread is 404; bodies escaped. The web app reads mail through the agent
kind's ``MAIL_READER`` facet, never by importing the mail app."""

from __future__ import annotations

from mail.models import Thread
from tests.conftest import MEMBER
from tests.mail.conftest import agent_runtime, agents, committed, send, vaults  # noqa: F401
from web.views import SESSION_USER
from workforce.facets import MAIL_READER


def as_member(client):
    session = client.session
    session[SESSION_USER] = MEMBER
    session.save()
    return client


def test_the_mail_page_lists_the_threads_and_links_each_agents_desk(client, agents, send):
    agents()
    first = send("eng.alpha", "Is the build green?", subject="Build")
    second = send("eng.reader", "Read me", subject="For reading")
    html = as_member(client).get("/mail/").content.decode()
    for thread in (first, second):
        assert f'href="/mail/{thread.thread_id}/"' in html
    assert html.index(second.thread_id) < html.index(first.thread_id)  # newest first
    assert 'href="/mail/desk/eng.alpha/"' in html and 'href="/mail/desk/eng.reader/"' in html
    assert 'href="/mail/"' in client.get("/").content.decode()


def test_a_thread_page_shows_its_messages_and_ledger(client, agents, send):
    agents()
    thread = send("eng.alpha", "Is the build green?", subject="Build")
    thread.refresh_from_db()
    html = as_member(client).get(f"/mail/{thread.thread_id}/").content.decode()
    assert "<h1>Build</h1>" in html
    assert "Is the build green?" in html
    assert "eng.alpha heard" in html  # the echo seat's reply, a message of the thread
    assert f'<span id="state">{thread.state}</span>' in html
    assert "<strong>mail.sent</strong>" in html and "<strong>mail.replied</strong>" in html


def test_an_agents_desk_shows_its_threads_by_state(client, agents, send):
    agents()
    replied = send("eng.alpha", "Answer me", subject="Q1")
    delivered = send("eng.reader", "Only read", subject="Q2")
    replied.refresh_from_db()
    html = as_member(client).get("/mail/desk/eng.alpha/").content.decode()
    assert [f'data-state="{s}"' in html for s in Thread.State.values] == [True] * len(Thread.State.values)
    column = html.split(f'data-state="{replied.state}"', 1)[1].split("</section>", 1)[0]
    assert replied.thread_id in column
    assert delivered.thread_id not in html
    assert client.get("/mail/desk/eng.nobody/").status_code == 404


def test_another_organizations_mail_is_404_and_bodies_are_escaped(client, agents, send, other_org):
    agents()
    elsewhere = send("eng.alpha", "secret", subject="Theirs", in_org=other_org)
    ours = send("eng.reader", "<script>alert(1)</script>", subject="<b>bold</b>")
    as_member(client)
    assert client.get(f"/mail/{elsewhere.thread_id}/").status_code == 404  # eng.alpha has no mail here
    listing = client.get("/mail/").content.decode()
    assert "Theirs" not in listing and "secret" not in listing
    assert client.get("/mail/nowhere:1/").status_code == 404
    assert client.get("/mail/not-a-thread/").status_code == 404
    page = client.get(f"/mail/{ours.thread_id}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>bold</b>" not in page and "&lt;b&gt;bold&lt;/b&gt;" in page


def test_the_mail_app_sets_the_agent_kinds_mail_reader():
    reader = MAIL_READER.of("agent")
    assert reader is not None and tuple(reader.states) == tuple(Thread.State.values)
