"""An interrupted turn frees its seat at once (issue 22, item 11; ``workforce.holders``),
on SQLite and PostgreSQL: a hold names its holder's process, a dead holder's claims and
turn slots are released by the first sweep (a restarted worker runs it as it spawns), a
turn caught by a database outage releases what it held and runs again as soon as the
database answers, and a broker that lost its queue has its waiting work enqueued again
at once. The real cluster's runs are in ``tests/e2e/test_resume_cluster.py``."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from mailboxes import deliveries as deliveries_module
from mailboxes import tasks as mailbox_tasks
from mailboxes.deliveries import do_sweep_deliveries
from mailboxes.models import Delivery
from seats.models import TurnSlot, TurnWait
from tests.conftest import mailbox_md
from tests.seats.conftest import ECHO_LISTENER
from workforce import holders, leases
from workforce.holders import do_release_dead_holders, holder_alive, new_token
from workforce.llm import set_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST
from workforce.sweepers import run_sweeps
from workforce.testing import create_mock_model_resolver

REPO = Path(__file__).resolve().parents[2]
TREE = {
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md("Incidents.", members=("eng.lead",)),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
}
CONVERSATION = "eng.incidents:eng.lead"


def dead_token() -> str:
    """A hold token minted by a process that has ended (a killed worker's)."""
    out = subprocess.run(
        [sys.executable, "-c", "from workforce.holders import new_token; print(new_token())"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def turns(status: str | None = None):
    rows = Request.objects.filter(session__session_id=CONVERSATION, action=ON_MAILBOX_POST).order_by("pk")
    return rows.filter(status=status) if status else rows


def replies() -> list[str]:
    items = Item.objects.filter(session__session_id=CONVERSATION, type="message").order_by("seq")
    return [i.data["text"].rsplit(": ", 1)[-1] for i in items if i.data["role"] == "assistant"]


@pytest.fixture(autouse=True)
def no_broker_loss_noted():
    """Each test starts, and leaves, with no broker loss noted in this process."""
    leases.BROKER_LOST_AT.clear()
    yield
    leases.BROKER_LOST_AT.clear()


@pytest.fixture
def conversation(wired, post) -> Session:
    """eng.lead's conversation in eng.incidents, after one post it answered."""
    wired(TREE)
    post("eng.incidents", "post 1")
    return Session.objects.get(session_id=CONVERSATION)


@pytest.fixture
def queued(org, django_capture_on_commit_callbacks):
    """``queued(body) -> Delivery``: a client post committed with its delivery's task not
    run yet (as if it still waited in the broker)."""
    from workforce.sessions import do_run_action

    def _post(body: str) -> Delivery:
        import django_q.tasks

        with pytest.MonkeyPatch.context() as patch, django_capture_on_commit_callbacks(execute=False):
            patch.setattr(django_q.tasks, "async_task", lambda *a, **k: None)  # the broker holds it
            request = do_run_action(
                org=org, kind="mailbox", session_id="eng.incidents", action="post", input={"body": body}, user_id="u_42"
            )
        return Delivery.objects.get(post_id=request.output["id"])

    return _post


# ----------------------------------------------------------------------------- who holds


def test_a_token_names_its_holders_process_and_tells_when_it_is_gone():
    mine, gone = new_token(), dead_token()
    assert len(mine) == len(gone) == 32 and mine[:6] == gone[:6]  # this host
    assert holder_alive(mine) is True
    assert holder_alive(gone) is False
    assert holder_alive("f" * 32) is None  # another host: left to its lease
    assert holder_alive("") is None


# ----------------------------------------------------------------------------- a dead holder


@pytest.mark.django_db
def test_a_post_to_a_seat_whose_slot_a_dead_process_holds_runs_at_once(conversation, post):
    TurnSlot.objects.filter(session=conversation, seat_id="eng.lead").update(
        claim_token=dead_token(), lease_until=timezone.now() + timedelta(seconds=120)
    )
    post("eng.incidents", "post 2")
    assert turns("completed").count() == 2  # it did not wait out the dead turn's 120 s
    assert not TurnWait.objects.exists()


@pytest.mark.django_db
def test_the_first_sweep_frees_a_dead_workers_claim_and_slot_and_runs_its_work(
    conversation, queued, django_capture_on_commit_callbacks
):
    """A worker died mid-turn on post 2 (its delivery claimed, the slot held, both for
    another 120 s) while post 3 waited for the slot: the restarted worker's first sweep
    releases both, post 2 runs again and post 3 after it; nothing runs twice."""
    killed = dead_token()
    now = timezone.now()
    second, third = queued("post 2"), queued("post 3")
    Delivery.objects.filter(pk=second.pk).update(
        status="running", claim_token=killed, attempts=1, started_at=now, lease_until=now + timedelta(seconds=120)
    )
    slot = TurnSlot.objects.get(session=conversation, seat_id="eng.lead")
    TurnSlot.objects.filter(pk=slot.pk).update(claim_token=killed, lease_until=now + timedelta(seconds=120), waiting=1)
    TurnWait.objects.create(slot=slot, key="k3", task="mailboxes.tasks.deliver_post", args=[third.pk])
    Delivery.objects.filter(pk=third.pk).update(enqueued_at=now)  # its task waits in the queue

    with django_capture_on_commit_callbacks(execute=True):
        done = run_sweeps()
    assert done["dead holders"] == {"mailboxes.Delivery": 1, "seats.TurnSlot": 1}
    assert done["deliveries"].requeued == [second.pk]  # a lapsed claim: lost work, at once
    assert Delivery.objects.get(pk=second.pk).status == "done"
    assert Delivery.objects.get(pk=third.pk).status == "done"
    assert turns("completed").count() == 3
    assert replies() == ["post 1", "post 2", "post 3"]  # each once, in order
    assert do_release_dead_holders() == {}  # nothing left to release


@pytest.mark.django_db
def test_a_live_or_unknown_holder_is_left_to_its_lease(conversation, queued):
    now = timezone.now()
    for delivery, token in ((queued("post 2"), new_token()), (queued("post 3"), "f" * 32)):
        Delivery.objects.filter(pk=delivery.pk).update(
            status="running", claim_token=token, attempts=1, lease_until=now + timedelta(seconds=120)
        )
    assert do_release_dead_holders() == {}
    assert Delivery.objects.filter(status="running", lease_until__gt=now).count() == 2


# ----------------------------------------------------------------------------- a database outage


@pytest.mark.django_db(transaction=True)
def test_a_turn_caught_by_a_database_outage_frees_its_slot_and_runs_again(conversation, queued, monkeypatch):
    """The turn's settle meets the database gone (an OperationalError, as a terminated
    connection raises): the task waits for the database, lets its claim and slot lapse
    and runs the delivery again in the same task, instead of failing it or holding the
    seat for the lease."""
    delivery = queued("post 2")
    real_settle = deliveries_module._settle
    calls = []

    def settle(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("terminating connection due to administrator command")
        return real_settle(*args, **kwargs)

    monkeypatch.setattr(deliveries_module, "_settle", settle)
    assert mailbox_tasks.deliver_post(delivery.pk) == "done"
    row = Delivery.objects.get(pk=delivery.pk)
    assert (row.status, row.attempts) == ("done", 2)
    slot = TurnSlot.objects.get(session=conversation, seat_id="eng.lead")
    assert slot.claim_token == ""
    assert [t.status for t in turns()] == ["completed", "aborted", "completed"]
    assert replies() == ["post 1", "post 2"]  # written once


@pytest.mark.django_db(transaction=True)
def test_a_task_that_outlives_the_outage_budget_is_enqueued_again_by_its_process(conversation, queued, monkeypatch):
    delivery = queued("post 2")
    monkeypatch.setattr(holders, "wait_for_database", lambda deadline, **kw: False)
    monkeypatch.setattr(deliveries_module, "_settle", lambda *a, **k: (_ for _ in ()).throw(OperationalError("gone")))
    assert mailbox_tasks.deliver_post(delivery.pk) == "outage"
    monkeypatch.undo()
    assert holders.take_retries() == [("mailboxes.tasks.deliver_post", (delivery.pk,))]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_terminated_connection_mid_turn_is_survived_on_postgres(conversation, queued):
    """A real blip: the seat's model call ends its worker's PostgreSQL connection
    (``pg_terminate_backend`` from another session); the turn's next statement fails,
    and the task resumes once the database answers."""
    import psycopg

    delivery = queued("post 2")
    params = connection.get_connection_params()
    conninfo = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if k in ("dbname", "user", "host", "port")})
    backend = connection.cursor().connection.info.backend_pid
    killed = []

    def answer(call):
        if not killed:
            with psycopg.connect(conninfo, autocommit=True) as other:
                other.execute("SELECT pg_terminate_backend(%s)", [backend])
            killed.append(backend)
        return "noted"

    set_model_resolver(create_mock_model_resolver({"eng.lead": answer}))
    assert mailbox_tasks.deliver_post(delivery.pk) == "done"
    assert killed
    assert Delivery.objects.get(pk=delivery.pk).status == "done"
    assert TurnSlot.objects.get(session=conversation, seat_id="eng.lead").claim_token == ""
    assert turns("completed").count() == 2


# ----------------------------------------------------------------------------- a broker that lost its queue


@pytest.mark.django_db
def test_work_waiting_in_a_broker_that_lost_its_queue_is_enqueued_again_at_once(conversation, queued, monkeypatch):
    from workforce import broker as broker_module

    now = timezone.now()
    first, second = queued("post 2"), queued("post 3")
    Delivery.objects.filter(pk__in=[first.pk, second.pk]).update(enqueued_at=now - timedelta(seconds=2))
    monkeypatch.setattr(deliveries_module, "enqueue", lambda *a: None)
    assert do_sweep_deliveries(now=now).requeued == []  # waiting in a backlog: left alone
    monkeypatch.setattr(broker_module, "redis_queued", lambda func: {second.pk})  # still in the list
    leases.note_broker_lost(now)
    assert do_sweep_deliveries(now=now).requeued == [first.pk]
    assert do_sweep_deliveries(now=now).requeued == []  # once


REDIS_URL = "redis://127.0.0.1:6379/11"


@pytest.fixture
def redis_broker_11(monkeypatch):
    """A Redis broker on db 11 (this helper's), flushed before and after."""
    redis = pytest.importorskip("redis")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except Exception:
        pytest.skip("no Redis on 127.0.0.1:6379")
    client.flushdb()

    class Broker:
        connection = client
        list_key = "django_q:workforce:q"

    from workforce import broker_watch

    monkeypatch.setattr(broker_watch, "redis_broker", lambda: Broker)
    yield client
    client.flushdb()
    client.close()


@pytest.mark.django_db
def test_the_broker_watch_notices_a_flushed_queue_once(redis_broker_11, monkeypatch):
    from workforce import broker_watch

    ran = []
    monkeypatch.setattr(broker_watch, "run_all_sweeps", lambda: ran.append(1) or {})
    assert broker_watch.do_watch_broker() == {"lost": True, "requeued": {}}  # a queue never marked: lost
    assert broker_watch.do_watch_broker() is None
    assert broker_watch.do_watch_broker() is None
    redis_broker_11.flushdb()  # the broker lost its queue
    assert broker_watch.do_watch_broker() == {"lost": True, "requeued": {}}
    assert ran == [1, 1] and leases.broker_lost_at() is not None


def test_what_the_broker_lost_goes_back_to_the_head_of_its_queue_in_order(redis_broker_11, monkeypatch):
    from workforce import broker as broker_module
    from workforce import broker_watch

    monkeypatch.setattr(broker_module, "redis_broker", broker_watch.redis_broker)
    key = "django_q:workforce:q"
    redis_broker_11.rpush(key, "enqueued after the loss")
    from workforce.broker_redis import ClusterRedis  # apart, so an ORM-broker server never imports redis

    cluster = ClusterRedis.__new__(ClusterRedis)
    with broker_module.to_the_front():
        for task in ("lost 1", "lost 2", "lost 3"):
            cluster.enqueue(task)
        assert redis_broker_11.llen(key) == 1  # kept until the block ends
    assert redis_broker_11.lrange(key, 0, -1) == [b"lost 1", b"lost 2", b"lost 3", b"enqueued after the loss"]


# ----------------------------------------------------------------------------- the ORM broker


@pytest.mark.django_db
def test_a_lapsed_claims_task_in_the_orm_broker_is_handed_out_again_now():
    from django_q.models import OrmQ

    now = timezone.now()
    held = OrmQ.objects.create(key="workforce", payload="x", lock=now + timedelta(seconds=180))
    waiting = OrmQ.objects.create(key="workforce", payload="y", lock=now - timedelta(seconds=5))
    assert leases.orm_hand_out_now([held.pk, waiting.pk], now=now) == 1
    assert OrmQ.objects.get(pk=held.pk).lock < now


@pytest.mark.django_db
def test_a_starting_cluster_hands_out_again_what_a_cluster_before_it_had_taken():
    """A cluster killed with tasks in its workers' hands: the ORM broker keeps them
    locked for its ``retry`` (180 s); the next cluster's sentinel hands them out at once."""
    from django_q.models import OrmQ

    from workforce.broker import ListeningORM

    broker = ListeningORM()
    now = timezone.now()
    taken = OrmQ.objects.create(key=broker.list_key, payload="x", lock=now + timedelta(seconds=170))
    waiting = OrmQ.objects.create(key=broker.list_key, payload="y", lock=now - timedelta(seconds=1))
    other = OrmQ.objects.create(key="another-queue", payload="z", lock=now + timedelta(seconds=170))
    assert broker.hand_back_taken() == 1
    assert OrmQ.objects.get(pk=taken.pk).lock <= timezone.now()
    assert OrmQ.objects.get(pk=waiting.pk).lock == now - timedelta(seconds=1)
    assert OrmQ.objects.get(pk=other.pk).lock > timezone.now()
