"""The coordinator's refusals reached through a person's own roster (spec 004 "Who can be
a delegate", "Choosing how it routes", "What it won't do"): workers hired, forked and
fired over HTTP (``/api/workers``), read by the coordinator from the database."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from coordinators.delivery import do_deliver_delegated
from coordinators.models import Delegate, DelegatedPost
from tests.conftest import MEMBER, OUTSIDER
from tests.coordinators.conftest import ACCOUNTS, DEVICES, GENERAL
from tests.seats.conftest import worker_md

SCRIBE = "notes.scribe"
SCRIBE_MD = worker_md("Takes short notes.", model="embedded/echo", body="Take short notes.")


@pytest.fixture
def client():
    return APIClient()


def hire(client, worker_id=SCRIBE, *, user_id=MEMBER, text=SCRIBE_MD):
    response = client.post("/api/workers", {"userId": user_id, "id": worker_id, "workerMd": text}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def fire(client, worker_id=SCRIBE, *, user_id=MEMBER):
    response = client.delete(f"/api/workers/{worker_id}?userId={user_id}")
    assert response.status_code == 204, response.content


def refused(request, reason: str, sentence: str) -> None:
    assert request.status == "failed"
    assert request.error == {"reason": reason, "message": f"{reason}: {sentence}"}


def test_a_worker_you_hired_is_a_delegate_and_answers(desk, client):
    d = desk(routing="round-robin", delegates=(DEVICES,))
    hire(client)
    assert d.act("addDelegate", {"worker": SCRIBE}).status == "completed"
    d.run("one")  # devices
    post = d.run("two")
    [record] = d.records(post.request_id)
    assert record["delegates"] == [{"worker": SCRIBE, "outcome": "delivered"}]
    assert d.turns(SCRIBE) == 1
    assert (SCRIBE, f"{SCRIBE} answered: {MEMBER}, through support.help: two") in d.answers()


def test_another_users_worker_gets_the_answer_of_one_nobody_holds(desk, client):
    d = desk()
    hire(client, "theirs.scribe", user_id=OUTSIDER)
    for worker in ("theirs.scribe", "nobody.holds"):
        refused(d.act("addDelegate", {"worker": worker}), "worker-not-on-roster", f'No worker "{worker}" on your roster.')
        refused(
            d.act("setFallback", {"worker": worker}),
            "fallback-not-a-delegate",
            (f"\"{worker}\" isn't a delegate in this conversation, so it can't be the fallback."),
        )
    assert [e["worker"] for e in d.act("listDelegates").output["delegates"]] == [DEVICES, ACCOUNTS, GENERAL]
    assert not Delegate.objects.filter(worker__in=("theirs.scribe", "nobody.holds")).exists()


def test_a_fired_delegate_is_skipped_with_the_reason_and_its_entry_is_kept(desk, client):
    d = desk(routing="everyone", delegates=(DEVICES,))
    hire(client)
    d.act("addDelegate", {"worker": SCRIBE, "note": "Notes"})
    fire(client)
    post = d.run("hi")
    [record] = d.records(post.request_id)
    assert record["delegates"] == [
        {"worker": DEVICES, "outcome": "delivered"},
        {"worker": SCRIBE, "outcome": "skipped", "reason": f'No worker "{SCRIBE}" on your roster.'},
    ]
    assert d.turns(SCRIBE) == 0
    listed = d.act("listDelegates").output["delegates"]
    assert {"worker": SCRIBE, "note": "Notes"} in listed  # the entry is kept
    # A fired delegate can still be removed: removing checks only the list.
    assert d.act("removeDelegate", {"worker": SCRIBE}).output["delegates"] == [{"worker": DEVICES}]


def test_round_robin_skips_a_fired_delegate_to_the_next(desk, client):
    d = desk(routing="round-robin", delegates=(DEVICES, GENERAL))
    hire(client)
    d.act("addDelegate", {"worker": SCRIBE})
    d.run("one")  # devices
    d.run("two")  # general
    fire(client)
    post = d.run("three")
    assert d.records(post.request_id)[0]["delegates"] == [
        {"worker": SCRIBE, "outcome": "skipped", "reason": f'No worker "{SCRIBE}" on your roster.'},
        {"worker": DEVICES, "outcome": "delivered"},
    ]


def test_a_delegate_fired_between_pick_and_delivery_is_failed(desk, client, monkeypatch):
    from coordinators import policies
    from workforce.dispatch import enqueue

    d = desk(routing="everyone", delegates=(DEVICES,))
    hire(client)
    d.act("addDelegate", {"worker": SCRIBE})
    held = []
    monkeypatch.setattr(
        policies, "enqueue", lambda task, *a: held.append(a[0]) if task == policies.DELIVER_TASK else enqueue(task, *a)
    )
    post = d.run("hi")
    [record] = d.records(post.request_id)
    assert {"worker": SCRIBE, "outcome": "delivered"} in record["delegates"]  # picked while it was hired
    fire(client)
    with d.capture(execute=True):
        assert [do_deliver_delegated(pk) for pk in held] == ["answered", "failed"]
    fired = DelegatedPost.objects.get(worker=SCRIBE)
    assert fired.status == "failed" and fired.reported
    assert fired.error == {"reason": "delegate-fired", "message": f'delegate-fired: No worker "{SCRIBE}" on your roster.'}
    assert d.turns(SCRIBE) == 0


def test_your_fork_of_a_delegate_answers_for_you_and_the_standard_one_for_others(desk, client, org):
    from coordinators.services import do_ensure_worker_session

    d = desk(routing="everyone", delegates=(DEVICES,))
    forked = client.post(f"/api/workers/{DEVICES}/fork", {"userId": MEMBER}, format="json")
    assert forked.status_code == 201
    d.run("hi")
    mine = DelegatedPost.objects.get(worker=DEVICES)
    assert mine.delegate_session.flow_kind == "agent"
    from seats.queries import access_worker

    assert access_worker(org, MEMBER, DEVICES).scope == "own"
    assert access_worker(org, OUTSIDER, DEVICES).scope == "shared"
    do_ensure_worker_session(org, OUTSIDER, "support.help")
    fire(client, DEVICES)  # your fork gone, the standard one is on your roster again
    post = d.run("again")
    assert d.records(post.request_id)[0]["delegates"] == [{"worker": DEVICES, "outcome": "delivered"}]


def test_best_fit_offers_a_worker_you_hired_by_its_description(desk, client):
    from tests.coordinators.conftest import choose

    d = desk(routing="best-fit", delegates=(DEVICES,), answers=[choose(SCRIBE)])
    hire(client)
    d.act("addDelegate", {"worker": SCRIBE})
    post = d.run("Please write this down.")
    [call] = d.route.calls
    assert [(c.value, c.description) for c in call.question.choices] == [
        (DEVICES, "Phones, laptops, and anything else that won't turn on or charge."),
        (SCRIBE, "Takes short notes."),
    ]
    assert d.records(post.request_id)[0]["delegates"] == [{"worker": SCRIBE, "outcome": "delivered"}]
