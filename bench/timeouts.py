"""How soon the server gives up, or wakes: the six durations the tests once bounded with a
wall clock (the tests keep what happens; how soon is measured here).

    python bench/timeouts.py [--runs 5]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres python bench/timeouts.py

Figures, each the median and max of ``--runs`` runs (after one warm-up run), against the
bound the test had:

- scripted model timeout: the scripted model told to sleep 5 s with a 0.1 s timeout
  raises ``no answer within 0.1s`` (bound 2 s);
- OpenAI model timeout: a chat call with a 0.5 s timeout to a loopback server that accepts
  and never answers raises ``no answer within 0.5s`` (bound 2.5 s);
- stale vault lock: a comment on a vault whose branch lock a killed writer left 60 s ago
  (cleared, then written; bound 5 s, against ~11 s of tries ending in vault-unavailable);
- pool refusal: ``OutageAwarePool.getconn`` while the database refuses connections raises
  PoolTimeout (bound 2 s, against the pool's 10 s timeout);
- wait, finished: ``GET /api/requests/<id>?wait=30`` on a completed request (bound 5 s);
- broker wake (PostgreSQL only): an empty ``ListeningORM.dequeue`` woken by another
  process's commit, measured from the enqueue (bound 10 s, against its 30 s idle wait).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import throwaway_database  # noqa: E402

Measure = Callable[[], float]


def timed(call: Callable[[], object], expect: type[BaseException] | None = None) -> float:
    """Seconds ``call()`` took; with ``expect``, it must raise that (and only that)."""
    started = time.monotonic()
    if expect is None:
        call()
    else:
        try:
            call()
        except expect:
            pass
        else:
            raise AssertionError(f"expected {expect.__name__}")
    return time.monotonic() - started


def scripted_timeout() -> float:
    from workforce.llm import ModelCall, ModelError, ScriptedModel

    messages = [{"role": "user", "content": "x in y: slower\n/sleep 5000"}]
    call = ModelCall(block="support.devices", messages=messages, tools=[], timeout=0.1)
    return timed(lambda: ScriptedModel().complete(call), ModelError)


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A loopback port that accepts connections and never answers; yields the port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()


def openai_timeout() -> float:
    from django.test import override_settings

    from workforce.llm import ModelCall, ModelError, OpenAIChatModel

    with silent_server() as port, override_settings(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1"):
        call = ModelCall(block="support.devices", messages=[{"role": "user", "content": "hi"}], tools=[], timeout=0.5)
        return timed(lambda: OpenAIChatModel("fake-model").complete(call), ModelError)


def stale_vault_lock() -> float:
    from mail.constants import LABEL_NEW
    from mail.vault import VaultStore

    store = VaultStore(Path(tempfile.mkdtemp(prefix="wf_bench_vaults_")), notify=False)
    store.create_issue("default", "eng.alpha", title="One", body="b1", labels=[LABEL_NEW])
    lock = store.path("default", "eng.alpha") / "refs" / "heads" / "main.lock"
    lock.write_bytes(b"0" * 40 + b"\n")
    past = time.time() - 60
    os.utime(lock, (past, past))
    took = timed(lambda: store.comment("default", "eng.alpha", 1, "after the kill"))
    assert not lock.exists()
    return took


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pool_refusal() -> float:
    from psycopg_pool import PoolTimeout

    from workforce_project.db_pool import OutageAwarePool

    params = {"host": "127.0.0.1", "port": _closed_port(), "dbname": "none", "user": "postgres", "autocommit": True}
    pool = OutageAwarePool(kwargs=params, min_size=1, max_size=2, timeout=10, reconnect_timeout=3, open=True)
    try:
        return timed(pool.getconn, PoolTimeout)
    finally:
        pool.close()


def wait_finished() -> Measure:
    """A completed request in a fresh organization; the measure reads it with ``?wait=30``."""
    from django.utils import timezone
    from rest_framework.test import APIClient

    from workforce.models import Organization, Request, Session

    org, _ = Organization.objects.get_or_create(id="default", defaults={"name": "default"})
    session = Session.objects.create(organization=org, session_id="bench.wait", flow_kind="mailbox", user_id="u_bench")
    row = Request.objects.create(
        organization=org,
        session=session,
        request_id="req_bench_wait",
        action="post",
        user_id="u_bench",
        status=Request.Status.COMPLETED,
        finished_at=timezone.now(),
    )
    client = APIClient(SERVER_NAME="127.0.0.1")  # a host ALLOWED_HOSTS lists

    def measure() -> float:
        started = time.monotonic()
        answer = client.get(f"/api/requests/{row.request_id}?wait=30&userId=u_bench")
        took = time.monotonic() - started
        assert answer.status_code == 200 and answer.json()["status"] == "completed", answer.content
        return took

    return measure


def broker_wake() -> float:
    from django.db import connection
    from django.test import override_settings

    from workforce.broker import ListeningORM

    with override_settings(WORKFORCE_BROKER_IDLE_SECONDS=30):
        broker = ListeningORM(list_key="bench-timeouts")
        broker._listening()  # a pusher that has waited once: it listens before the enqueue
        enqueued: list[float] = []

        def enqueue_later() -> None:
            time.sleep(0.5)
            ListeningORM(list_key="bench-timeouts").enqueue("task-1")
            enqueued.append(time.monotonic())
            connection.close()

        thread = threading.Thread(target=enqueue_later)
        thread.start()
        deadline = time.monotonic() + 40
        claimed: list = []
        while not claimed and time.monotonic() < deadline:
            claimed = broker.dequeue() or []
        woke = time.monotonic()
        thread.join()
        broker.close_listener()
        assert [payload for _, payload in claimed] == ["task-1"], claimed
        for task_id, _ in claimed:
            broker.acknowledge(task_id)
        return woke - enqueued[0]


def samples(measure: Measure, runs: int) -> list[float]:
    """``runs`` figures of ``measure``, after one warm-up run (imports, the URL resolver,
    the first connection), which is not counted."""
    measure()
    return [measure() for _ in range(runs)]


def report(name: str, samples: list[float], bound: float, against: str) -> bool:
    median, worst = statistics.median(samples), max(samples)
    ok = worst <= bound
    print(
        f"{name:24} median {median * 1000:8.1f} ms  max {worst * 1000:8.1f} ms  "
        f"(bound {bound:g} s; {against})  {'meets' if ok else 'MISSES'}"
    )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with throwaway_database() as connection:
        results = [
            report("scripted model timeout", samples(scripted_timeout, args.runs), 2, "timeout 0.1 s"),
            report("OpenAI model timeout", samples(openai_timeout, args.runs), 2.5, "timeout 0.5 s"),
            report("stale vault lock", samples(stale_vault_lock, args.runs), 5, "~11 s of tries"),
            report("pool refusal", samples(pool_refusal, args.runs), 2, "the pool's 10 s"),
            report("wait, finished", samples(wait_finished(), args.runs), 5, "?wait=30"),
        ]
        if connection.vendor == "postgresql":
            results.append(report("broker wake", samples(broker_wake, args.runs), 10, "its 30 s idle wait"))
        else:
            print(f"{'broker wake':24} (PostgreSQL only: set DATABASE_URL=postgres://…)")
    print(f"verdict: {'all within their bounds' if all(results) else 'a figure misses its bound'}")


if __name__ == "__main__":
    main()
