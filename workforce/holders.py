"""Who holds a claim, and freeing what a dead or interrupted holder held at once
(docs/workers.md "Workers and seats"; issue 22, item 11).

Every hold on a row of work (a lease on a ``LeasedWork`` row, a board row's claim, a
seat's turn slot) is a token the holder minted with ``new_token()``: 32 hex digits, the
first 20 the **holder's process identity** (a digest of the host, 6; the pid, 6; the
process's start time, 8) and 12 random. A process on the same host reads from a token
whether its holder still runs (``holder_alive``: ``/proc/<pid>`` with the same start
time), so:

- **a dead holder's holds are released at once** (``do_release_dead_holders``): every
  cluster worker runs it when it spawns (a restarted worker, or the cluster after a
  restart) and on every sweep; it makes each hold of a holder that is gone lapse now, as
  if its lease had run out, and the apps' sweeps then recover it by their usual rule (a
  lapsed claim is lost work, enqueued again at once; a lapsed turn slot wakes who waits).
  A holder on another host is left to its lease.
- **a task caught by a database outage releases its own holds** (``outage_safe``): the
  task waits for the database, makes the holds it minted lapse, and runs again in the
  same task, so its work resumes as soon as the database answers; one that outlives the
  outage's budget leaves its task to this process's sweeper (``take_retries``).

Every hold is a ``workforce.models.Lease`` row; its table registers with ``register_leased`` (the apps'
``ready``); the kernel never imports them.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import wraps
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    from .models import Lease

logger = logging.getLogger(__name__)

HOST_DIGITS, PID_DIGITS, START_DIGITS = 6, 6, 8
IDENTITY_DIGITS = HOST_DIGITS + PID_DIGITS + START_DIGITS  # 20
TOKEN_DIGITS = 32


def _host_key() -> str:
    """This machine as 6 hex digits: its host name, its boot id (a reboot is another
    host: no pid of before it runs) and its pid namespace: two containers on one kernel
    may share a host name (with host networking they take the machine's), and neither
    sees the other's pids, so each must take the other's holds for another host's."""
    try:
        boot = open("/proc/sys/kernel/random/boot_id").read().strip()
    except OSError:
        boot = ""
    try:
        pids = os.readlink("/proc/self/ns/pid")
    except OSError:
        pids = ""
    return hashlib.sha256(f"{socket.gethostname()}|{boot}|{pids}".encode()).hexdigest()[:HOST_DIGITS]


def _start_ticks(pid: int) -> int | None:
    """Process ``pid``'s start time (clock ticks since boot, ``/proc/<pid>/stat`` field
    22), or None when it does not run (or this system has no ``/proc``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def process_identity() -> str:
    """This process's 20-hex-digit identity: host, pid, start time (a forked child has
    its own)."""
    return _identity_of(os.getpid())


@functools.lru_cache(maxsize=8)
def _identity_of(pid: int) -> str:
    start = _start_ticks(pid)
    return f"{_host_key()}{pid & 0xFFFFFF:0{PID_DIGITS}x}{(start or 0) & 0xFFFFFFFF:0{START_DIGITS}x}"


def new_token() -> str:
    """A fresh hold token (32 hex digits): this process's identity, then 12 random. It
    fits every token column (32 or more characters). Noted in this thread's ledger when
    one is open (``outage_safe``)."""
    token = process_identity() + uuid.uuid4().hex[: TOKEN_DIGITS - IDENTITY_DIGITS]
    ledger = getattr(_local, "ledger", None)
    if ledger is not None:
        ledger.add(token)
    return token


def holder_alive(token: str) -> bool | None:
    """Whether the process that minted ``token`` still runs: True or False for a holder
    on this host, None when it cannot be told (another host, or a token of another
    shape, minted before identities were recorded)."""
    if not token or len(token) != TOKEN_DIGITS or token[:HOST_DIGITS] != process_identity()[:HOST_DIGITS]:
        return None
    try:
        pid = int(token[HOST_DIGITS : HOST_DIGITS + PID_DIGITS], 16)
        start = int(token[HOST_DIGITS + PID_DIGITS : IDENTITY_DIGITS], 16)
    except ValueError:
        return None
    if pid == os.getpid() and token[:IDENTITY_DIGITS] == process_identity():
        return True
    ticks = _start_ticks(pid)
    return ticks is not None and (ticks & 0xFFFFFFFF) == start


# ----------------------------------------------------------------------------- the tables of holds


@dataclass(frozen=True)
class Holds:
    """How one ``workforce.models.Lease`` table holds work: ``held`` selects its rows
    under a hold; the token is ``claim_token`` and a lapse moves ``lease_until``
    (``lapse_leases``), in every table."""

    model: type[Lease]
    held: Q


_holds: dict[str, Holds] = {}


def register_leased(model: type[Lease], *, held: Q | None = None) -> None:
    """Let ``do_release_dead_holders`` and ``outage_safe`` release the holds of the
    ``workforce.models.Lease`` table ``model``: the rows ``held`` selects (default:
    running with a token, a ``LeasedWork`` row), by their ``claim_token``, lapsed by
    ``lapse_leases`` so that the table's own sweep or next claim recovers them as it
    recovers a lease that ran out. Every hold in the server is registered this way:
    leased work (``workforce.apps``), board rows (``boards.apps``), turn slots
    (``seats.apps``)."""
    _holds[model._meta.label] = Holds(model, held if held is not None else Q(status="running") & ~Q(claim_token=""))


def lapse_leases(rows: models.QuerySet[Any], now: datetime) -> int:
    """Make the leases of the ``Lease`` rows ``rows`` selects lapse as of ``now``
    (``lease_until`` just before it). Returns the rows changed."""
    return rows.update(lease_until=now - timedelta(microseconds=1))


def registered_holds() -> list[Holds]:
    """The registered tables of holds, in registration order."""
    return list(_holds.values())


def _lapse_tokens(tokens: set[str] | None, *, now: datetime, dead_only: bool) -> dict[str, int]:
    released: dict[str, int] = {}
    for holds in _holds.values():
        manager = holds.model._meta.default_manager
        assert manager is not None  # a concrete table
        rows = manager.filter(holds.held)
        if tokens is not None:
            rows = rows.filter(claim_token__in=tokens)
        found = set(rows.values_list("claim_token", flat=True))
        gone = {t for t in found if holder_alive(t) is False} if dead_only else found
        if gone:
            count = lapse_leases(manager.filter(holds.held, claim_token__in=gone), now)
            if count:
                released[holds.model._meta.label] = count
    return released


def do_release_dead_holders(*, now: datetime | None = None) -> dict[str, int]:
    """Make every hold whose holder process on this host is gone lapse now, in every
    registered table (a killed worker's claims and turn slots). Idempotent and safe from
    several processes (each lapse is a conditional UPDATE on the held rows).

    Returns:
        ``{table label: holds released}`` (empty when none).
    """
    released = _lapse_tokens(None, now=now or timezone.now(), dead_only=True)
    if released:
        logger.warning("released the holds of processes that are gone: %s", released)
    return released


# ----------------------------------------------------------------------------- outages

_local = threading.local()  # .ledger: the tokens the running task minted
_retry_lock = threading.Lock()
_retries: list[tuple[str, tuple]] = []  # tasks that gave up during an outage, to enqueue again


def is_outage(exc: BaseException) -> bool:
    """True for a database error that says the database could not be reached (a
    connection refused, closed or terminated), not that a statement was wrong."""
    return isinstance(exc, (OperationalError, InterfaceError))


def database_answers() -> bool:
    """One ``SELECT 1`` on a fresh connection: True when the database answers."""
    try:
        connection.close()
    except Exception:
        pass
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        try:
            connection.close()
        except Exception:
            pass
        return False


def wait_for_database(deadline: float, *, every: float = 0.25) -> bool:
    """Poll the database until it answers (True) or ``deadline`` (``time.monotonic``)
    passes (False)."""
    while True:
        if database_answers():
            return True
        if time.monotonic() + every >= deadline:
            return False
        time.sleep(every)


def outage_budget() -> float:
    """Seconds a task may wait for the database before it gives up: the cluster's
    ``timeout`` less a margin, so the cluster never kills it while it waits."""
    return max(1.0, float(settings.Q_CLUSTER.get("timeout") or 60) - 3.0)


def outage_safe(task: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a task body (``task``: its dotted path, to enqueue it again) so a
    database outage interrupts it safely: on an outage error the task waits for the
    database (at most ``outage_budget()`` from its start), makes every hold it minted
    lapse (``new_token``'s ledger: its claims and turn slots, whether their commit
    reached the database or not), and runs again. Past the budget it returns
    ``"outage"`` and leaves its task to this process's sweeper, which enqueues it again
    once the database answers (``take_retries``). Other exceptions propagate."""

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(body)
        def run(*args: Any) -> Any:
            deadline = time.monotonic() + outage_budget()
            while True:
                outer = getattr(_local, "ledger", None)
                _local.ledger = ledger = set[str]()
                try:
                    return body(*args)
                except Exception as exc:
                    if not is_outage(exc) or connection.in_atomic_block:
                        raise
                    logger.warning("%s%s met a database outage (%s); waiting for the database", task, list(args), exc)
                finally:
                    _local.ledger = outer
                    if outer is not None:
                        outer.update(ledger)
                if not wait_for_database(deadline) or not _release_own(ledger):
                    with _retry_lock:
                        _retries.append((task, args))
                    logger.warning("%s%s gave up waiting for the database; its process enqueues it again later", task, list(args))
                    return "outage"

        return run

    return decorate


def _release_own(tokens: set[str]) -> bool:
    """Make the holds minted with ``tokens`` lapse (they belong to a run that ended).
    False when the database failed again."""
    if not tokens:
        return True
    try:
        released = _lapse_tokens(tokens, now=timezone.now(), dead_only=False)
    except Exception as exc:
        if is_outage(exc):
            return False
        raise
    if released:
        logger.info("released the holds of a run the database interrupted: %s", released)
    return True


def take_retries() -> list[tuple[str, tuple]]:
    """The tasks of this process that gave up during an outage (``(task, args)``), now
    handed to the caller, who enqueues them again."""
    with _retry_lock:
        taken = list(_retries)
        _retries.clear()
    return taken


def do_enqueue_outage_retries() -> list[str]:
    """Enqueue again the tasks this process gave up on during an outage (a sweep; each
    task is idempotent: its claim decides). Returns ``"task[args]"`` per task enqueued."""
    from .dispatch import enqueue

    done: list[str] = []
    retries = take_retries()
    try:
        for task, args in retries:
            enqueue(task, *args)
            done.append(f"{task}{list(args)}")
    except Exception:
        with _retry_lock:  # the rest waits for the next pass
            _retries[:0] = retries[len(done) :]
        raise
    return done
