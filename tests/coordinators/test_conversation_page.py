"""A coordinator conversation on the pages (docs/pages.md "The pages"): its owner reads it, with
each answer under its delegate's name and the route notes apart; another user's
conversation is 404, as it is over the API. The live page in a browser is in
``tests/e2e/test_web_browser.py``."""

from __future__ import annotations

from tests.conftest import MEMBER, OUTSIDER
from tests.coordinators.conftest import ACCOUNTS, CONVERSATION, DEVICES
from web.views import SESSION_USER


def act_as(client, user_id: str) -> None:
    session = client.session
    session[SESSION_USER] = user_id
    session.save()


def test_the_owner_reads_the_conversation_page_and_nobody_else(desk, client):
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    d.run("my laptop will not charge")
    act_as(client, MEMBER)
    page = client.get(f"/sessions/{CONVERSATION}/").content.decode()
    for delegate in (DEVICES, ACCOUNTS):
        assert f'data-agent="{delegate}"' in page
    assert 'data-role="user"' in page and "my laptop will not charge" in page
    assert 'data-component="coordinator-route"' in page
    assert 'name="message"' in page  # it takes posts: the kind's run
    assert f'href="/sessions/{CONVERSATION}/"' in client.get("/").content.decode()

    act_as(client, OUTSIDER)
    assert client.get(f"/sessions/{CONVERSATION}/").status_code == 404
    assert client.get(f"/sessions/{CONVERSATION}/events").status_code == 404
    assert client.post(f"/sessions/{CONVERSATION}/post", {"message": "hi"}).status_code == 404
    assert CONVERSATION not in client.get("/").content.decode()
