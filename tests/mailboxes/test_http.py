"""The HTTP contract (docs/api.md "Posting, refusals and who you are") over DRF's APIClient."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIRequestFactory

from mailboxes.models import Line
from tests.conftest import MEMBER, OWNER
from workforce.models import Membership, Request, Session
from workforce.principals import resolve_principal
from workforce.refusals import Refusal


def action_url(session_id="eng.standup", action="post", kind="mailbox") -> str:
    return f"/api/flows/{kind}/{session_id}/actions/{action}"


def post(client, input=None, *, session_id="eng.standup", action="post", kind="mailbox", user_id=MEMBER, **headers):
    body = {"input": input if input is not None else {}}
    if user_id is not None:
        body["userId"] = user_id
    return client.post(action_url(session_id, action, kind), body, format="json", headers=headers or None)


def assert_failed(response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.content
    data = response.json()
    assert data["status"] == "failed"
    assert data["error"]["reason"] == reason
    assert data["error"]["message"].startswith(f"{reason}: ")
    assert "requestId" in data
    return data


# --- the action endpoint ------------------------------------------------------------------------


def test_a_post_answers_202_with_the_request(client, opened):
    response = post(client, {"body": "shipped the reader", "author": "eng.lead"})
    assert response.status_code == 202
    data = response.json()
    assert data["requestId"].startswith("req_")
    assert data["sessionId"] == "eng.standup"
    assert data["flowKind"] == "mailbox"
    assert data["action"] == "post"
    assert data["status"] == "completed"
    line = data["output"]
    assert line["body"] == "shipped the reader"
    assert line["author"] == "eng.lead"
    assert line["authorVerified"] is False
    assert line["principal"] == OWNER
    assert "seatAuthored" not in line
    assert "error" not in data
    assert response["Location"].endswith(f"/api/requests/{data['requestId']}")


def test_location_answers_the_same_request(client, opened):
    response = post(client, {"body": "hi"})
    detail = client.get(response["Location"])
    assert detail.status_code == 200
    assert detail.json() == response.json()


def test_a_read_answers_202_with_the_mailbox(client, opened):
    post(client, {"body": "hi"})
    response = post(client, action="read")
    assert response.status_code == 202
    output = response.json()["output"]
    assert output["id"] == "eng.standup"
    assert [line["body"] for line in output["transcript"]] == ["hi"]


def test_a_refusal_is_recorded_and_answered_with_its_payload(client, opened):
    response = post(client, {"body": "hi", "author": "eng.intruder"})
    data = assert_failed(response, 403, "author-not-a-member")
    assert set(data) >= {"requestId", "status", "error"}
    assert "output" not in data
    stored = Request.objects.get(request_id=data["requestId"])
    assert stored.status == "failed"
    assert stored.error == data["error"]
    assert not Line.objects.exists()
    assert client.get(f"/api/requests/{data['requestId']}").json()["error"] == data["error"]


def test_invalid_input_is_400(client, opened):
    assert_failed(post(client, {"body": ""}), 400, "invalid-input")
    assert_failed(post(client, {"body": "hi", "extra": 1}), 400, "invalid-input")
    assert_failed(post(client, {"body": 42}), 400, "invalid-input")


@pytest.mark.parametrize("input", [["body"], "hi", 42])
def test_input_that_is_not_an_object_is_400(client, opened, input):
    response = client.post(action_url(), {"userId": MEMBER, "input": input}, format="json")
    assert_failed(response, 400, "invalid-input")


def test_bad_json_is_400(client, opened):
    response = client.post(action_url(), data='{"userId": "u_42", "input": {', content_type="application/json")
    data = assert_failed(response, 400, "invalid-input")
    assert data["requestId"] is None


def test_a_body_that_is_not_an_object_is_400(client, opened):
    response = client.post(action_url(), data=json.dumps(["x"]), content_type="application/json")
    assert_failed(response, 400, "invalid-input")


def test_unknown_body_keys_are_400(client, opened):
    response = client.post(action_url(), {"userId": MEMBER, "input": {"body": "x"}, "body": "x"}, format="json")
    assert_failed(response, 400, "invalid-input")
    assert not Line.objects.exists()


def test_a_missing_user_id_is_400_without_authentication(client, opened):
    assert_failed(post(client, {"body": "hi"}, user_id=None), 400, "invalid-input")
    assert not Line.objects.exists()


@pytest.mark.parametrize("user_id", ["", "  ", 42])
def test_an_unusable_user_id_is_400(client, opened, user_id):
    assert_failed(post(client, {"body": "hi"}, user_id=user_id), 400, "invalid-input")


def test_mailbox_not_bound_is_404(client, opened):
    data = assert_failed(post(client, {"body": "hi"}, session_id="eng.lounge"), 404, "mailbox-not-bound")
    assert data["requestId"].startswith("req_")
    assert Session.objects.get(session_id="eng.lounge").state == {}


def test_an_unknown_kind_is_404(client, opened):
    assert_failed(post(client, {"body": "hi"}, kind="channel"), 404, "flow-not-found")
    assert not Session.objects.filter(flow_kind="channel").exists()


def test_an_unknown_action_is_404(client, opened):
    assert_failed(post(client, {"body": "hi"}, action="shout"), 404, "action-not-found")


def test_mailbox_is_a_template_is_409(client, make_tree, org, act):
    from mailboxes.roster import load_roster, set_current_roster
    from tests.conftest import mailbox_md

    Session.objects.create(
        organization=org,
        session_id="eng.room",
        flow_kind="mailbox",
        user_id=OWNER,
        state={"members": ["eng.lead"], "charter": "c", "description": "d"},
    )
    set_current_roster(load_roster(make_tree({"teams/eng/mailboxes/room/MAILBOX.md": mailbox_md("R.", mintFor="projects")})))
    assert_failed(post(client, {"body": "hi"}, session_id="eng.room"), 409, "mailbox-is-a-template")


def test_an_id_held_by_another_kind_is_a_conflict(client, opened, org):
    from workforce.flows import Action, FlowKind, registry

    registry.register(FlowKind("probe", actions={"ping": Action("ping", lambda ctx, data: {"pong": True})}))
    try:
        response = post(client, kind="probe", action="ping")
        assert_failed(response, 409, "session-not-addressable")
    finally:
        registry.unregister("probe")


# --- Idempotency-Key -------------------------------------------------------------------------


def test_a_retry_with_the_same_key_answers_the_first_request(client, opened):
    first = post(client, {"body": "once"}, **{"Idempotency-Key": "k-1"})
    again = post(client, {"body": "once"}, **{"Idempotency-Key": "k-1"})
    assert first.status_code == 202
    assert again.status_code in (200, 202)
    assert again.json()["requestId"] == first.json()["requestId"]
    assert again.json()["output"] == first.json()["output"]
    assert Line.objects.count() == 1
    assert Request.objects.filter(action="post").count() == 1


def test_a_retry_of_a_refused_call_answers_the_same_refusal(client, opened):
    first = post(client, {"body": "x", "author": "eng.intruder"}, **{"Idempotency-Key": "k-2"})
    again = post(client, {"body": "x", "author": "eng.intruder"}, **{"Idempotency-Key": "k-2"})
    assert again.status_code == first.status_code == 403
    assert again.json()["requestId"] == first.json()["requestId"]
    assert Request.objects.count() == 1


def test_the_same_key_with_other_input_is_refused(client, opened):
    post(client, {"body": "once"}, **{"Idempotency-Key": "k-3"})
    response = post(client, {"body": "twice"}, **{"Idempotency-Key": "k-3"})
    assert_failed(response, 409, "idempotency-key-reused")
    assert [line.body for line in Line.objects.all()] == ["once"]


def test_different_keys_act_twice(client, opened):
    post(client, {"body": "same"}, **{"Idempotency-Key": "k-a"})
    post(client, {"body": "same"}, **{"Idempotency-Key": "k-b"})
    assert Line.objects.count() == 2


# --- session items and requests --------------------------------------------------------------


def test_session_items_in_order_after_a_sequence(client, opened):
    posted = [post(client, {"body": f"p{n}"}).json()["output"] for n in range(5)]
    response = client.get("/api/sessions/eng.standup/items", {"itemTypes": "component"})
    assert response.status_code == 200
    data = response.json()
    assert data["sessionId"] == "eng.standup"
    items = data["items"]
    assert [i["seq"] for i in items] == [1, 2, 3, 4, 5]
    assert all(i["type"] == "component" and i["component"] == "mailbox-post" for i in items)
    assert [i["data"] for i in items] == posted
    assert data["next"] == 5

    page = client.get("/api/sessions/eng.standup/items", {"itemTypes": "component", "after": 2, "limit": 2}).json()
    assert [i["seq"] for i in page["items"]] == [3, 4]
    assert page["next"] == 4
    rest = client.get("/api/sessions/eng.standup/items", {"after": page["next"]}).json()
    assert [i["seq"] for i in rest["items"]] == [5]
    empty = client.get("/api/sessions/eng.standup/items", {"after": 5}).json()
    assert empty["items"] == [] and empty["next"] == 5


def test_session_items_filter_by_type(client, opened):
    post(client, {"body": "hi"})
    assert client.get("/api/sessions/eng.standup/items", {"itemTypes": "message"}).json()["items"] == []


@pytest.mark.parametrize("query", [{"after": "x"}, {"after": -1}, {"limit": 0}, {"limit": 5000}])
def test_session_items_refuse_bad_paging(client, opened, query):
    assert_failed(client.get("/api/sessions/eng.standup/items", query), 400, "invalid-input")


def test_session_items_of_an_unknown_session_is_404(client, opened):
    assert_failed(client.get("/api/sessions/eng.nowhere/items"), 404, "session-not-found")


def test_session_requests_newest_last(client, opened):
    a = post(client, {"body": "one"}).json()
    b = post(client, {"body": "x", "author": "eng.intruder"}).json()
    c = post(client, action="read").json()
    response = client.get("/api/sessions/eng.standup/requests", {"includeResultOutput": "true"})
    assert response.status_code == 200
    rows = response.json()["requests"]
    assert [r["requestId"] for r in rows] == [a["requestId"], b["requestId"], c["requestId"]]
    assert [r["status"] for r in rows] == ["completed", "failed", "completed"]
    assert rows[0]["output"] == a["output"]
    assert rows[1]["error"]["reason"] == "author-not-a-member"
    without = client.get("/api/sessions/eng.standup/requests").json()["requests"]
    assert all("output" not in r for r in without)
    assert without[1]["error"]["reason"] == "author-not-a-member"


# --- the durable transcript ------------------------------------------------------------------


def test_the_transcript_pages_beyond_the_history_window(client, opened, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 3
    for n in range(1, 8):
        post(client, {"body": f"p{n}"})
    window = post(client, action="read").json()["output"]["transcript"]
    assert [line["body"] for line in window] == ["p6", "p7"]

    first = client.get("/api/mailboxes/eng.standup/transcript", {"limit": 3})
    assert first.status_code == 200
    data = first.json()
    assert data["mailboxId"] == "eng.standup"
    assert [line["seq"] for line in data["lines"]] == [1, 2, 3]
    assert [line["body"] for line in data["lines"]] == ["p1", "p2", "p3"]
    assert data["lines"][0]["principal"] == OWNER and data["lines"][0]["authorVerified"] is False
    assert data["next"] == 3
    second = client.get("/api/mailboxes/eng.standup/transcript", {"after": data["next"], "limit": 3}).json()
    assert [line["seq"] for line in second["lines"]] == [4, 5, 6]
    last = client.get("/api/mailboxes/eng.standup/transcript", {"after": second["next"], "limit": 3}).json()
    assert [line["seq"] for line in last["lines"]] == [7]
    assert last["next"] is None
    everything = client.get("/api/mailboxes/eng.standup/transcript").json()
    assert len(everything["lines"]) == 7 and everything["next"] is None


def test_the_transcript_of_an_unopened_id_is_404(client, opened):
    post(client, {"body": "hi"}, session_id="eng.lounge")
    assert_failed(client.get("/api/mailboxes/eng.lounge/transcript"), 404, "mailbox-not-bound")
    assert_failed(client.get("/api/mailboxes/eng.nowhere/transcript"), 404, "mailbox-not-bound")


def test_an_unknown_request_is_404(client, opened):
    assert_failed(client.get("/api/requests/req_000000000000000000000000"), 404, "request-not-found")


def test_the_schema_is_served(client, db):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert b"/api/flows/{kind}/{session_id}/actions/{action}" in response.content


# --- authentication ------------------------------------------------------------------------


def test_without_authentication_the_caller_names_itself_in_the_default_org(db):
    request = APIRequestFactory().post("/")
    principal = resolve_principal(request, "u_42")
    assert principal.user_id == "u_42"
    assert principal.org.id == "default"


@pytest.fixture
def acme_user(other_org):
    user = User.objects.create_user("alice")
    Membership.objects.create(user=user, organization=other_org)
    return user


@pytest.fixture
def default_user(org):
    user = User.objects.create_user("bob")
    Membership.objects.create(user=user, organization=org)
    return user


@override_settings(WORKFORCE_AUTH="token")
def test_resolve_principal_with_authentication(acme_user):
    request = APIRequestFactory().post("/")
    request.user = acme_user
    principal = resolve_principal(request, None)
    assert principal.user_id == "alice" and principal.org.id == "acme"
    assert resolve_principal(request, "alice").user_id == "alice"
    with pytest.raises(Refusal) as caught:
        resolve_principal(request, "u_42")
    assert caught.value.reason == "principal-mismatch"
    assert caught.value.http_status == 403


@override_settings(WORKFORCE_AUTH="token")
def test_with_authentication_a_user_id_naming_someone_else_is_403(client, opened, default_user):
    client.force_authenticate(default_user)
    data = assert_failed(post(client, {"body": "hi"}, user_id="u_42"), 403, "principal-mismatch")
    assert data["requestId"] is None
    assert not Line.objects.exists()
    ok = post(client, {"body": "hi"}, user_id=None)
    assert ok.status_code == 202
    assert ok.json()["output"]["principal"] == OWNER


@override_settings(WORKFORCE_AUTH="token")
def test_with_authentication_and_no_credentials_is_401(client, opened):
    assert_failed(post(client, {"body": "hi"}, user_id="u_42"), 401, "not-authenticated")


@override_settings(WORKFORCE_AUTH="token")
def test_another_organizations_session_answers_404_not_403(client, opened, acme_user, default_user):
    client.force_authenticate(default_user)
    own = post(client, {"body": "hi"}, user_id=None).json()["requestId"]

    client.force_authenticate(acme_user)
    assert_failed(client.get("/api/sessions/eng.standup/items"), 404, "session-not-found")
    assert_failed(client.get("/api/sessions/eng.standup/requests"), 404, "session-not-found")
    assert_failed(client.get("/api/mailboxes/eng.standup/transcript"), 404, "mailbox-not-bound")
    assert_failed(client.get(f"/api/requests/{own}"), 404, "request-not-found")
    # a post under the same id lands in acme, where nobody opened it: never in default's
    assert_failed(post(client, {"body": "hi"}, user_id=None), 404, "mailbox-not-bound")
    assert Line.objects.count() == 1
    assert Session.objects.get(organization_id="acme", session_id="eng.standup").state == {}


@override_settings(WORKFORCE_AUTH="token")
def test_a_real_token_names_the_principal(client, opened, default_user, monkeypatch):
    """Authentication classes are read at import; patch the views as WORKFORCE_AUTH=token would set them."""
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.authtoken.models import Token

    from mailboxes.api import TranscriptView
    from workforce.api.views import FlowActionView

    for view in (FlowActionView, TranscriptView):
        monkeypatch.setattr(view, "authentication_classes", [TokenAuthentication])
    token = Token.objects.create(user=default_user)
    assert_failed(post(client, {"body": "hi"}, user_id=None), 401, "not-authenticated")
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    assert_failed(post(client, {"body": "hi"}, user_id="u_42"), 403, "principal-mismatch")
    response = post(client, {"body": "hi"}, user_id="bob")
    assert response.status_code == 202
    assert Request.objects.get(request_id=response.json()["requestId"]).user_id == "bob"
    assert [line["body"] for line in client.get("/api/mailboxes/eng.standup/transcript").json()["lines"]] == ["hi"]
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_failed(post(client, {"body": "hi"}, user_id=None), 401, "not-authenticated")


@override_settings(WORKFORCE_AUTH="token")
def test_a_token_is_taken_as_token_or_bearer(client, opened, default_user, monkeypatch):
    """``Authorization: Bearer <key>`` (what MCP takes) names the token's user as ``Token <key>``
    does. Authentication classes are read at import; patch the views as WORKFORCE_AUTH=token
    sets them (workforce_project.settings REST_FRAMEWORK, checked in tests/workforce/test_settings.py)."""
    from rest_framework.authentication import SessionAuthentication, TokenAuthentication
    from rest_framework.authtoken.models import Token

    from mailboxes.api import TranscriptView
    from workforce.api.authentication import BearerTokenAuthentication
    from workforce.api.views import FlowActionView

    for view in (FlowActionView, TranscriptView):
        monkeypatch.setattr(
            view, "authentication_classes", [TokenAuthentication, BearerTokenAuthentication, SessionAuthentication]
        )
    token = Token.objects.create(user=default_user)
    for keyword in ("Token", "Bearer"):
        client.credentials(HTTP_AUTHORIZATION=f"{keyword} {token.key}")
        response = post(client, {"body": f"by {keyword}"}, user_id=None)
        assert response.status_code == 202, response.json()
        assert Request.objects.get(request_id=response.json()["requestId"]).user_id == "bob"
        client.credentials(HTTP_AUTHORIZATION=f"{keyword} not-a-real-token")
        data = assert_failed(post(client, {"body": "hi"}, user_id=None), 401, "not-authenticated")
        assert data["error"]["message"] == "not-authenticated: Invalid token."
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token.key}")
    lines = client.get("/api/mailboxes/eng.standup/transcript").json()["lines"]
    assert [line["body"] for line in lines] == ["by Token", "by Bearer"]


@override_settings(WORKFORCE_AUTH="token")
def test_an_authenticated_user_with_no_organization_is_refused_not_defaulted(client, opened):
    stranger = User.objects.create_user("stranger")
    client.force_authenticate(stranger)
    data = assert_failed(post(client, {"body": "hi"}, user_id=None), 403, "not-a-member")
    assert "belongs to no organization" in data["error"]["message"]
    assert_failed(client.get("/api/sessions/eng.standup/items"), 403, "not-a-member")
    assert not Line.objects.exists()
