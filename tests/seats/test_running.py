"""Running it (spec "Waking agent seats"): boot hires the tree's seats and wires the notify
block; cluster workers boot the same way and sweep dropped deliveries; the turn's
deadline fits inside the cluster's timeout."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from mailboxes.deliveries import do_deliver, do_sweep_deliveries
from mailboxes.models import Delivery
from mailboxes.notify import WakeMemberSeats
from mailboxes.roster import current_roster
from seats.checks import check_turn_timeout, check_workers
from seats.hiring import WorkerTreeError
from seats.models import Seat
from tests.conftest import MEMBER
from tests.seats.conftest import ECHO_LISTENER, SEATS_TREE, worker_md
from workforce import sweepers as sweeper
from workforce.flows import registry
from workforce.models import Request
from workforce.runtime import ensure_booted, is_booted, mark_booted
from workforce.sessions import do_run_action
from workforce_project.boot import boot

BOOTED = []


def record_boot():
    BOOTED.append(True)


def test_boot_hires_the_tree_and_wires_the_notify_block(make_tree, db):
    root = make_tree(SEATS_TREE)
    mark_booted(False)
    roster = boot(root)
    assert is_booted()
    assert [m.id for m in roster.mailboxes] == ["eng.incidents", "eng.standup"] and current_roster() is roster
    assert sorted(Seat.objects.values_list("seat_id", "scope")) == [("eng.analyst", "shared"), ("eng.lead", "shared")]
    notify = registry.require("mailbox").facets["notify"]
    assert isinstance(notify, WakeMemberSeats)
    assert sorted(s.seat_id for s in notify.seats) == ["eng.analyst", "eng.lead"]
    boot(root)  # every process boots the same way: hiring again changes nothing
    assert Seat.objects.count() == 2


def test_boot_refuses_a_bad_worker_tree_naming_every_problem(make_tree, db):
    root = make_tree(
        {
            **SEATS_TREE,
            "teams/eng/workers/lead/WORKER.md": worker_md(tools="[send-email]"),
            "teams/eng/workers/Nope/WORKER.md": ECHO_LISTENER,
        }
    )
    with pytest.raises(WorkerTreeError) as refused:
        boot(root)
    text = str(refused.value)
    assert "teams/eng/workers/Nope" in text and 'eng.lead: tools: names "send-email"' in text
    assert not Seat.objects.exists()


def test_the_example_tree_boots_and_its_seats_answer_a_post(settings, db, django_capture_on_commit_callbacks, org):
    from mailboxes.models import Line
    from workforce_project.boot import open_roster

    roster = boot(settings.WORKFORCE_ROOT)
    open_roster(roster)
    with django_capture_on_commit_callbacks(execute=True):
        # support.standup: every hearing member is woken (support.desk is routed:
        # tests/routing/test_example_desk.py).
        do_run_action(
            org=org,
            kind="mailbox",
            session_id="support.standup",
            action="post",
            input={"body": "My laptop won't charge."},
            user_id="u_42",
        )
    lines = list(Line.objects.filter(session__session_id="support.standup").order_by("seq"))
    assert lines[0].body == "My laptop won't charge."
    answers = {ln.author: ln.body for ln in lines[1:]}
    assert set(answers) == {"support.devices", "support.accounts", "support.general"}  # the lead only listens
    assert answers["support.devices"] == "support.devices heard: workforce in support.standup: My laptop won't charge."


def test_ensure_booted_runs_the_configured_boot_once(settings):
    BOOTED.clear()
    settings.WORKFORCE_BOOT = "tests.seats.test_running.record_boot"
    mark_booted(False)
    assert ensure_booted() is True
    assert ensure_booted() is False
    assert BOOTED == [True]


def test_a_cluster_worker_boots_and_starts_its_sweeper_on_spawn(settings, monkeypatch):
    BOOTED.clear()
    started = []
    settings.WORKFORCE_BOOT = "tests.seats.test_running.record_boot"
    mark_booted(False)
    monkeypatch.setattr(sweeper, "start_sweeper", lambda interval=None: started.append(True))
    sweeper.on_worker_spawn(sender="django_q", proc_name="Process-1")  # sync (tests): nothing
    assert BOOTED == [] and started == []
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", False)
    sweeper.on_worker_spawn(sender="django_q", proc_name="Process-1")
    assert BOOTED == [True] and started == [True]


def test_the_turn_deadline_fits_inside_the_cluster_timeout(settings):
    settings.Q_CLUSTER = {"timeout": 120, "retry": 180, "max_attempts": 3}
    settings.WORKFORCE_TURN_TIMEOUT = 100
    assert check_turn_timeout() == []
    settings.WORKFORCE_TURN_TIMEOUT = 120
    [error] = check_turn_timeout()
    assert error.id == "seats.E003" and "120" in error.msg
    settings.Q_CLUSTER = {"timeout": 120, "retry": 180, "max_attempts": 3, "sync": True}
    assert check_turn_timeout() == []


def test_the_example_tree_passes_the_worker_check():
    assert check_workers() == []


# ---------------------------------------------------------------- sweeping


def queued_post(org, django_capture_on_commit_callbacks, body="hi"):
    with django_capture_on_commit_callbacks(execute=False):  # the tasks are "lost"
        do_run_action(org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": body}, user_id=MEMBER)


def test_a_pending_delivery_the_broker_lost_is_enqueued_again(wired, org, django_capture_on_commit_callbacks, settings):
    wired()
    queued_post(org, django_capture_on_commit_callbacks)
    assert do_sweep_deliveries().requeued == []  # just enqueued: the broker still has it
    later = timezone.now() + timedelta(seconds=settings.Q_CLUSTER["retry"] + 1)
    with django_capture_on_commit_callbacks(execute=True):
        result = do_sweep_deliveries(now=later)
    assert len(result.requeued) == 2
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_deliveries(now=later).requeued == []  # a second sweeper finds nothing


def test_a_lapsed_claim_is_run_again_and_the_dead_turn_is_aborted(wired, org, django_capture_on_commit_callbacks):
    wired()
    queued_post(org, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(member="eng.lead")
    # a worker claimed it, started the turn, and died
    dead = Request.objects.create(
        organization=org, session=delivery.mailbox, action="onMailboxPost", user_id="x", status="running"
    )
    Delivery.objects.filter(pk=delivery.pk).update(
        status="running", attempts=1, turn_request=dead, lease_until=timezone.now() + timedelta(seconds=60)
    )
    assert do_deliver(delivery.pk) == "not-claimed"  # the claim still holds
    assert do_sweep_deliveries().requeued == []
    Delivery.objects.filter(pk=delivery.pk).update(
        lease_until=timezone.now() - timedelta(seconds=1), enqueued_at=timezone.now() - timedelta(hours=1)
    )
    with django_capture_on_commit_callbacks(execute=True):
        assert do_sweep_deliveries().requeued == [delivery.pk]
    delivery.refresh_from_db()
    dead.refresh_from_db()
    assert delivery.status == "done" and delivery.attempts == 2
    assert dead.status == "aborted" and dead.error["reason"] == "aborted"
    turns = Request.objects.filter(session__session_id="eng.incidents:eng.lead", action="onMailboxPost")
    assert [t.status for t in turns] == ["completed"]


def test_a_delivery_that_never_finishes_is_given_up_and_recorded(wired, org, django_capture_on_commit_callbacks, settings):
    wired()
    queued_post(org, django_capture_on_commit_callbacks)
    delivery = Delivery.objects.get(member="eng.lead")
    Delivery.objects.filter(pk=delivery.pk).update(
        status="running", attempts=settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS, lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert do_deliver(delivery.pk) == "not-claimed"
    result = do_sweep_deliveries()
    assert result.abandoned == [delivery.pk]
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.error["reason"] == "delivery-abandoned"
    [record] = Request.objects.filter(session__session_id="eng.incidents", action="deliverPost")
    assert record.error["reason"] == "delivery-abandoned" and "eng.lead" in record.error["message"]


def test_ensure_booted_with_the_real_boot_process(make_tree, settings, db):
    """What a cluster worker runs on spawn: boot_process -> boot -> mark_booted, under
    ensure_booted's lock (it must not deadlock on itself)."""
    settings.WORKFORCE_ROOT = str(make_tree(SEATS_TREE))
    settings.WORKFORCE_BOOT = "workforce_project.boot.boot_process"
    mark_booted(False)
    assert ensure_booted() is True and is_booted()
    assert isinstance(registry.require("mailbox").facets["notify"], WakeMemberSeats)
    assert Seat.objects.count() == 2
