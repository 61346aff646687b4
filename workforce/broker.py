"""The ORM broker, woken by PostgreSQL instead of a sleep (docs/architecture.md
"A post end to end", the task queue).

django-q2's ORM broker keeps each task as a row in the database (so a task enqueued
inside a transaction commits or rolls back with the rows it reads) and finds new rows
by polling: an empty queue sleeps ``Q_CLUSTER["poll"]`` (0.2 s) before it looks again,
which made the wait for that poll the largest single cost between a post's commit and
its seat's turn. On PostgreSQL this broker sends ``NOTIFY`` in the enqueue's own
transaction (PostgreSQL delivers it at commit, and drops it on rollback) and the
cluster's pusher waits on ``LISTEN`` instead of sleeping, so a committed task is
claimed at once. Nothing is lost when a notification is: an idle pusher still looks
every ``WORKFORCE_BROKER_IDLE_SECONDS``, which also finds tasks whose claim lapsed
(``Q_CLUSTER["retry"]``). On SQLite it is django-q2's ORM broker unchanged.
"""

from __future__ import annotations

import logging
import os
from time import sleep

from django.conf import settings
from django.db import connections
from django.utils import timezone
from django_q.brokers.orm import ORM
from django_q.conf import Conf

logger = logging.getLogger(__name__)

CHANNEL = "workforce_q"


class ListeningORM(ORM):
    """django-q2's ORM broker; on PostgreSQL, ``enqueue`` notifies ``CHANNEL`` and an
    empty ``dequeue`` waits for that notification (at most
    ``WORKFORCE_BROKER_IDLE_SECONDS``) instead of sleeping ``Q_CLUSTER["poll"]``.

    Configured by ``Q_CLUSTER["broker_class"]`` whenever the ORM broker is in use. The
    listening connection is opened by the process that dequeues (the cluster's pusher),
    on its first empty dequeue, and opened again after a fork or an error.
    """

    def __init__(self, list_key: str | None = None):
        super().__init__(list_key=list_key)
        self._listener = None
        self._listener_pid: int | None = None

    @staticmethod
    def _on_postgres() -> bool:
        return connections[Conf.ORM].vendor == "postgresql"

    def enqueue(self, task):
        """Write the task row and, on PostgreSQL, notify the pushers in the same
        transaction. Returns the row's primary key."""
        pk = super().enqueue(task)
        if self._on_postgres():
            with connections[Conf.ORM].cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, self.list_key or Conf.CLUSTER_NAME])
        return pk

    def dequeue(self):
        """Claim up to ``Q_CLUSTER["bulk"]`` waiting tasks, as django-q2's ORM broker
        does (a conditional UPDATE of each row's lock, so two clusters never claim one
        task). Returns ``[(pk, payload), ...]``, or None after waiting on an empty queue."""
        if not self._on_postgres():
            return super().dequeue()
        claimed = self._claim()
        if claimed:
            return claimed
        self._wait(float(settings.WORKFORCE_BROKER_IDLE_SECONDS))
        return None

    def _claim(self) -> list[tuple[int, str]]:
        rows = self.get_connection().filter(key=self.list_key, lock__lt=timezone.now())[0 : Conf.BULK]
        claimed = []
        for task in rows:
            if self.get_connection().filter(id=task.id, lock=task.lock).update(lock=self.timeout(task)):
                claimed.append((task.pk, task.payload))
            # else another pusher claimed it first
        return claimed

    def _wait(self, seconds: float) -> None:
        """Block until a notification arrives or ``seconds`` pass. A notification sent
        while this pusher was claiming is queued on the listening connection, so it ends
        the next wait at once: none is missed between the claim and the wait."""
        try:
            listener = self._listening()
            for _ in listener.notifies(timeout=seconds, stop_after=1):
                pass
            # Several notifications may have queued: one claim takes them all.
            for _ in listener.notifies(timeout=0):
                pass
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
        self._listener = psycopg.connect(conninfo, autocommit=True)
        self._listener_pid = os.getpid()
        self._listener.execute(f"LISTEN {CHANNEL}")
        return self._listener

    def close_listener(self) -> None:
        """Close the listening connection (it is opened again on the next wait)."""
        listener, self._listener = self._listener, None
        if listener is not None and self._listener_pid == os.getpid():
            try:
                listener.close()
            except Exception:
                pass
