"""What a coordinator records (spec 004 "What it records") and the example tree's
coordinator, booted the way ``serve`` boots it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from coordinators import policies
from coordinators.constants import judgment_agent_name
from seats.models import Seat
from seats.queries import conversation_history
from tests.conftest import MEMBER
from tests.coordinators.conftest import ACCOUNTS, CONVERSATION, DEVICES, GENERAL, HELP
from workforce.llm import set_model_resolver
from workforce.models import Item, Session


def test_one_component_item_per_decision_that_never_enters_the_models_history(desk):
    d = desk(routing="round-robin", rounds=1)
    post = d.run("hi")
    items = list(Item.objects.filter(session__session_id=CONVERSATION, component="coordinator-route").order_by("seq"))
    assert [i.type for i in items] == ["component", "component"]  # round 0, and the answer going out in round 1
    assert [i.data["round"] for i in items] == [0, 1] and {i.data["postId"] for i in items} == {post.request_id}
    history = conversation_history(Session.objects.get(session_id=CONVERSATION), speaker=judgment_agent_name(HELP))
    assert all("coordinator-route" not in m["content"] and "postId" not in m["content"] for m in history)
    assert [m["role"] for m in history] == ["user", "assistant", "assistant"]


def test_a_delegate_that_cant_be_handed_anything_under_an_external_dispatcher_is_failed(desk, settings):
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    settings.WORKFORCE_EXTERNAL_DISPATCHER = True
    post = d.run("hi")
    [record] = d.records(post.request_id)
    assert record["by"] == "unplaced"
    assert [(e["worker"], e["outcome"]) for e in record["delegates"]] == [(DEVICES, "failed"), (ACCOUNTS, "failed")]
    assert record["delegates"][0]["reason"].startswith("external-dispatcher: ")
    assert not d.deliveries().exists()


def test_the_everyone_fan_out_costs_the_same_few_queries_per_delegate(desk, org, monkeypatch):
    """No per-delegate reads: the fan-out reads the list and the seats once, then writes
    one delivery per delegate (a savepoint and an insert)."""
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS, GENERAL))
    d.act("listDelegates")

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            d.run("hi")
        return len(queries)

    three = count()
    for n in range(3):
        Seat.objects.create(seat_id=f"extra{n}", kind="agent", scope=Seat.Scope.ORG, organization=org, model="embedded/echo")
        d.act("addDelegate", {"worker": f"extra{n}"})
    six = count()
    assert six - three == 3 * 3  # savepoint, insert, release per added delegate
    assert three <= 35


@pytest.fixture
def example_booted(settings, db):
    from workforce_project.boot import boot

    boot(settings.WORKFORCE_ROOT)
    set_model_resolver(None)
    yield


def test_the_example_coordinator_routes_by_best_fit_over_http(example_booted, django_capture_on_commit_callbacks):
    client = APIClient()
    opened = client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER}, format="json")
    assert opened.status_code == 201, opened.content
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(
            f"/api/flows/coordinator/{CONVERSATION}/actions/run",
            {"userId": MEMBER, "input": {"message": "My laptop won't charge."}},
            format="json",
        )
    assert answer.status_code == 202, answer.content
    assert client.get(f"/api/sessions/{CONVERSATION}/items").status_code == 404  # a conversation is its owner's
    assert client.get(f"/api/sessions/{CONVERSATION}/requests?userId=someone").status_code == 404
    items = client.get(f"/api/sessions/{CONVERSATION}/items?userId={MEMBER}").json()["items"]
    [record] = [i["data"] for i in items if i["component"] == "coordinator-route"]
    assert record == {
        "postId": answer.json()["requestId"],
        "round": 0,
        "policy": "best-fit",
        "by": "evaluated",
        "delegates": [{"worker": DEVICES, "outcome": "delivered"}],
    }
    [reply] = [i["data"] for i in items if i["type"] == "message" and i["data"]["role"] == "assistant"]
    assert reply["agentName"] == DEVICES
    assert reply["text"] == f"{DEVICES} heard: {MEMBER}, through {HELP}: My laptop won't charge."
    found = client.get(f"/api/workers/{DEVICES}/sessions?userId={MEMBER}&filingSessionId={CONVERSATION}")
    assert found.status_code == 200 and found.json()["sessionId"] == f"{CONVERSATION}:{DEVICES}"
    assert client.get(f"/api/workers/{DEVICES}/sessions?userId={MEMBER}").status_code == 404


def test_conversations_rounds_and_deliveries_show_read_only_in_the_admin(admin_client, desk):
    from django.urls import reverse

    from coordinators.models import Conversation, DelegatedPost

    d = desk(routing="everyone", rounds=1)
    d.run("hi")
    for model in ("conversation", "post", "round", "delegatedpost", "answer", "job"):
        assert admin_client.get(reverse(f"admin:coordinators_{model}_changelist")).status_code == 200
    conversation = Conversation.objects.get()
    page = admin_client.get(reverse("admin:coordinators_conversation_change", args=[conversation.pk])).content.decode()
    assert DEVICES in page and HELP in page
    delivery = DelegatedPost.objects.first()
    assert admin_client.get(reverse("admin:coordinators_delegatedpost_change", args=[delivery.pk])).status_code == 200
    assert admin_client.post(reverse("admin:coordinators_delegatedpost_change", args=[delivery.pk]), {}).status_code == 403
