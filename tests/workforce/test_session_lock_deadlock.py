"""A session's row lock and the foreign keys that point at the session (PostgreSQL).

The break-it pass found a deadlock between a turn's end and the next wake of the same
seat: one worker held the mailbox session's row lock (the answer's line) and waited for
the seat's turn slot; the other held the turn slot and, at its COMMIT, needed the
foreign-key check's ``FOR KEY SHARE`` on that same session row, which ``FOR UPDATE``
blocks. The session lock is ``FOR NO KEY UPDATE`` (``workforce.rows._row_lock``,
``ActionContext.lock_session``): writers of the session still wait on each other, a
foreign key's check does not. The control takes the lock as it was (``FOR UPDATE``).
"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction

from seats.models import TurnSlot
from tests.conftest import run_in_threads
from workforce import rows
from workforce.models import Item, Session
from workforce.sessions import ensure_organization

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def session_and_slot():
    org = ensure_organization("default")
    session = Session.objects.create(organization=org, session_id="eng.m", flow_kind="mailbox", user_id="u")
    slot = TurnSlot.objects.create(session=session, seat_id="eng.lead")
    return session, slot


def _cross(session: Session, slot: TurnSlot, lock_session) -> list[str]:
    """Thread 0 locks the session, then updates the slot; thread 1 locks the slot, then
    writes an item of the session (its foreign key checked at COMMIT). Returns what
    each thread ended with."""
    locked = threading.Barrier(2, timeout=30)

    def run(i: int) -> str:
        try:
            with transaction.atomic():
                if i == 0:
                    lock_session(session.pk)
                    locked.wait()
                    TurnSlot.objects.filter(pk=slot.pk).update(claim_token="")
                else:
                    TurnSlot.objects.select_for_update().get(pk=slot.pk)
                    Item.objects.create(session_id=session.pk, seq=1, type="component", data={})
                    locked.wait()
            return "committed"
        except OperationalError as exc:
            return "deadlock" if "deadlock" in str(exc) else repr(exc)

    return run_in_threads(run, 2, barrier=False, timeout=60)


def test_the_session_lock_lets_a_foreign_key_check_through(session_and_slot):
    session, slot = session_and_slot

    def lock_session(pk: int) -> None:
        rows.select_one(Session, '"id" = %s', [pk], for_update=True)

    assert _cross(session, slot, lock_session) == ["committed", "committed"]
    assert Item.objects.filter(session=session).count() == 1


def test_control_for_update_deadlocks_the_same_two_transactions(session_and_slot):
    session, slot = session_and_slot

    def lock_session(pk: int) -> None:
        with connection.cursor() as cursor:
            cursor.execute('SELECT "id" FROM "workforce_session" WHERE "id" = %s FOR UPDATE', [pk])

    assert sorted(_cross(session, slot, lock_session)) == ["committed", "deadlock"]


def test_writers_of_one_session_still_wait_on_each_other(session_and_slot):
    session, _ = session_and_slot
    inside = threading.Event()
    order: list[str] = []

    def run(i: int) -> None:
        with transaction.atomic():
            if i == 1:
                inside.wait(timeout=30)
            rows.select_one(Session, '"id" = %s', [session.pk], for_update=True)
            order.append(f"in {i}")
            if i == 0:
                inside.set()
                threading.Event().wait(0.5)  # hold the lock: the other must wait for it
            order.append(f"out {i}")

    run_in_threads(run, 2, barrier=False, timeout=60)
    assert order == ["in 0", "out 0", "in 1", "out 1"]
