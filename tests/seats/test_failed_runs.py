"""Every failed run is listed for operators (issue 24, "Models" item 1):
``GET /api/sessions/{id}/runs?status=failed`` lists the runs that failed on the session
and its child sessions, newest first, each with its error (the model's), and the admin's
request list shows the error and filters by status."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.test import APIClient

from workforce.llm import ModelError, use_model_resolver
from workforce.models import Request
from workforce.notify import ON_MAILBOX_POST
from workforce.testing import create_mock_model_resolver


def test_a_seats_failed_turn_is_a_failed_run_with_the_models_error(wired, post, org):
    wired()
    scripts = {"eng.lead": [ModelError("429 Too Many Requests: slow down")], "*": lambda call: "on it"}
    with use_model_resolver(create_mock_model_resolver(scripts)):
        answer = post("eng.standup", "the build is red", author="eng.analyst")
    client = APIClient()
    page = client.get("/api/sessions/eng.standup/runs?status=failed").json()
    turn = Request.objects.get(session__session_id="eng.standup:eng.lead", action=ON_MAILBOX_POST)
    record = Request.objects.get(session__session_id="eng.standup", action="deliverPost")
    assert page["sessionId"] == "eng.standup"
    by_id = {run["requestId"]: run for run in page["runs"]}
    assert set(by_id) == {turn.request_id, record.request_id}
    run = by_id[turn.request_id]
    assert run == {
        "sessionId": "eng.standup:eng.lead",
        "flowId": "eng.lead",
        "flowKind": "agent",
        "status": "failed",
        "requestId": turn.request_id,
        "action": ON_MAILBOX_POST,
        "startedAt": run["startedAt"],
        "startedBy": answer.request_id,
        "finishedAt": run["finishedAt"],
        "workingOn": {"postId": answer.output["id"], "body": "the build is red", "author": "eng.analyst"},
        "error": {"reason": "model-error", "message": "model-error: 429 Too Many Requests: slow down"},
    }
    assert run["finishedAt"]
    # The mailbox's own record of the failed delivery is listed too, with the same reason.
    assert by_id[record.request_id]["error"]["reason"] == "model-error"
    assert by_id[record.request_id]["flowId"] == "eng.standup"
    # Newest first; startedBy keeps the post's own.
    assert [r["requestId"] for r in page["runs"]] == sorted(by_id, key=lambda rid: -Request.objects.get(request_id=rid).pk)
    started = client.get(f"/api/sessions/eng.standup/runs?status=failed&startedBy={answer.request_id}").json()
    assert [r["requestId"] for r in started["runs"]] == [turn.request_id]
    # Nothing is active.
    assert client.get("/api/sessions/eng.standup/runs?status=active").json()["runs"] == []


def test_another_status_is_refused(wired):
    wired()
    response = APIClient().get("/api/sessions/eng.standup/runs?status=done")
    assert response.status_code == 400 and response.json()["error"]["reason"] == "invalid-input"


def test_the_admin_lists_failed_requests_with_their_error(wired, post, org):
    wired()
    with use_model_resolver(create_mock_model_resolver({"eng.lead": [ModelError("503 queue full")], "*": lambda c: "ok"})):
        post("eng.standup", "the build is red", author="eng.analyst")
    admin = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/workforce/request/?status__exact=failed")
    assert page.status_code == 200
    text = page.content.decode()
    assert "model-error: 503 queue full" in text
    assert text.count("503 queue full") >= 2  # the turn and the mailbox's record of it
