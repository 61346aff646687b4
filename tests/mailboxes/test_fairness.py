"""Fair delivery scheduling (issue 22 item 4b; mailboxes.fairness): a mailbox session and
an organization have at most their bound of deliveries released to the task queue; the
rest are held as rows and released oldest first within a session, round-robin across
sessions, as released ones finish, by the sweep when a release was missed; a held
delivery is never taken for a lost task. On both databases, and a PostgreSQL test with
threads that settle and release at once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from mailboxes import fairness
from mailboxes.deliveries import do_deliver, do_sweep_deliveries
from mailboxes.models import Delivery
from mailboxes.notify import configure_notify, notify_block
from tests.conftest import MEMBER, mailbox_md, run_in_threads, wired_by_hand
from workforce.sessions import do_run_action

FLOOD, OTHER = "eng.flood", "eng.other"
TREE = {
    "teams/eng/mailboxes/flood/MAILBOX.md": mailbox_md("The flooded one.", members=("eng.a", "eng.b")),
    "teams/eng/mailboxes/other/MAILBOX.md": mailbox_md("Someone else's.", members=("eng.c",)),
}
HEARD: list[str] = []


def heard(notify_input: dict) -> str:
    HEARD.append(notify_input["body"])
    return "ok"


@pytest.fixture
def sent(open_tree, monkeypatch, settings):
    """The ids whose ``deliver_post`` task was enqueued, in order (the tasks are recorded,
    not run); a notify block on every member; bounds 2 per session and 3 per organization."""
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = 2
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 3
    HEARD.clear()
    open_tree(TREE)
    tasks: list[int] = []
    lock = threading.Lock()

    def record(task, pk):
        assert task == "mailboxes.tasks.deliver_post"
        with lock:
            tasks.append(pk)

    monkeypatch.setattr(fairness, "enqueue", record)
    with wired_by_hand("mailbox"):
        configure_notify("mailbox", notify_block(heard))
        yield tasks


def post(org, mailbox: str, body: str) -> list[int]:
    """Post ``body``; the ids of its deliveries, by member."""
    answer = do_run_action(org=org, kind="mailbox", session_id=mailbox, action="post", input={"body": body}, user_id=MEMBER)
    assert answer.status == "completed", answer.error
    return list(Delivery.objects.filter(post_id=answer.output["id"]).order_by("pk").values_list("pk", flat=True))


def held() -> list[int]:
    return list(Delivery.objects.filter(status="pending", enqueued_at__isnull=True).order_by("pk").values_list("pk", flat=True))


def test_a_flood_in_one_mailbox_is_held_past_its_sessions_bound(org, sent):
    flood = [pk for n in range(3) for pk in post(org, FLOOD, f"flood {n}")]
    assert len(flood) == 6
    assert sent == flood[:2]  # the session's bound; the oldest first
    assert held() == flood[2:]  # rows, with no task: the durable record of what is owed
    assert not Delivery.objects.filter(pk__in=flood[2:], enqueued_at__isnull=False).exists()


def test_another_mailboxs_post_does_not_wait_behind_the_flood(org, sent):
    flood = [pk for n in range(5) for pk in post(org, FLOOD, f"flood {n}")]
    [other] = post(org, OTHER, "my printer jams")
    # released at once: behind at most the flood's two, not its ten
    assert sent == [*flood[:2], other]
    assert flood[2] in held()


def test_a_finished_delivery_releases_the_next_of_its_session_oldest_first(org, sent):
    flood = [pk for n in range(3) for pk in post(org, FLOOD, f"flood {n}")]
    assert do_deliver(flood[0]) == "done"
    assert sent == [*flood[:2], flood[2]]
    assert do_deliver(flood[1]) == "done"
    assert sent == flood[:4]


def test_places_go_round_robin_across_sessions_when_the_organization_is_full(org, sent, settings):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = 10
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 2
    flood = [pk for n in range(4) for pk in post(org, FLOOD, f"flood {n}")]
    [other] = post(org, OTHER, "my printer jams")
    assert sent == flood[:2] and other in held()  # the organization is full
    # the first place freed goes to the session with none in flight, not to the flood's next
    assert do_deliver(flood[0]) == "done"
    assert sent == [*flood[:2], other]
    assert do_deliver(flood[1]) == "done"
    assert sent == [*flood[:2], other, flood[2]]


def test_a_flood_drains_whole_each_delivery_sent_once(org, sent):
    flood = [pk for n in range(6) for pk in post(org, FLOOD, f"flood {n}")]
    [other] = post(org, OTHER, "my printer jams")
    ran = 0
    while ran < len(sent):
        assert do_deliver(sent[ran]) == "done"
        ran += 1
    assert sorted(sent) == sorted([*flood, other]) and len(sent) == len(set(sent))
    assert not held() and set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    assert HEARD.index("my printer jams") < len(HEARD) - 4  # it was not last: it did not wait for the flood


def test_the_sweep_releases_what_a_missed_release_left_held_and_never_requeues_it(org, sent):
    flood = [pk for n in range(3) for pk in post(org, FLOOD, f"flood {n}")]
    # the two in flight finish in a process that dies before it releases the next ones
    Delivery.objects.filter(pk__in=flood[:2]).update(status="done")
    swept = do_sweep_deliveries()
    assert swept.released == flood[2:4] and swept.requeued == [] and swept
    assert sent == flood[:4]
    again = do_sweep_deliveries()  # nothing has room now, and nothing held is taken for lost
    assert again.released == again.requeued == []
    assert held() == flood[4:]


def test_a_bound_of_0_releases_everything_at_once(org, sent, settings):
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = settings.WORKFORCE_DELIVERY_ORG_TASKS = 0
    flood = [pk for n in range(5) for pk in post(org, FLOOD, f"flood {n}")]
    assert sent == flood and not held()


def test_the_organizations_bound_is_its_own(org, other_org, open_tree, sent):
    flood = [pk for n in range(3) for pk in post(org, FLOOD, f"flood {n}")]
    open_tree(TREE, in_org=other_org)
    [theirs] = post(other_org, OTHER, "another organization")
    assert sent == [*flood[:2], theirs]


def test_the_defaults_follow_the_clusters_workers(settings):
    # At least 2: with the cluster's one worker (the default) serve's web process runs turns too.
    runners = max(2, settings.Q_CLUSTER["workers"])
    assert settings.WORKFORCE_DELIVERY_SESSION_TASKS == runners
    assert settings.WORKFORCE_DELIVERY_ORG_TASKS == 2 * runners


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_releases_at_once_from_many_threads_send_each_delivery_once_and_never_wait_on_each_other(org, sent, settings):
    """Eight threads each settle a delivery and release in one transaction, as a finishing
    task does, until the flood is drained: every delivery is released exactly once, the
    organization's bound is never passed by more than the releases racing, and no thread
    waits on another's rows (SKIP LOCKED: no deadlock)."""
    settings.WORKFORCE_DELIVERY_SESSION_TASKS = 3
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 6
    flood = [pk for n in range(40) for pk in post(org, FLOOD, f"flood {n}")]
    others = [pk for n in range(10) for pk in post(org, OTHER, f"other {n}")]
    everything = set(flood + others)
    taken: set[int] = set()
    lock = threading.Lock()
    most_in_flight = [0]

    def worker(_n: int) -> int:
        done = 0
        try:
            while True:
                with lock:
                    ready = [pk for pk in sent if pk not in taken]
                    if not ready:
                        if taken >= everything:
                            return done
                        pk = None
                    else:
                        pk = ready[0]
                        taken.add(pk)
                if pk is None:
                    fairness.do_release_held_everywhere()  # a sweep, while others finish
                    continue
                with transaction.atomic():
                    Delivery.objects.filter(pk=pk).update(status="done")
                    fairness.do_release_deliveries(org.id)
                flying = Delivery.objects.filter(status="pending", enqueued_at__isnull=False).count()
                with lock:
                    most_in_flight[0] = max(most_in_flight[0], flying)
                done += 1
        finally:
            connection.close()

    finished = run_in_threads(worker, 8, timeout=120)
    assert sum(finished) == len(everything)
    assert sorted(sent) == sorted(everything) and len(sent) == len(set(sent))  # each released once
    assert most_in_flight[0] <= 6 + 8
    assert not held()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_released_delivery_held_for_a_moment_by_another_transaction_is_still_claimed_by_its_task(org, sent):
    """A release whose snapshot read a delivery as held locks its row while it rechecks it,
    until its transaction ends (PostgreSQL keeps the lock of a FOR UPDATE whose recheck
    failed). The delivery's task, claiming with SKIP LOCKED, found nothing and ended: the
    delivery sat released with no task until the sweep requeued it (minutes). Its task
    now claims again while the row is pending."""
    [first, _second] = post(org, FLOOD, "flood 0")
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(Delivery.objects.select_for_update().filter(pk=first))
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    threading.Timer(0.3, release.set).start()
    try:
        assert do_deliver(first) == "done"
    finally:
        release.set()
        holder.join()
    assert Delivery.objects.get(pk=first).status == "done"
    assert HEARD == ["flood 0"]


def release_statements(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().startswith("WITH") and "active AS" in q["sql"]]


def test_a_delivery_is_released_by_its_own_insert_when_nothing_is_held_and_there_is_room(org, sent):
    with CaptureQueriesContext(connection) as captured:
        [other] = post(org, OTHER, "my printer jams")
    assert sent == [other] and not held()
    assert release_statements(captured) == []  # no release statement after the INSERT
    assert Delivery.objects.get(pk=other).enqueued_at is not None
    flood = post(org, FLOOD, "flood 0")  # two members, the session's bound 2, the organization's 3: room for both
    assert sent == [other, *flood] and not held()


def test_a_post_past_the_bounds_in_its_insert_is_held_and_the_release_statement_decides(org, sent):
    with CaptureQueriesContext(connection) as captured:
        flood = [pk for n in range(2) for pk in post(org, FLOOD, f"flood {n}")]
    assert sent == flood[:2] and held() == flood[2:]
    assert len(release_statements(captured)) == 1  # the second post's, whose INSERT left both held


def test_a_post_while_deliveries_are_held_goes_behind_them_as_the_release_orders_it(org, sent, settings):
    """A delivery is released by its INSERT only when nothing is held in the organization:
    here the flood's next has the same turn and is older, so it gets the one place."""
    flood = [pk for n in range(3) for pk in post(org, FLOOD, f"flood {n}")]
    # the two in flight finish in a process that dies before it releases the next ones
    Delivery.objects.filter(pk__in=flood[:2]).update(status="done")
    settings.WORKFORCE_DELIVERY_ORG_TASKS = 1
    [other] = post(org, OTHER, "my printer jams")
    assert sent == [*flood[:2], flood[2]]
    assert other in held()
