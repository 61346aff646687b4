"""The sweeper under a real backlog, on PostgreSQL with the ORM broker holding the tasks
(django-q2 not in sync mode here, and no cluster: nothing is claimed unless the test
claims it). A sweep re-enqueues only a delivery whose task is known lost: a backlog
waiting in the queue is left alone however old it grows, while a task the broker dropped
is enqueued again, once, with backoff."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import OrmQ
from django_q.signing import SignedPackage

from mailboxes import deliveries as services  # the delivery runner and its sweep
from mailboxes.models import Delivery
from tests.conftest import MEMBER
from workforce.leases import requeue_after_seconds, requeue_grace_seconds
from workforce.sessions import do_run_action

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

POSTS = 150  # x 2 members: 300 deliveries


@pytest.fixture
def backlog(wired, org, monkeypatch, settings):
    """POSTS committed posts on eng.incidents (2 members each), every delivery's task
    waiting in the ORM broker's table (no bound on deliveries in flight, so none is held:
    mailboxes.fairness; tests/mailboxes/test_fairness.py has the held backlog)."""
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = settings.WORKFORCE_DELIVERY_ORG_TASKS = 0
    wired()
    monkeypatch.setattr(Conf, "SYNC", False)
    for n in range(POSTS):
        do_run_action(
            org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": f"backlog {n}"}, user_id=MEMBER
        )
    assert Delivery.objects.count() == OrmQ.objects.count() == 2 * POSTS
    return list(Delivery.objects.order_by("enqueued_at", "pk").values_list("pk", flat=True))


def queued_deliveries() -> list[int]:
    return sorted(SignedPackage.loads(q.payload)["args"][0] for q in OrmQ.objects.all())


def test_a_backlog_nobody_claims_is_never_enqueued_again(backlog):
    start = timezone.now()
    extra = 0
    for seconds in (0, 1, 2, 5, 10, 50, 100, 1000):  # sweeps while nothing is claimed, far past retry
        extra += len(services.do_sweep_deliveries(now=start + timedelta(seconds=requeue_after_seconds() * seconds + 1)).requeued)
    assert extra <= len(backlog) // 100
    assert extra == 0
    assert OrmQ.objects.count() == len(backlog)
    assert sum(Delivery.objects.values_list("requeues", flat=True)) == 0


def test_a_task_the_broker_dropped_is_enqueued_again_once_and_the_rest_wait(backlog):
    head, rest = backlog[:60], backlog[60:]
    dropped = head[30]
    for q in OrmQ.objects.all():  # the cluster takes the head of the queue, the broker drops one
        if SignedPackage.loads(q.payload)["args"][0] in head:
            q.delete()
    for pk in head:
        if pk != dropped:
            assert services.do_deliver(pk) == "done"
    later = timezone.now() + timedelta(seconds=requeue_grace_seconds() + requeue_after_seconds() + 1)
    assert services.do_sweep_deliveries(now=later).requeued == [dropped]
    assert queued_deliveries() == sorted(rest + [dropped])
    for seconds in (1, 10, 100):  # sweeps again: the re-enqueued task waits its turn, the backlog too
        assert services.do_sweep_deliveries(now=later + timedelta(seconds=seconds)).requeued == []
    assert services.do_deliver(dropped) == "done"
    row = Delivery.objects.get(pk=dropped)
    assert (row.status, row.attempts, row.requeues) == ("done", 1, 1)
    assert OrmQ.objects.count() == len(rest) + 1


def test_with_nothing_left_in_the_broker_a_lost_task_is_enqueued_again_with_backoff(backlog):
    lost = backlog[-1]
    OrmQ.objects.all().delete()  # the broker lost everything; the others ran
    for pk in backlog[:-1]:
        Delivery.objects.filter(pk=pk).update(status="done", attempts=1, started_at=timezone.now())
    start = Delivery.objects.get(pk=lost).enqueued_at
    b = requeue_after_seconds()
    assert services.do_sweep_deliveries(now=start + timedelta(seconds=b - 1)).requeued == []
    first = start + timedelta(seconds=b + 1)
    assert services.do_sweep_deliveries(now=first).requeued == [lost]
    assert services.do_sweep_deliveries(now=first).requeued == []  # a second sweeper finds nothing
    OrmQ.objects.all().delete()  # lost again
    assert services.do_sweep_deliveries(now=first + timedelta(seconds=2 * b - 1)).requeued == []  # backoff: 2B
    assert services.do_sweep_deliveries(now=first + timedelta(seconds=2 * b + 1)).requeued == [lost]
    assert Delivery.objects.get(pk=lost).requeues == 2
    assert queued_deliveries() == [lost]


def test_an_empty_broker_while_tasks_still_start_is_not_taken_for_a_loss(backlog):
    """The workers take a few tasks ahead from the broker: with the broker empty, a
    pending delivery is not taken for lost while tasks are still starting."""
    waiting = backlog[-4:]
    OrmQ.objects.all().delete()  # the broker is empty: the last four are in the workers' hands
    later = Delivery.objects.get(pk=waiting[0]).enqueued_at + timedelta(seconds=requeue_after_seconds() + 1)
    for pk in backlog[:-4]:
        Delivery.objects.filter(pk=pk).update(status="done", attempts=1, started_at=later - timedelta(seconds=1))
    assert services.do_sweep_deliveries(now=later).requeued == []
    quiet = later + timedelta(seconds=requeue_grace_seconds() + 1)
    assert sorted(services.do_sweep_deliveries(now=quiet).requeued) == sorted(waiting)  # nothing started since: lost


def test_the_orm_broker_handing_a_task_out_late_is_not_taken_for_a_loss(backlog):
    """The ORM broker's order is not first in, first out: a delivery the queue passed
    whose task is still in the broker's table waits; once the task is gone, it is lost."""
    head = backlog[:60]
    late = head[30]
    for q in OrmQ.objects.all():
        if SignedPackage.loads(q.payload)["args"][0] in head and SignedPackage.loads(q.payload)["args"][0] != late:
            q.delete()
    for pk in head:
        if pk != late:
            assert services.do_deliver(pk) == "done"
    later = timezone.now() + timedelta(seconds=requeue_grace_seconds() + requeue_after_seconds() + 1)
    assert services.do_sweep_deliveries(now=later).requeued == []  # still in the broker's table
    OrmQ.objects.filter(pk__in=[q.pk for q in OrmQ.objects.all() if SignedPackage.loads(q.payload)["args"][0] == late]).delete()
    assert services.do_sweep_deliveries(now=later).requeued == [late]


def test_a_lapsed_claim_whose_task_the_orm_broker_still_holds_is_left_to_the_broker(backlog):
    claimed = backlog[0]
    now = timezone.now()
    # Enqueued, claimed, and its lease lapsed since, in that order (a fast fixture may
    # have enqueued it less than a second ago: a lease lapsing before its enqueue would
    # read as enqueued again, not lost).
    Delivery.objects.filter(pk=claimed).update(
        status="running",
        attempts=1,
        enqueued_at=now - timedelta(seconds=10),
        started_at=now - timedelta(seconds=9),
        lease_until=now - timedelta(seconds=1),
    )
    assert services.do_sweep_deliveries().requeued == []  # its task is still in the broker's table
    OrmQ.objects.filter(
        pk__in=[q.pk for q in OrmQ.objects.all() if SignedPackage.loads(q.payload)["args"][0] == claimed]
    ).delete()
    assert services.do_sweep_deliveries().requeued == [claimed]  # the worker died with it: lost
    assert services.do_sweep_deliveries().requeued == []  # once
