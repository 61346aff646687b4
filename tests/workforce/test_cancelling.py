"""``POST /api/requests/{id}/cancel`` (docs/api.md "Cancelling"): a running request ends
``aborted`` at once, its owner only (anyone else who may read it: 403 ``not-request-owner``
saying who may; one who may not: 404, word for word as an id that does not exist), a
finished one is refused with 409 ``request-finished``, a second cancel changes nothing;
the endpoint is in the OpenAPI schema."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from tests.conftest import MEMBER, OUTSIDER, OWNER
from workforce.cancelling import do_cancel_request, is_cancelled, register_cancel_listener
from workforce.models import Membership, Request, Session
from workforce.refusals import Refusal
from workforce.sessions import do_record_request


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def running(org):
    """``running(user_id=MEMBER, session_id="eng.standup") -> Request``: a running request
    of ``user_id``'s (a turn that has not finished) on a session."""

    def _running(user_id: str = MEMBER, session_id: str = "eng.standup") -> Request:
        session, _ = Session.objects.get_or_create(
            organization=org, session_id=session_id, defaults={"flow_kind": "agent", "user_id": OWNER}
        )
        return do_record_request(session, action="onMailboxPost", input={}, user_id=user_id, running=True)

    return _running


def cancel(client, request_id: str, user_id: str | None = MEMBER):
    body = {"userId": user_id} if user_id is not None else {}
    return client.post(f"/api/requests/{request_id}/cancel", body, format="json")


def test_cancelling_a_running_request_ends_it_aborted_at_once(client, running):
    row = running()
    response = cancel(client, row.request_id)
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["requestId"], data["status"]) == (row.request_id, "aborted")
    assert data["error"] == {"reason": "cancelled", "message": "cancelled: its run was cancelled"}
    assert data["finishedAt"] is not None
    row.refresh_from_db()
    assert row.status == "aborted" and is_cancelled(row.pk)
    assert client.get(f"/api/requests/{row.request_id}").json()["status"] == "aborted"


def test_cancelling_twice_is_idempotent(client, running):
    row = running()
    first = cancel(client, row.request_id).json()
    second = cancel(client, row.request_id)
    assert second.status_code == 200
    assert second.json() == first


@pytest.mark.parametrize("status", ["completed", "failed"])
def test_cancelling_a_finished_request_is_refused_with_409(client, running, status):
    row = running()
    Request.objects.filter(pk=row.pk).update(status=status)
    response = cancel(client, row.request_id)
    assert response.status_code == 409
    data = response.json()
    assert (data["requestId"], data["status"]) == (row.request_id, "failed")
    assert data["error"]["reason"] == "request-finished"
    assert data["error"]["message"] == (
        f'request-finished: Request "{row.request_id}" already {status}; only a running request can be cancelled.'
    )
    row.refresh_from_db()
    assert row.status == status  # untouched


NOT_THE_OWNER = (
    "not-request-owner: Only the user request \"{}\" runs as may cancel it: a post's fan-out is the poster's, "
    "a seat's turn in a mailbox and a board row's run the mailbox principal's, a delegate's run the "
    "conversation owner's."
)


def test_a_reader_who_is_not_the_requests_owner_gets_403_saying_who_may_cancel_it(client, running):
    row = running(user_id=MEMBER)  # a seat's turn in a mailbox: the whole organization reads it
    assert client.get(f"/api/requests/{row.request_id}", {"userId": OUTSIDER}).status_code == 200
    refused = cancel(client, row.request_id, user_id=OUTSIDER)
    assert refused.status_code == 403
    data = refused.json()
    assert (data["requestId"], data["status"]) == (row.request_id, "failed")  # it reads it anyway
    assert data["error"] == {"reason": "not-request-owner", "message": NOT_THE_OWNER.format(row.request_id)}
    row.refresh_from_db()
    assert row.status == "running"
    assert cancel(client, row.request_id, user_id=MEMBER).json()["status"] == "aborted"


def test_one_who_may_not_read_the_request_gets_404_as_for_no_such_id(client, running, org):
    conversation = Session.objects.create(
        organization=org, session_id=f"chat:eng.lead:{MEMBER}", flow_kind="chat", user_id=MEMBER
    )
    row = do_record_request(conversation, action="onChat", input={}, user_id=MEMBER, running=True)
    assert client.get(f"/api/requests/{row.request_id}", {"userId": OUTSIDER}).status_code == 404  # private
    refused = cancel(client, row.request_id, user_id=OUTSIDER)
    missing = cancel(client, "req_doesnotexist", user_id=OUTSIDER)
    assert refused.status_code == missing.status_code == 404
    assert refused.json()["error"]["reason"] == "request-not-found"
    assert refused.json()["error"]["message"] == f'request-not-found: No request "{row.request_id}" exists.'
    assert refused.json()["requestId"] is None  # ids don't leak
    row.refresh_from_db()
    assert row.status == "running"
    assert cancel(client, row.request_id, user_id=MEMBER).json()["status"] == "aborted"


def test_without_authentication_a_cancel_must_name_its_caller(client, running):
    row = running()
    response = cancel(client, row.request_id, user_id=None)
    assert response.status_code == 400 and response.json()["error"]["reason"] == "invalid-input"
    bad = client.post(f"/api/requests/{row.request_id}/cancel", {"userId": MEMBER, "why": "x"}, format="json")
    assert bad.status_code == 400 and "Unknown body keys: why" in bad.json()["error"]["message"]
    row.refresh_from_db()
    assert row.status == "running"


@override_settings(WORKFORCE_AUTH="token")
def test_with_authentication_another_organizations_user_gets_404(client, running, other_org):
    owner = User.objects.create_user(MEMBER)
    Membership.objects.create(user=owner, organization_id="default")
    stranger = User.objects.create_user("alice")
    Membership.objects.create(user=stranger, organization=other_org)
    row = running(user_id=MEMBER)
    client.force_authenticate(stranger)
    assert cancel(client, row.request_id, user_id=None).status_code == 404
    client.force_authenticate(owner)
    assert cancel(client, row.request_id, user_id=None).json()["status"] == "aborted"


def test_the_service_refuses_with_the_reasons_the_endpoint_answers(org, running):
    row = running()
    with pytest.raises(Refusal) as caught:
        do_cancel_request(org, row.request_id, user_id=OUTSIDER)
    assert (caught.value.reason, caught.value.http_status) == ("not-request-owner", 403)
    with pytest.raises(Refusal) as caught:
        do_cancel_request(org, "req_doesnotexist", user_id=MEMBER)
    assert (caught.value.reason, caught.value.http_status) == ("request-not-found", 404)
    assert do_cancel_request(org, row.request_id, user_id=MEMBER).status == "aborted"
    Request.objects.filter(pk=row.pk).update(status="completed")
    with pytest.raises(Refusal) as caught:
        do_cancel_request(org, row.request_id, user_id=MEMBER)
    assert (caught.value.reason, caught.value.http_status) == ("request-finished", 409)


def test_listeners_hear_each_cancel_once_in_its_transaction(org, running):
    heard = []
    register_cancel_listener("tests.heard", lambda request: heard.append((request.request_id, request.status)))
    try:
        row = running()
        do_cancel_request(org, row.request_id, user_id=MEMBER)
        do_cancel_request(org, row.request_id, user_id=MEMBER)
        assert heard == [(row.request_id, "aborted")]
    finally:
        from workforce import cancelling

        cancelling._listeners.pop("tests.heard", None)


def test_the_endpoint_is_in_the_openapi_schema(client, db):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    operation = schema["paths"]["/api/requests/{request_id}/cancel"]["post"]
    assert set(operation["responses"]) >= {"200", "403", "404", "409"}
    assert operation["summary"] == "Cancel a running request"
