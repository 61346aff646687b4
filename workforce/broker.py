"""The ORM broker, woken by PostgreSQL instead of a sleep (docs/architecture.md
"A post end to end", the task queue).

django-q2's ORM broker keeps each task as a row in the database (so a task enqueued
inside a transaction commits or rolls back with the rows it reads) and finds new rows
by polling: an empty queue sleeps ``Q_CLUSTER["poll"]`` (0.2 s) before it looks again,
which made the wait for that poll the largest single cost between a post's commit and
its seat's turn. On PostgreSQL this broker sends ``NOTIFY`` in the enqueue's own
transaction (PostgreSQL delivers it at commit, and drops it on rollback) and the
cluster's pusher waits on ``LISTEN`` instead of sleeping, so a committed task is
claimed at once. On SQLite (one machine) the enqueue sends a datagram at commit to the
pusher's local socket instead (``workforce.wakeups``). Nothing is lost when a wake-up
is: a pusher with nothing to claim still looks after ``Q_CLUSTER["poll"]``, then twice
as long each time up to ``WORKFORCE_BROKER_IDLE_SECONDS``, which also finds tasks whose
claim lapsed (``Q_CLUSTER["retry"]``).

Two more costs of django-q2's defaults are cut here, for both brokers:

- **Connections.** django-q2 closes "old" database connections before each task, each
  result it saves and each poll; with ``CONN_MAX_AGE = 0`` every one of those is a new
  PostgreSQL connection (about 7 ms for its first query against 0.3 ms warm, and about 5
  per post-and-wake). The cluster's processes keep theirs (``keep_connections``):
  ``CONN_MAX_AGE = WORKFORCE_CLUSTER_CONN_MAX_AGE`` with Django's health checks, so a
  connection that broke is replaced before its next use. It is switched on where
  django-q2's sentinel pings its broker, once as it starts and before it forks the
  workers, the monitor and the pusher, which inherit it; the sentinel closes every
  connection before each fork, so none is shared across one. The web process keeps its
  pool (``workforce_project.deployment.enable_web_pool``).
- **Claims and wake-ups.** On PostgreSQL a dequeue claims up to ``Q_CLUSTER["bulk"]``
  tasks in one statement (``FOR UPDATE SKIP LOCKED``, oldest first), and a transaction
  that enqueues many tasks (a fan-out to 25 members) wakes the pushers once: each
  enqueue's ``pg_notify`` rides its INSERT, and PostgreSQL delivers the transaction's
  identical notifications as one at commit.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import threading
from contextlib import contextmanager
from time import sleep
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connections, transaction
from django.utils import timezone
from django_q.brokers import Broker
from django_q.brokers.orm import ORM
from django_q.conf import Conf
from django_q.models import OrmQ

from .wakeups import QUEUE, Backoff, Waiter, listen_wait, wake

if TYPE_CHECKING:  # pragma: no cover
    import psycopg

logger = logging.getLogger(__name__)

CHANNEL = QUEUE  # the channel enqueues notify (workforce.wakeups)
OUTAGE_RETRY_SECONDS = 1.0  # between looks at the queue while the database is unreachable


def keep_connections(max_age: float | None = None) -> list[str]:
    """Make this process's database connections persistent, and those of the processes
    it forks from now on: ``CONN_MAX_AGE = max_age`` seconds (default
    ``WORKFORCE_CLUSTER_CONN_MAX_AGE``; 0 leaves the settings alone) and
    ``CONN_HEALTH_CHECKS`` on, for every database alias without a connection pool
    (Django refuses both at once). Connections already open keep the lifetime they had;
    Django's ``close_old_connections`` (which django-q2 calls before each task and each
    poll) closes one past its age or broken, and the next query opens another.

    Only for single-threaded task-cluster processes (each thread of a process holds its
    own connection): the ASGI web server, which runs each request in a thread of its
    own, uses the pool instead. Returns the aliases it changed."""
    age = float(settings.WORKFORCE_CLUSTER_CONN_MAX_AGE) if max_age is None else float(max_age)
    if age <= 0:
        return []
    changed = []
    for alias in connections:
        conf = connections.settings[alias]  # the dict every thread's connection reads
        if (conf.get("OPTIONS") or {}).get("pool"):
            continue
        conf["CONN_MAX_AGE"] = age
        conf["CONN_HEALTH_CHECKS"] = True
        changed.append(alias)
    return changed


_ORMQ = OrmQ._meta.db_table
_ENQUEUE = f'INSERT INTO "{_ORMQ}" ("key", "payload", "lock") VALUES (%s, %s, %s) RETURNING "id"'
# The pushers' notification rides the task row's own statement (delivered at commit,
# dropped with a rollback), so a wake-up costs no round trip of its own.
_ENQUEUE_AND_NOTIFY = f"WITH task AS ({_ENQUEUE}) SELECT task.id, pg_notify(%s, %s) FROM task"


class ClusterConnections(Broker):
    """A django-q2 broker whose ``ping`` also switches the calling process to persistent
    database connections (``keep_connections``). django-q2's sentinel pings its broker
    once as it starts, before it forks the cluster's workers, monitor and pusher; the
    ``qinfo``/``qmonitor`` commands ping too, harmlessly. A web process never pings."""

    def ping(self) -> bool:
        keep_connections()
        return super().ping()


_front = threading.local()  # .tasks: what to_the_front keeps for the head of the queue


@contextmanager
def to_the_front():
    """``with to_the_front():`` the tasks this thread enqueues on the Redis broker inside
    the block go to the head of the queue, in the order enqueued, when the block ends:
    work the broker lost (``workforce.broker_watch``) runs before what was enqueued
    after it, as it would have. Raises what the push raises (its rows are found again
    by the sweeps)."""
    kept: list[str] = []  # signed task payloads, as enqueue takes them
    _front.tasks = kept
    try:
        yield
    finally:
        _front.tasks = None
        broker = redis_broker() if kept else None
        if broker is not None:
            broker.connection.lpush(broker.list_key, *reversed(kept))


class ListeningORM(ClusterConnections, ORM):
    """django-q2's ORM broker; on PostgreSQL, ``enqueue`` notifies ``CHANNEL`` and an
    empty ``dequeue`` waits for that notification (at most
    ``WORKFORCE_BROKER_IDLE_SECONDS``) instead of sleeping ``Q_CLUSTER["poll"]``.

    Configured by ``Q_CLUSTER["broker_class"]`` whenever the ORM broker is in use. The
    listening connection is opened by the process that dequeues (the cluster's pusher),
    on its first empty dequeue, and opened again after a fork or an error.
    """

    def __init__(self, list_key: str | None = None):
        super().__init__(list_key=list_key)
        self._listener: psycopg.Connection | None = None
        self._listener_pid: int | None = None
        self._waiter: Waiter | None = None  # SQLite: the local wake-up (workforce.wakeups)
        self.idle = Backoff(float(Conf.POLL), float(settings.WORKFORCE_BROKER_IDLE_SECONDS))

    def ping(self) -> bool:
        """``ClusterConnections.ping``; in a cluster's sentinel, which pings once as it
        starts (``qinfo``/``qmonitor`` ping from their main process), also
        ``hand_back_taken``."""
        answer = super().ping()
        if multiprocessing.current_process().name != "MainProcess":
            try:
                self.hand_back_taken()
            except Exception:  # the database is down: the broker's retry hands them out later
                logger.warning("could not hand back the tasks a cluster before this one had taken", exc_info=True)
        return answer

    def hand_back_taken(self) -> int:
        """Hand out again now every task a cluster took from this queue and did not
        finish (its ``lock`` still in the future). A starting cluster is the only one on
        its database (``serve`` runs one; several machines share the Redis broker, not
        this one), so those tasks were taken by a cluster that is gone (killed, or its
        machine restarted) and would otherwise wait ``Q_CLUSTER["retry"]`` (180 s). The
        work's claims decide who runs it: a task handed out twice does nothing the
        second time. Returns the tasks handed back."""
        now = timezone.now()
        count = OrmQ.objects.using(Conf.ORM).filter(key=self.list_key, lock__gt=now).update(lock=now)
        if count:
            logger.warning("handed out again %s task(s) a cluster that is gone had taken", count)
        return count

    @staticmethod
    def _on_postgres() -> bool:
        return connections[Conf.ORM].vendor == "postgresql"

    def enqueue(self, task):
        """Write the task row and, on PostgreSQL, notify the pushers in the same
        transaction: one statement, the row's INSERT with its ``pg_notify``. PostgreSQL
        folds the notifications of one transaction with the same channel and payload
        into one, so a fan-out's many enqueues wake the pushers once. Returns the row's
        primary key. On SQLite, django-q2's enqueue."""
        if not self._on_postgres():
            pk = super().enqueue(task)
            wake(QUEUE, alias=Conf.ORM)  # at commit: the pusher on this machine claims it at once
            return pk
        connection = connections[Conf.ORM]
        if connection.get_autocommit():  # as django-q2's broker does: drop a broken connection first
            close_old_connections()
        key = self.list_key or Conf.CLUSTER_NAME
        with connection.cursor() as cursor:
            cursor.execute(_ENQUEUE_AND_NOTIFY, [key, task, timezone.now(), CHANNEL, key])
            return cursor.fetchone()[0]

    def dequeue(self):
        """Claim up to ``Q_CLUSTER["bulk"]`` waiting tasks, as django-q2's ORM broker
        does (a conditional UPDATE of each row's lock, so two clusters never claim one
        task). Returns ``[(pk, payload), ...]``, or None after waiting on an empty queue:
        until an enqueue's commit wakes it (``NOTIFY`` on PostgreSQL, a local datagram on
        SQLite: ``workforce.wakeups``) or ``self.idle`` runs out, which starts at
        ``Q_CLUSTER["poll"]`` after a claim and doubles on each empty look up to
        ``WORKFORCE_BROKER_IDLE_SECONDS``."""
        postgres = self._on_postgres()
        try:
            claimed = self._claim() if postgres else self._claim_portable()
        except (OperationalError, InterfaceError) as exc:
            # The database is unreachable. django-q2's pusher would sleep 10 s and end,
            # to be started again by the sentinel's next round: look again in a second
            # instead, so queued work resumes within a second of the database's return.
            logger.warning("the task queue cannot be read: the database is unreachable (%s)", " ".join(str(exc).split())[:200])
            with contextlib.suppress(Exception):
                connections[Conf.ORM].close()
            self.close_listener()
            self.idle.reset()
            sleep(OUTAGE_RETRY_SECONDS)
            return None
        if claimed:
            self.idle.reset()
            return claimed
        if postgres:
            self._wait(self.idle.next())
        else:
            if self._waiter is None:
                self._waiter = Waiter((QUEUE,), alias=Conf.ORM)
            self._waiter.wait(self.idle.next())
        return None

    def _claim_portable(self) -> list[tuple[int, str]]:
        """django-q2's ORM claim without its sleep: each of the oldest waiting tasks (at
        most ``Q_CLUSTER["bulk"]``) claimed by a conditional UPDATE of its lock."""
        tasks = self.get_connection().filter(key=self.list_key, lock__lt=timezone.now())[: Conf.BULK]
        return [
            (task.pk, task.payload)
            for task in tasks
            if self.get_connection().filter(id=task.id, lock=task.lock).update(lock=self.timeout(task))
        ]

    def wake_pusher(self) -> None:
        """Wake this queue's pusher now, whatever its wait (a stopping cluster: it then
        sees its stop event instead of finishing its idle wait). Never raises."""
        try:
            if self._on_postgres():
                from django.db import connection

                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, self.list_key or Conf.CLUSTER_NAME])
            else:
                wake(QUEUE, alias=Conf.ORM)
        except Exception:  # the database is down: the pusher stops after its idle wait
            logger.warning("could not wake the task queue's pusher", exc_info=True)

    def _claim(self) -> list[tuple[int, str]]:
        """One statement: the oldest waiting tasks (``lock`` in the past), at most
        ``Q_CLUSTER["bulk"]``, locked past the retry horizon. ``SKIP LOCKED`` keeps two
        pushers off each other's rows, and the ``lock`` it sets makes django-q2's own
        conditional claim (``lock`` unchanged) fail in a cluster that does not use this
        broker."""
        if transaction.get_autocommit(using=Conf.ORM):  # as django-q2's broker does: drop a broken connection first
            close_old_connections()
        now = timezone.now()
        table = connections[Conf.ORM].ops.quote_name(OrmQ._meta.db_table)
        with connections[Conf.ORM].cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET lock = %s WHERE id IN ("
                f"SELECT id FROM {table} WHERE key = %s AND lock < %s ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED"
                ") RETURNING id, payload",
                [self.timeout(None), self.list_key, now, max(1, int(Conf.BULK))],
            )
            return sorted(cursor.fetchall())

    def _wait(self, seconds: float) -> None:
        """Block until a notification arrives or ``seconds`` pass. A notification sent
        while this pusher was claiming is queued on the listening connection, so it ends
        the next wait at once: none is missed between the claim and the wait."""
        try:
            # One select on the socket (not psycopg's notifies(timeout=), which wakes ten
            # times a second); several queued notifications end one wait: one claim takes them all.
            listen_wait(self._listening(), seconds)
        except Exception:
            logger.warning("the task queue's LISTEN connection failed; polling until it is back", exc_info=True)
            self.close_listener()
            sleep(Conf.POLL)

    def _listening(self):
        if self._listener is not None and self._listener_pid == os.getpid() and not self._listener.closed:
            return self._listener
        import psycopg

        params = connections[Conf.ORM].get_connection_params()
        conninfo = psycopg.conninfo.make_conninfo(
            **{k: v for k, v in params.items() if k in ("dbname", "user", "password", "host", "port", "sslmode")}
        )
        listener = self._listener = psycopg.connect(conninfo, autocommit=True)
        self._listener_pid = os.getpid()
        listener.execute(f"LISTEN {CHANNEL}")
        return listener

    def close_listener(self) -> None:
        """Close the listening connection (it is opened again on the next wait)."""
        listener, self._listener = self._listener, None
        if listener is not None and self._listener_pid == os.getpid():
            try:
                listener.close()
            except Exception:
                pass


# ----------------------------------------------------------------------------- losses


def notify_pushers() -> None:
    """Wake the ORM broker's pushers now (PostgreSQL; delivered at commit): tasks whose
    lock was moved to the past are handed out at once, not at the next idle poll."""
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, Conf.CLUSTER_NAME])


def redis_broker():
    """The cluster's Redis broker, or None with another broker (the ORM one: the redis
    client is then never imported)."""
    if not settings.Q_CLUSTER.get("redis"):
        return None
    from django_q.brokers import get_broker
    from django_q.brokers.redis_broker import Redis

    broker = get_broker()
    return broker if isinstance(broker, Redis) else None


def redis_queued(func: str | None) -> set:
    """The first argument of every ``func`` task waiting in the Redis broker's list
    (empty for another broker, or when it cannot be read)."""
    from django_q.signing import SignedPackage

    broker = redis_broker()
    if broker is None or func is None:
        return set()
    queued = set()
    for payload in broker.connection.lrange(broker.list_key, 0, -1):
        try:
            task = SignedPackage.loads(payload)
        except Exception:  # not ours to judge
            continue
        if task.get("func") == func and task.get("args"):
            queued.add(task["args"][0])
    return queued
