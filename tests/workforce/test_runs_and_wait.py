"""Busy runs and waiting (docs/api.md "Following what a post started"):
``GET /api/sessions/{id}/runs?status=active``, ``GET /api/requests/{id}?wait=S`` and
the links of a 202. The runs of a real seat's turn are in
``tests/seats/test_active_runs.py``; a wait over a real cluster in
``tests/e2e/test_runs_and_wait.py``."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from tests.conftest import MEMBER
from workforce.models import Membership, Request, Session
from workforce.sessions import do_record_request, do_run_action, ensure_child_session


@pytest.fixture
def client():
    return APIClient()


def post(client, body="hi"):
    answer = client.post(
        "/api/flows/mailbox/eng.standup/actions/post", {"userId": MEMBER, "input": {"body": body}}, format="json"
    )
    assert answer.status_code == 202, answer.json()
    return answer.json()


def running_turn(org, parent_request, seat="eng.lead", *, running=True):
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    child = ensure_child_session(mailbox, f"eng.standup:{seat}", kind="agent", state={"seat": seat})
    return do_record_request(
        child,
        action="onMailboxPost",
        input={"mailboxId": "eng.standup", "member": seat, "postId": "p1", "body": "x" * 600, "recent": [1, 2]},
        user_id="u_owner",
        running=running,
        parent=parent_request,
    )


def test_a_202_links_its_request_its_runs_and_the_stream(client, open_tree):
    open_tree()
    body = post(client)
    links = body["links"]
    rid = body["requestId"]
    # Without authentication each link names the request's user, so it opens as given.
    assert links == {
        "request": f"http://testserver/api/requests/{rid}?userId={MEMBER}",
        "wait": f"http://testserver/api/requests/{rid}?wait=30&userId={MEMBER}",
        "runs": f"http://testserver/api/sessions/eng.standup/runs?status=active&startedBy={rid}&userId={MEMBER}",
        "stream": f"http://testserver/api/sessions/eng.standup/stream?userId={MEMBER}",
    }
    for url in links.values():
        assert client.get(url.removeprefix("http://testserver")).status_code == 200
    refused = client.post(
        "/api/flows/mailbox/eng.standup/actions/post",
        {"userId": MEMBER, "input": {"body": "hi", "author": "mallory"}},
        format="json",
    )
    assert refused.status_code == 403 and "links" not in refused.json()


def test_runs_lists_the_unfinished_requests_of_child_sessions(client, open_tree, org):
    open_tree()
    body = post(client)
    post_request = Request.objects.get(request_id=body["requestId"])
    active = running_turn(org, post_request, "eng.lead")
    running_turn(org, post_request, "eng.analyst", running=False)  # finished: not a run
    other = running_turn(org, None, "eng.other")  # started by nothing we name
    mailbox = Session.objects.get(organization=org, session_id="eng.standup")
    do_record_request(mailbox, action="route", input={}, user_id="u_owner", running=True)  # on the session itself

    runs = client.get("/api/sessions/eng.standup/runs?status=active").json()
    assert runs["sessionId"] == "eng.standup"
    assert [r["requestId"] for r in runs["runs"]] == [active.request_id, other.request_id]
    first = runs["runs"][0]
    assert first["flowId"] == "eng.lead" and first["sessionId"] == "eng.standup:eng.lead" and first["flowKind"] == "agent"
    assert first["status"] == "active" and first["action"] == "onMailboxPost" and first["startedBy"] == body["requestId"]
    assert first["workingOn"] == {"postId": "p1", "body": "x" * 500}  # what it works on, cut short
    assert runs["runs"][1]["startedBy"] is None

    mine = client.get(f"/api/sessions/eng.standup/runs?status=active&startedBy={body['requestId']}").json()["runs"]
    assert [r["requestId"] for r in mine] == [active.request_id]
    assert client.get("/api/sessions/eng.standup/runs").json() == runs  # active is the default
    assert len(client.get("/api/sessions/eng.standup/runs?limit=1").json()["runs"]) == 1


def test_runs_refuse_like_the_items_endpoint(client, open_tree):
    open_tree()
    for query, status, reason in (
        ("?status=done", 400, "invalid-input"),
        ("?limit=0", 400, "invalid-input"),
    ):
        answer = client.get("/api/sessions/eng.standup/runs" + query)
        assert answer.status_code == status and answer.json()["error"]["reason"] == reason
    answer = client.get("/api/sessions/eng.nowhere/runs")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"


def test_runs_list_at_most_a_constant_number_of_queries(client, open_tree, org, django_assert_num_queries):
    open_tree()
    body = post(client)
    parent = Request.objects.get(request_id=body["requestId"])
    for n in range(5):
        running_turn(org, parent, f"eng.s{n}")
    with django_assert_num_queries(3):  # the organization, the session, the runs with their sessions
        assert len(client.get("/api/sessions/eng.standup/runs").json()["runs"]) == 5


@override_settings(WORKFORCE_AUTH="token")
def test_another_organizations_runs_and_requests_are_404(client, open_tree, org, other_org):
    open_tree()
    bob = User.objects.create_user("bob")
    Membership.objects.create(user=bob, organization=org)
    alice = User.objects.create_user("alice")
    Membership.objects.create(user=alice, organization=other_org)
    client.force_authenticate(bob)
    rid = do_run_action(org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": "hi"}, user_id="bob")
    assert client.get("/api/sessions/eng.standup/runs").status_code == 200
    client.force_authenticate(alice)
    answer = client.get("/api/sessions/eng.standup/runs")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
    answer = client.get(f"/api/requests/{rid.request_id}?wait=5")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "request-not-found"


def test_wait_answers_a_finished_request_at_once(client, open_tree):
    open_tree()
    body = post(client)
    answer = client.get(f"/api/requests/{body['requestId']}?wait=30")  # how soon: bench/timeouts.py ("wait, finished")
    assert answer.status_code == 200 and answer.json()["status"] == "completed"


def test_wait_gives_up_after_its_seconds_with_the_request_as_it_stands(client, open_tree, org, settings):
    settings.WORKFORCE_STREAM_POLL_SECONDS = 0.1
    open_tree()
    turn = running_turn(org, None)
    started = time.monotonic()
    answer = client.get(f"/api/requests/{turn.request_id}?wait=1")
    took = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["status"] == "running"
    assert took >= 1.0


@pytest.mark.parametrize("wait", ["31", "-1", "soon", "1.5"])
def test_wait_is_whole_seconds_up_to_30(client, open_tree, wait):
    open_tree()
    body = post(client)
    answer = client.get(f"/api/requests/{body['requestId']}?wait={wait}")
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
