"""Break-it probes of do_insert_deliveries (the release in a post's own INSERT)."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from mailboxes import fairness
from mailboxes.models import Delivery
from tests.conftest import mailbox_md, run_in_threads
from tests.mailboxes.test_fairness import heard, held, post  # noqa: F401
from tests.mailboxes.test_fairness import sent as sent  # noqa: F401

MANY = "eng.many"
MEMBERS = tuple(f"eng.m{n:03d}" for n in range(120))


@pytest.fixture
def many(open_tree, sent):  # noqa: F811
    open_tree({"teams/eng/mailboxes/many/MAILBOX.md": mailbox_md("Many.", members=MEMBERS)})
    return sent


@pytest.mark.parametrize("bound,expect", [(1, 1), (0, 120), (100, 100), (119, 119), (200, 120)])
def test_many_members_release_up_to_the_bound_oldest_first(org, many, settings, bound, expect):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = bound
    settings.WORKFORCE_DELIVERY_ORG_TASKS = bound
    pks = post(org, MANY, "hello")
    assert len(pks) == 120
    assert many == pks[:expect]
    assert held() == pks[expect:]
    assert list(Delivery.objects.filter(enqueued_at__isnull=False).order_by("pk").values_list("pk", flat=True)) == pks[:expect]


def test_org_bound_smaller_than_session_bound(org, many, settings):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = 50
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 7
    pks = post(org, MANY, "hello")
    assert many == pks[:7] and held() == pks[7:]
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 200
    pks2 = post(org, MANY, "again")  # something held: the release decides (50 per session)
    assert len(many) == 50 and held() == sorted(set(pks + pks2) - set(many))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("bound", [1, 2, 0])
def test_concurrent_posts_none_lost_none_stuck(org, many, settings, bound):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = bound
    settings.WORKFORCE_DELIVERY_ORG_TASKS = bound
    from mailboxes.notify import configure_notify, notify_block  # noqa: F401

    def worker(n: int) -> list[int]:
        try:
            return [pk for k in range(3) for pk in post(org, "eng.flood" if n % 2 else "eng.other", f"p {n} {k}")]
        finally:
            connection.close()

    made = [pk for got in run_in_threads(worker, 6, timeout=120) for pk in got]
    assert len(made) == len(set(made))
    assert len(many) == len(set(many))  # nothing released twice
    # drain: finish what's in flight, release, until all done
    for _ in range(200):
        with transaction.atomic():
            Delivery.objects.filter(pk__in=many, status="pending").update(status="done")
            fairness.do_release_held_everywhere()
        if not held():
            break
    with transaction.atomic():
        Delivery.objects.filter(pk__in=many, status="pending").update(status="done")
    assert sorted(many) == sorted(made)
    assert not held()


@pytest.mark.parametrize("bound", [1, 5, 0])
def test_many_members_over_several_insert_batches(org, many, settings, monkeypatch, bound):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = settings.WORKFORCE_DELIVERY_ORG_TASKS = bound
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 8)
    pks = post(org, MANY, "hello")
    expect = bound or 120
    assert len(pks) == 120 and many == pks[:expect] and held() == pks[expect:]
