"""The site's 404 and 403 pages (issue 25 item 15): styled, with the site's navigation,
saying what was not found; on ``/api/`` paths the API's JSON errors stay."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client, RequestFactory

from tests.conftest import MEMBER
from web.views import SESSION_USER
from workforce_project.errors import permission_denied

NAV = ('<a href="/mail/">Mail</a>', '<a href="/roster/">Your roster</a>', '<a class="brand" href="/">Workforce</a>')


@pytest.fixture
def acting(client, db):
    session = client.session
    session[SESSION_USER] = MEMBER
    session.save()
    return client


def assert_styled(page: str) -> None:
    assert page.startswith("<!doctype html>")
    assert "/static/web/web.css" in page
    for link in NAV:
        assert link in page


def test_an_unknown_path_is_the_styled_404_page(client, db):
    answer = client.get("/no/such/page/")
    assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")
    page = answer.content.decode()
    assert_styled(page)
    assert "<title>Not found · Workforce</title>" in page and "<h1>Not found</h1>" in page
    assert "<code>/no/such/page/</code>" in page
    assert 'the <a href="/">home page</a>' in page or '<a href="/">the home page</a>' in page


def test_a_page_that_raises_404_shows_its_message(acting, open_tree):
    open_tree()
    answer = acting.get("/mailboxes/eng.nowhere/")
    assert answer.status_code == 404
    page = answer.content.decode()
    assert_styled(page)
    assert '<p class="error" id="not-found">Nothing is here: No mailbox &#x27;eng.nowhere&#x27;.</p>' in page


@pytest.mark.parametrize("method", ["get", "post", "delete"])
def test_api_paths_keep_their_json_404(client, db, method):
    answer = getattr(client, method)("/api/no/such/endpoint")
    assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
    assert answer.json() == {
        "requestId": None,
        "status": "failed",
        "error": {"reason": "not-found", "message": "not-found: No API endpoint at /api/no/such/endpoint."},
    }


def test_a_permission_denied_is_the_styled_403_page_and_json_on_the_api(db):
    request = RequestFactory().get("/mail/")
    answer = permission_denied(request, PermissionDenied("only the sender may follow this thread"))
    assert answer.status_code == 403
    page = answer.content.decode()
    assert_styled(page)
    assert '<p class="error" id="forbidden">You may not do this: only the sender may follow this thread.</p>' in page
    api = permission_denied(RequestFactory().get("/api/mail"), PermissionDenied("only the sender"))
    assert api.status_code == 403 and api["Content-Type"] == "application/json"
    assert json.loads(api.content)["error"] == {"reason": "forbidden", "message": "forbidden: only the sender"}


def test_a_form_without_its_csrf_token_is_the_styled_403_page(acting, open_tree):
    open_tree()
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = acting.cookies
    answer = strict.post("/mailboxes/eng.standup/post", {"body": "hi"})
    assert answer.status_code == 403
    page = answer.content.decode()
    assert_styled(page)
    assert "<h1>Not allowed</h1>" in page and "did not carry this site's CSRF token" in page
