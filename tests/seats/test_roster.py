"""A person's own roster over HTTP (seats.api; spec 004 "Who can be a delegate", "What it
won't do"): hire from a WORKER.md text, fork, fire, list and read, with the scope rule
``seats.queries.reachable_seats`` (own, then the organization's, then standard)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from seats.models import Seat
from tests.conftest import hire_tree

from .conftest import worker_md

ME, YOU = "u_1", "u_2"
SCRIBE_MD = worker_md("Takes short notes.", model="embedded/echo", body="Take short notes.")
TREE = {
    "teams/support/workers/devices/WORKER.md": worker_md("Phones and laptops.", model="embedded/echo"),
    "teams/support/workers/general/WORKER.md": worker_md("Anything else.", model="embedded/echo"),
}


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def standard(make_tree, db):
    """The tree's workers, hired as standard (shared) seats."""
    return hire_tree(make_tree(TREE))


def hire(client, worker_id="u1.scribe", text=SCRIBE_MD, *, user_id=ME):
    return client.post("/api/workers", {"userId": user_id, "id": worker_id, "workerMd": text}, format="json")


def refused(response, status: int, reason: str) -> dict:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["status"] == "failed" and body["error"]["reason"] == reason, body
    assert body["error"]["message"].startswith(f"{reason}: ")
    return body["error"]


def test_a_hire_writes_one_row_of_the_callers_own(client, standard, org):
    response = hire(client)
    assert response.status_code == 201, response.content
    data = response.json()
    assert data["id"] == "u1.scribe" and data["flow"] == "agent" and data["scope"] == "own"
    assert data["standard"] is False and data["description"] == "Takes short notes."
    assert data["instructions"] == "Take short notes." and data["model"] == "embedded/echo"
    assert response["Location"].endswith("/api/workers/u1.scribe")
    seat = Seat.objects.get(seat_id="u1.scribe")
    assert (seat.scope, seat.organization_id, seat.owner_user_id) == ("own", org.pk, ME)
    assert client.get("/api/workers/u1.scribe", {"userId": ME}).json() == data
