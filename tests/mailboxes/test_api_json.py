"""Every /api/ answer is JSON in the contract's shape, whatever the
method, the path, or the CSRF check says: never Django's HTML pages."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

from workforce.models import Membership

from .test_http import assert_failed


@pytest.fixture
def csrf_client():
    """Django's test client with the CSRF check on, as a browser gets it."""
    return Client(enforce_csrf_checks=True)


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize("path", ["/api/nope", "/api/flows/mailbox/eng.standup/actions/post/", "/api/boards/"])
def test_any_method_on_an_unknown_api_path_is_a_json_404_not_a_csrf_page(csrf_client, opened, method, path):
    response = csrf_client.generic(method, path, b'{"userId":"u_42"}', content_type="application/json")
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    assert_failed(response, 404, "not-found")
    assert response.json()["error"]["message"] == f"not-found: No API endpoint at {path}."


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/api/flows/mailbox/eng.standup/actions/post"),
        ("DELETE", "/api/mailboxes/eng.standup/transcript"),
        ("PUT", "/api/requests/req_x"),
        ("DELETE", "/api/workers/support.help/sessions"),
        ("POST", "/api/"),  # the index answers GET only
    ],
)
def test_a_method_a_known_path_does_not_take_is_a_json_405(csrf_client, opened, method, path):
    response = csrf_client.generic(method, path, b"{}", content_type="application/json")
    assert response["Content-Type"].startswith("application/json")
    assert_failed(response, 405, "method-not-allowed")


@pytest.mark.parametrize("path", ["/api/flows/mailbox/eng.standup/actions/post", "/api/nope"])
@override_settings(WORKFORCE_AUTH="token")
def test_a_csrf_failure_with_session_auth_is_json(opened, csrf_client, path, org, monkeypatch):
    """A browser signed in with a session cookie, posting without the CSRF token.
    Authentication classes are read at import: patch the view as WORKFORCE_AUTH=token does."""
    from rest_framework.authentication import SessionAuthentication

    from workforce.api.views import FlowActionView

    monkeypatch.setattr(FlowActionView, "authentication_classes", [SessionAuthentication])
    user = get_user_model().objects.create_user("u_42", password="pw")
    Membership.objects.create(user=user, organization=org)
    csrf_client.force_login(user)
    response = csrf_client.post(path, {"userId": "u_42", "input": {"body": "hi"}}, content_type="application/json")
    assert response["Content-Type"].startswith("application/json"), response.content[:300]
    if path == "/api/nope":
        assert_failed(response, 404, "not-found")
    else:
        assert_failed(response, 403, "forbidden")
        assert response.json()["error"]["message"] == "forbidden: CSRF Failed: CSRF cookie not set."


def test_a_csrf_failure_outside_a_drf_view_on_an_api_path_is_json(rf):
    from workforce.api.errors import csrf_failure

    response = csrf_failure(rf.post("/api/anything"), reason="CSRF cookie not set.")
    assert response.status_code == 403 and response["Content-Type"].startswith("application/json")
    assert json.loads(response.content) == {
        "requestId": None,
        "status": "failed",
        "error": {
            "reason": "forbidden",
            "message": "forbidden: CSRF Failed: CSRF cookie not set. Send the X-CSRFToken header, or use token auth.",
        },
    }
    assert not csrf_failure(rf.post("/admin/login/"), reason="x")["Content-Type"].startswith("application/json")


def test_an_unhandled_error_on_an_api_path_is_a_json_500_naming_no_exception(opened, monkeypatch):
    from mailboxes.api import TranscriptView

    def boom(self, request, mailbox_id):
        raise RuntimeError("secret detail")

    monkeypatch.setattr(TranscriptView, "get", boom)
    client = Client(raise_request_exception=False)
    response = client.get("/api/mailboxes/eng.standup/transcript")
    assert response["Content-Type"].startswith("application/json")
    assert_failed(response, 500, "internal-error")
    assert "secret" not in response.content.decode() and "RuntimeError" not in response.content.decode()


def test_a_4xx_answer_is_logged_at_info_and_a_5xx_at_error(opened, caplog, monkeypatch):
    import logging

    from mailboxes.api import TranscriptView

    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.DEBUG, logger="django.request"):
        assert (
            client.post(
                "/api/flows/mailbox/nowhere/actions/post",
                {"userId": "u_42", "input": {"body": "x"}},
                content_type="application/json",
            ).status_code
            == 404
        )
        assert (
            client.post(
                "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {}}, content_type="application/json"
            ).status_code
            == 400
        )
        monkeypatch.setattr(TranscriptView, "get", lambda self, request, mailbox_id: 1 / 0)
        assert client.get("/api/mailboxes/eng.standup/transcript").status_code == 500
    records = [(r.levelname, r.status_code) for r in caplog.records if r.name == "django.request"]
    assert records == [("INFO", 404), ("INFO", 400), ("ERROR", 500)]
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]


def test_a_post_author_longer_than_the_line_keeps_is_invalid_input(opened):
    from rest_framework.test import APIClient

    response = APIClient().post(
        "/api/flows/mailbox/eng.standup/actions/post",
        {"userId": "u_42", "input": {"body": "hi", "author": "a" * 201}},
        format="json",
    )
    assert_failed(response, 400, "invalid-input")
    assert response.json()["error"]["message"] == "invalid-input: author: Ensure this field has no more than 200 characters."
