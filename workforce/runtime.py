"""Booting a process once (docs/architecture.md "Apps", ``workforce_project``).

``serve`` boots its own process explicitly (``workforce_project.boot.boot``). A django-q2
cluster's worker processes run tasks that need the same configuration (hired seats,
the mailbox kind's notify block), so they boot lazily: ``ensure_booted()`` runs when a
cluster worker spawns (``workforce.sweepers.on_worker_spawn``), and every task calls
``boot_for_task()`` first. The kernel never
imports the composition root; it calls the dotted path in ``settings.WORKFORCE_BOOT``.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

_lock = threading.RLock()  # boot() calls mark_booted() while ensure_booted() holds it
_booted = False


def ensure_booted() -> bool:
    """Boot this process once, with the function named by ``settings.WORKFORCE_BOOT``
    (default ``workforce_project.boot.boot_process``; empty disables it).

    Returns:
        True when this call ran the boot, False when the process was already booted
        (or booting is disabled).

    Raises:
        whatever the boot function raises (a bad tree); the process is then not marked
        booted, so the next call tries again.
    """
    global _booted
    if _booted:
        return False
    with _lock:
        if _booted:
            return False
        path = settings.WORKFORCE_BOOT
        if path:
            import_string(path)()
        _booted = True
        return bool(path)


def mark_booted(booted: bool = True) -> None:
    """Record that this process is configured (``serve`` after ``boot()``; tests that
    configure kinds by hand). ``mark_booted(False)`` makes the next
    ``ensure_booted()`` boot again."""
    global _booted
    with _lock:
        _booted = booted


def is_booted() -> bool:
    """True once this process has been booted or marked booted."""
    return _booted


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
