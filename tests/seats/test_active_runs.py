"""Busy runs on the real path (spec "Showing a mailbox on screen": ``busy`` lists the
runs posts have started that haven't finished, each under the seat's address): while a
woken seat's turn runs, ``GET /api/sessions/{mailbox}/runs?status=active`` lists it,
started by the post's request, and once it finished it is gone."""

from __future__ import annotations

from rest_framework.test import APIClient

from tests.conftest import MEMBER
from workforce.llm import use_model_resolver
from workforce.models import Request
from workforce.notify import ON_MAILBOX_POST
from workforce.testing import create_mock_model_resolver


def test_a_seats_running_turn_is_an_active_run_started_by_the_post(wired, post, org):
    wired()
    client = APIClient()
    seen: dict[str, list] = {}

    def look(call):  # the seat's model call: its turn is running now
        seen[call.block] = client.get("/api/sessions/eng.standup/runs?status=active").json()["runs"]
        return "on it"

    with use_model_resolver(create_mock_model_resolver({"*": look})):
        answer = post("eng.standup", "the build is red", author="eng.lead")
    assert set(seen) == {"eng.lead", "eng.analyst"}
    run = next(r for r in seen["eng.lead"] if r["flowId"] == "eng.lead")
    turn = Request.objects.get(session__session_id="eng.standup:eng.lead", action=ON_MAILBOX_POST)
    assert run == {
        "sessionId": "eng.standup:eng.lead",
        "flowId": "eng.lead",
        "flowKind": "agent",
        "status": "active",
        "requestId": turn.request_id,
        "action": ON_MAILBOX_POST,
        "startedAt": run["startedAt"],
        "startedBy": answer.request_id,
        "workingOn": {"postId": answer.output["id"], "body": "the build is red", "author": "eng.lead"},
    }
    assert run["startedAt"]
    assert turn.parent_request_id == answer.pk

    # Finished: nothing is active, by the post or at all.
    started_by = f"/api/sessions/eng.standup/runs?status=active&startedBy={answer.request_id}"
    assert client.get(started_by).json() == {"sessionId": "eng.standup", "runs": []}
    assert client.get("/api/sessions/eng.standup/runs").json()["runs"] == []
    assert Request.objects.get(pk=turn.pk).status == "completed"


def test_the_runs_a_post_started_are_its_own(wired, post, org, django_capture_on_commit_callbacks):
    wired()
    client = APIClient()
    seen = []
    mine = {}

    def look(call):
        seen.append(client.get(mine["runs"]).json()["runs"])
        return "ok"

    earlier = post("eng.incidents", "first")  # its seats' turns are over
    with use_model_resolver(create_mock_model_resolver({"*": look})):
        # The deliveries run once the post commits (the end of this block), while the
        # script looks at the runs link the post's 202 gave: only this post's runs.
        with django_capture_on_commit_callbacks(execute=True):
            answer = client.post(
                "/api/flows/mailbox/eng.incidents/actions/post", {"userId": MEMBER, "input": {"body": "second"}}, format="json"
            )
            assert answer.status_code == 202
            mine["runs"] = answer.json()["links"]["runs"]
    assert earlier.status == "completed"
    assert len(seen) == 2  # eng.lead and eng.analyst
    for runs in seen:
        assert runs and {r["startedBy"] for r in runs} == {answer.json()["requestId"]}
