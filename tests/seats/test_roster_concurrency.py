"""Hiring and firing one id at once, on PostgreSQL (SQLite has no concurrent writers to
test): the unique constraint on a person's own seat ids (``seat_unique_per_owner``)
decides a hire, the DELETE's row count decides a fire. Each race lines every thread up
after the existence check, beside a control showing that the check alone lets them all
through."""

from __future__ import annotations

import threading

import pytest

from seats import services
from seats.models import Seat
from seats.services import do_fire_worker, do_hire_worker
from tests.conftest import run_in_threads
from workforce.refusals import Refusal

from .conftest import worker_md

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 8
ME = "u_1"
TEXT = worker_md("Takes short notes.", model="embedded/echo")


def line_up_after_the_check(monkeypatch, n: int) -> list:
    """Every thread's ``own_worker`` check answers before any of them writes; returns
    what each check saw."""
    barrier = threading.Barrier(n)
    seen = []
    original = services.own_worker

    def own_worker(*args, **kwargs):
        found = original(*args, **kwargs)
        seen.append(found)
        barrier.wait(timeout=30)
        return found

    monkeypatch.setattr(services, "own_worker", own_worker)
    return seen


def outcome(fn) -> str:
    try:
        fn()
    except Refusal as refusal:
        return refusal.reason
    return "ok"


def test_many_hires_of_one_id_at_once_write_one_row(org, monkeypatch):
    seen = line_up_after_the_check(monkeypatch, N)
    outcomes = run_in_threads(lambda i: outcome(lambda: do_hire_worker(org, ME, "u1.scribe", TEXT)), N)
    assert sorted(outcomes) == ["ok"] + ["worker-already-on-roster"] * (N - 1)
    assert Seat.objects.filter(seat_id="u1.scribe", scope="own", owner_user_id=ME).count() == 1
    # The control: every thread's check found nothing, so the check alone would have let
    # all of them write; the constraint is what refused the other seven.
    assert seen == [None] * N


def test_many_fires_of_one_worker_at_once_fire_it_once(org, monkeypatch):
    do_hire_worker(org, ME, "u1.scribe", TEXT)
    seen = line_up_after_the_check(monkeypatch, N)
    outcomes = run_in_threads(lambda i: outcome(lambda: do_fire_worker(org, ME, "u1.scribe")), N)
    assert sorted(outcomes) == ["ok"] + ["worker-not-on-roster"] * (N - 1)
    assert not Seat.objects.filter(seat_id="u1.scribe").exists()
    assert all(found is not None for found in seen) and len(seen) == N  # the control: all saw it hired


def test_two_people_hiring_one_id_at_once_each_get_their_own(org, monkeypatch):
    line_up_after_the_check(monkeypatch, 2)
    outcomes = run_in_threads(lambda i: outcome(lambda: do_hire_worker(org, f"u_{i}", "notes", TEXT)), 2)
    assert outcomes == ["ok", "ok"]
    assert sorted(Seat.objects.filter(seat_id="notes").values_list("owner_user_id", flat=True)) == ["u_0", "u_1"]
