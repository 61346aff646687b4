"""Booting a process once (docs/architecture.md "Apps", ``workforce_project``).

``serve`` boots its own process explicitly (``workforce_project.boot.boot``). A django-q2
cluster's worker processes run tasks that need the same configuration (hired seats,
the mailbox kind's notify block), so they boot lazily: ``ensure_booted()`` runs when a
cluster worker spawns (``workforce.sweepers.on_worker_spawn``), and every task calls
``boot_for_task()`` first. The kernel never
imports the composition root; it calls the dotted path in ``settings.WORKFORCE_BOOT``.

What the boot configures lives in one object per process, read and written through a
``Slot`` per value (the roster, the board drains and warnings, a test's model
resolver), never in module globals: a slot the boot fills boots the process when it is
read first (docs/architecture.md "Facets").
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

T = TypeVar("T")


class _Process:
    """This process's configured state: whether it is booted, and every value the boot
    (or a test) put in a ``Slot``. One object per process, so there is one place to read
    and one ``reset`` for tests."""

    def __init__(self) -> None:
        self.lock = threading.RLock()  # boot() calls mark_booted() while ensure_booted() holds it
        self.booted = False
        self.booting = threading.local()  # .active: this thread is inside the boot
        self.values: dict[str, Any] = {}


_process = _Process()


class Slot(Generic[T]):
    """A named piece of process state that the boot configures (docs/architecture.md
    "Facets": "Process state").

    An app declares its slot once, as a module constant
    (``BOARD_DRAINS = Slot("boards.drains", empty=tuple)``); the value lives in this
    process's one runtime object, not in the app's module, so nothing depends on which
    module was imported or configured first.

    Args:
        key: a unique dotted name (``"<app>.<what>"``).
        empty: makes the value read when nothing was set and no ``load`` is given.
        load: makes the value on first read when nothing was set (the roster reads
            ``WORKFORCE_ROOT``); it is stored, so it runs once until ``clear``.
        after_boot: True when the boot sets this value: a read in a process that is not
            booted yet boots it first (``ensure_booted``), so a cluster worker that reads
            its board drains before its first task still reads the hired ones. A read
            from inside the boot itself never boots again.
    """

    def __init__(
        self,
        key: str,
        *,
        empty: Callable[[], T] | None = None,
        load: Callable[[], T] | None = None,
        after_boot: bool = False,
    ) -> None:
        make = load if load is not None else empty
        if make is None or (empty is not None and load is not None):
            raise ValueError(f"slot {key}: give exactly one of empty= and load=")
        self.key = key
        # What makes the value when nothing was set, and whether it is stored (``load``)
        # or made again at each read (``empty``).
        self._make: Callable[[], T] = make
        self._stores = load is not None
        self._after_boot = after_boot

    def get(self) -> T:
        """The value set for this process; see the class for what a read before that gives.

        Raises:
            whatever ``load`` raises (a bad tree); nothing is stored then. A boot that
            fails is logged and the empty value read.
        """
        values = _process.values
        if self.key in values:
            return values[self.key]
        if self._after_boot and not getattr(_process.booting, "active", False):
            try:
                ensure_booted()
            except Exception:
                # A bad tree: boot_for_task and serve report it; a read then sees the
                # empty value, as in a process whose tree configures nothing.
                logger.exception("booting this process for %s failed", self.key)
            if self.key in values:
                return values[self.key]
        if not self._stores:
            return self._make()
        with _process.lock:
            if self.key not in values:
                values[self.key] = self._make()
            return values[self.key]

    def set(self, value: T) -> None:
        """Put ``value`` in place for the whole process."""
        with _process.lock:
            _process.values[self.key] = value

    def clear(self) -> None:
        """Forget the value: the next read is empty, or loads again."""
        with _process.lock:
            _process.values.pop(self.key, None)

    def is_set(self) -> bool:
        """True when a value is in place (set, or loaded)."""
        return self.key in _process.values


def ensure_booted() -> bool:
    """Boot this process once, with the function named by ``settings.WORKFORCE_BOOT``
    (default ``workforce_project.boot.boot_process``; empty disables it).

    Returns:
        True when this call ran the boot, False when the process was already booted
        (or booting is disabled, or this thread is inside the boot already).

    Raises:
        whatever the boot function raises (a bad tree); the process is then not marked
        booted, so the next call tries again.
    """
    if _process.booted:
        return False
    with _process.lock:
        if _process.booted or getattr(_process.booting, "active", False):
            return False
        path = settings.WORKFORCE_BOOT
        if path:
            _process.booting.active = True
            try:
                import_string(path)()
            finally:
                _process.booting.active = False
        _process.booted = True
        return bool(path)


def mark_booted(booted: bool = True) -> None:
    """Record that this process is configured (``serve`` after ``boot()``; tests that
    configure kinds by hand). ``mark_booted(False)`` makes the next
    ``ensure_booted()`` boot again."""
    with _process.lock:
        _process.booted = booted


def is_booted() -> bool:
    """True once this process has been booted or marked booted."""
    return _process.booted


def boot_for_task(proc_name: str = "") -> bool:
    """Boot a task cluster's worker process: when django-q2 spawns it
    (``workforce.sweepers.on_worker_spawn``) and before it runs a task (every app's
    ``tasks.py`` entry point calls it first). Never raises.

    Args:
        proc_name: the worker process's name, for the log.

    Returns:
        False in django-q2's ``sync`` mode, where tasks run inside the caller's process,
        configured by the caller: nothing is done. True otherwise, also when the boot
        failed (a bad tree): that is logged, the task still runs with what is configured,
        and the next call tries the boot again.
    """
    from django_q.conf import Conf

    if Conf.SYNC:
        return False
    try:
        ensure_booted()
    except Exception:
        logger.exception("booting the task worker %sfailed", f"{proc_name} " if proc_name else "")
    return True
