"""Claims and conversations under real concurrency, on PostgreSQL (SQLite
has no row locks to test). A delivery handed to several tasks at once runs once; two
posts landing together each wake each seat once, in one conversation."""

from __future__ import annotations

import threading

import pytest

from mailboxes import deliveries, fairness, notify
from mailboxes.models import Delivery
from tests.conftest import MEMBER, run_in_threads
from workforce.models import Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import do_run_action

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 8


@pytest.fixture
def pending(wired, org, monkeypatch):
    """A committed post whose deliveries were written but not handed to the cluster."""
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    wired()
    do_run_action(org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": "x"}, user_id=MEMBER)
    return Delivery.objects.get(member="eng.lead")


def test_a_delivery_handed_to_many_tasks_at_once_runs_once(pending, org):
    outcomes = run_in_threads(lambda i: deliveries.do_deliver(pending.pk), N)
    assert sorted(outcomes) == ["done"] + ["not-claimed"] * (N - 1)
    assert Request.objects.filter(session__session_id="eng.incidents:eng.lead", action=ON_MAILBOX_POST).count() == 1
    pending.refresh_from_db()
    assert pending.attempts == 1


def test_control_a_read_then_write_claim_lets_several_through(pending):
    """The race the conditional UPDATE closes: everyone reads "pending", then writes."""
    barrier = threading.Barrier(N)

    def naive_claim(i: int) -> bool:
        status = Delivery.objects.get(pk=pending.pk).status
        barrier.wait(timeout=30)
        if status != "pending":
            return False
        Delivery.objects.filter(pk=pending.pk).update(status="running")
        return True

    claimed = run_in_threads(naive_claim, N)
    assert sum(claimed) > 1


def test_two_posts_landing_together_each_wake_each_seat_once(wired, org):
    wired()
    run_in_threads(
        lambda i: do_run_action(
            org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": f"together {i}"}, user_id=MEMBER
        ),
        2,
    )
    for seat in ("eng.lead", "eng.analyst"):
        assert Session.objects.filter(session_id=f"eng.incidents:{seat}").count() == 1
        turns = Request.objects.filter(session__session_id=f"eng.incidents:{seat}", action=ON_MAILBOX_POST)
        assert sorted(t.input["body"] for t in turns) == ["together 0", "together 1"]
        assert {t.status for t in turns} == {"completed"}
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
