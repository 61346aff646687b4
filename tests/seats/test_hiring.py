"""Hiring (spec "Waking agent seats": own, then the organization's,
then a shared one)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from seats.hiring import HireRefused, hire_workforce
from seats.models import Seat
from seats.queries import access_seat, reachable_seats
from seats.workers import WorkerManifest
from workforce.refusals import Refusal


def worker(worker_id: str, **declared) -> WorkerManifest:
    declared.setdefault("description", f"{worker_id} does things.")
    return WorkerManifest(id=worker_id, declared=declared, body="You help.", path=f"teams/x/workers/{worker_id}")


def test_one_seat_per_worker_with_what_the_file_declared(db):
    [devices, general] = hire_workforce(
        [
            worker("support.devices", model="embedded/echo", tools=["post-to-mailbox"]),
            worker("support.general"),
        ]
    )
    assert devices.seat_id == "support.devices" and devices.kind == "agent" and devices.scope == "shared"
    assert devices.tools == ["post-to-mailbox"] and devices.model == "embedded/echo"
    assert devices.instructions == "You help." and devices.description == "support.devices does things."
    assert general.model == "" and general.model_id("embedded/echo") == "embedded/echo"
    assert Seat.objects.count() == 2


def test_hiring_is_idempotent(db, django_assert_num_queries):
    workers = [worker("support.devices"), worker("support.general")]
    first = hire_workforce(workers)
    with django_assert_num_queries(1):  # one read; nothing written
        again = hire_workforce(workers)
    assert [s.pk for s in again] == [s.pk for s in first]
    assert Seat.objects.count() == 2


def test_a_changed_file_updates_its_seat(db):
    [seat] = hire_workforce([worker("support.devices")])
    [again] = hire_workforce([worker("support.devices", description="Now printers too.", tools=["post-to-mailbox"])])
    assert again.pk == seat.pk
    seat.refresh_from_db()
    assert seat.description == "Now printers too." and seat.tools == ["post-to-mailbox"]


def test_hiring_refuses_what_it_cannot_run_and_writes_nothing(db):
    with pytest.raises(HireRefused) as refused:
        hire_workforce(
            [
                worker("a.ok"),
                worker("a.flow", flow="nonesuch"),
                worker("a.tool", tools=["send-email"]),
                worker("a.model", model="acme/brain"),
                worker("a.echo", model="embedded/parrot"),
            ]
        )
    problems = dict(refused.value.problems)
    assert 'flow: names the kind "nonesuch", which was not registered' in problems["a.flow"]
    assert 'tools: names "send-email"' in problems["a.tool"] and "post-to-mailbox" in problems["a.tool"]
    assert 'unknown provider "acme"' in problems["a.model"]
    assert "embedded/echo" in problems["a.echo"]
    assert "a.ok" not in problems
    assert not Seat.objects.exists()


def test_scopes_need_their_owner(db, org):
    with pytest.raises(ValueError):
        hire_workforce([worker("x")], scope="org")
    with pytest.raises(ValueError):
        hire_workforce([worker("x")], scope="own", org=org)
    with pytest.raises(ValueError):
        hire_workforce([worker("x")], scope="shared", org=org)


def test_the_database_refuses_a_scope_without_its_owner(db, org):
    with pytest.raises(IntegrityError), transaction.atomic():
        Seat.objects.create(seat_id="x", kind="agent", scope="own", organization=org, owner_user_id="")
    with pytest.raises(IntegrityError), transaction.atomic():
        Seat.objects.create(seat_id="x", kind="agent", scope="shared", organization=org)


def test_one_seat_id_once_per_scope(db, org):
    hire_workforce([worker("x")])
    with pytest.raises(IntegrityError), transaction.atomic():
        Seat.objects.create(seat_id="x", kind="agent", scope="shared")
    hire_workforce([worker("x")], scope="org", org=org)
    hire_workforce([worker("x")], scope="own", org=org, owner_user_id="u_1")
    hire_workforce([worker("x")], scope="own", org=org, owner_user_id="u_2")
    assert Seat.objects.filter(seat_id="x").count() == 4


def test_own_then_organization_then_shared(db, org, other_org):
    [shared] = hire_workforce([worker("eng.lead", description="shared")])
    [theirs] = hire_workforce([worker("eng.lead", description="acme's")], scope="org", org=other_org)
    seats = [shared, theirs]
    assert reachable_seats(org.pk, "u_1", ["eng.lead"], among=seats).get("eng.lead") == shared
    assert reachable_seats(other_org.pk, "u_1", ["eng.lead"], among=seats).get("eng.lead") == theirs
    [ours] = hire_workforce([worker("eng.lead", description="ours")], scope="org", org=org)
    seats.append(ours)
    assert reachable_seats(org.pk, "u_1", ["eng.lead"], among=seats).get("eng.lead") == ours
    [mine] = hire_workforce([worker("eng.lead", description="mine")], scope="own", org=org, owner_user_id="u_1")
    seats.append(mine)
    assert reachable_seats(org.pk, "u_1", ["eng.lead"], among=seats).get("eng.lead") == mine
    assert (
        reachable_seats(org.pk, "u_2", ["eng.lead"], among=seats).get("eng.lead") == ours
    )  # someone else's own is not reachable
    assert reachable_seats(org.pk, "u_1", ["eng.other"], among=seats).get("eng.other") is None
    assert access_seat(org, "u_1", "eng.lead") == mine
    assert access_seat(org, "u_2", "eng.lead") == ours
    assert access_seat(other_org, "u_1", "eng.lead") == theirs
    with pytest.raises(Refusal) as refused:
        access_seat(org, "u_1", "eng.nobody")
    assert refused.value.reason == "seat-not-found"


def test_the_wake_reaches_the_mailbox_principals_own_seat_first(wired, post, org):
    from mailboxes.models import Delivery
    from tests.conftest import OWNER
    from workforce.llm import use_model_resolver
    from workforce.testing import create_mock_model_resolver

    [mine] = hire_workforce([worker("eng.lead", description="the owner's own")], scope="own", org=org, owner_user_id=OWNER)
    [someone_elses] = hire_workforce([worker("eng.lead")], scope="own", org=org, owner_user_id="u_else")
    wired(extra_seats=[mine, someone_elses])
    with use_model_resolver(create_mock_model_resolver({"*": lambda call: "ok"})):
        post("eng.incidents", "hello")
    assert Delivery.objects.get(member="eng.lead").seat_id == mine.pk
