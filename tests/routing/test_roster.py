"""A seat hired while the app runs (spec "How a post finds its member", "What routing
can't do"): a person's own worker hired over HTTP (``/api/workers``) after the route was
built has no description for the route, so it is never a choice, but it can take a post
as the fallback and then hold the next. One fired since the start has no seat."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mailboxes.models import Delivery
from mailboxes.routing import configure_route, route_by_purpose
from seats.hiring import seats_to_wake
from seats.models import Seat
from workforce.llm import ModelError
from workforce.testing import mock_evaluation_model

from .conftest import ACCOUNTS, DEVICES, GENERAL, OWNER, route_items, worker_md

NONE = {"member": {"type": "none"}}
# The mailbox's principal (OWNER) hires a general of their own; its description would fit.
MY_DESCRIPTION = "Printers, and anything that fits none of the others."
MY_GENERAL_MD = worker_md(MY_DESCRIPTION, model="embedded/echo")


def silent(call):
    """A seat's model that never answers (its turn fails, so no answer lands)."""
    return ModelError("the model is busy")


@pytest.fixture
def client():
    return APIClient()


def hire(client, worker_id=GENERAL, text=MY_GENERAL_MD, *, user_id=OWNER) -> Seat:
    response = client.post("/api/workers", {"userId": user_id, "id": worker_id, "workerMd": text}, format="json")
    assert response.status_code == 201, response.content
    return Seat.objects.get(seat_id=worker_id, scope="own", owner_user_id=user_id)


def test_a_seat_hired_while_the_app_runs_is_never_a_choice_but_takes_the_fallback_then_holds(routed, post, client):
    _, resolver = routed(route=mock_evaluation_model(answers=NONE), scripts={GENERAL: silent, "*": lambda call: "ok"})
    mine = hire(client)
    post("hello?")
    post("my printer is jammed")
    route = resolver.evaluators["mailbox-route"]
    assert len(route.calls) == 1
    assert route.calls[0].question.values() == [DEVICES, ACCOUNTS]  # the hired general is no choice
    assert [(i["member"], i["by"]) for i in route_items()] == [(GENERAL, "fallback"), (GENERAL, "held")]
    assert route_items()[0]["reason"] == "no-choice"
    # Both posts woke the principal's own general, not the standard one.
    assert list(Delivery.objects.order_by("pk").values_list("member", "seat_id")) == [(GENERAL, mine.pk), (GENERAL, mine.pk)]


def test_another_users_hire_changes_nothing_for_the_mailbox(routed, post, client):
    seats, resolver = routed(route=mock_evaluation_model(answers=NONE))
    hire(client, user_id="u_someone_else")
    post("hello?")
    assert resolver.evaluators["mailbox-route"].calls[0].question.values() == [DEVICES, ACCOUNTS, GENERAL]
    standard = next(s for s in seats if s.seat_id == GENERAL)
    assert Delivery.objects.get().seat_id == standard.pk


def test_after_a_restart_the_hired_seat_is_passed_in_with_its_description(routed, post, client):
    seats, resolver = routed(route=mock_evaluation_model(answers=NONE))
    mine = hire(client)
    route = mock_evaluation_model(answers={"member": {"type": "choice", "choice": GENERAL}})
    configure_route("mailbox", route_by_purpose(seats_to_wake(seats), model=route))  # what boot does
    post("my printer is jammed")
    [call] = route.calls
    assert [c.description for c in call.question.choices if c.value == GENERAL] == [MY_DESCRIPTION]
    assert (route_items()[0]["member"], route_items()[0]["by"]) == (GENERAL, "evaluated")
    assert Delivery.objects.get().seat_id == mine.pk


def test_a_hired_fallback_fired_while_the_app_runs_leaves_the_standard_one(routed, post, client):
    seats, _ = routed(route=mock_evaluation_model(answers=NONE))
    hire(client)
    assert client.delete(f"/api/workers/{GENERAL}?userId={OWNER}").status_code == 204
    post("hello?")
    standard = next(s for s in seats if s.seat_id == GENERAL)
    assert (route_items()[0]["member"], route_items()[0]["by"]) == (GENERAL, "fallback")
    assert Delivery.objects.get().seat_id == standard.pk
