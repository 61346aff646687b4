"""A per-process cache of Organization rows, so the organization read that every HTTP
call makes without authentication (``ensure_organization(DEFAULT_ORG_ID)`` in
``workforce.principals``) sends no statement after the first.

Only a row known to be committed is cached: one read in autocommit (outside any
``atomic`` block) at once; one read or created inside a block when the outermost block
commits (``transaction.on_commit``; a rollback drops it).
A row this process deletes or edits is evicted at once (``post_delete``, ``post_save``)
and again when that transaction commits. Another process's delete (the admin on another
node, a flush) is not seen: an entry lives ``TTL_SECONDS`` at most, and an
``IntegrityError`` that escapes a view (an insert under a stale organization fails its
foreign key) clears the cache, so the next call reads again (and recreates the row).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from functools import partial
from typing import Any

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction

from .models import Organization

# Seconds a cached row is trusted: how long another process's delete of an organization
# can go unseen here (calls in that window act on the gone row and fail their foreign
# key). Short: a miss costs one primary-key SELECT, a deleted tenant should stop soon.
TTL_SECONDS = 5.0

_FIELDS = tuple(f.attname for f in Organization._meta.concrete_fields)


class _Cache:
    """This process's cached rows. Fills and evictions take the lock; hits read without it."""

    def __init__(self) -> None:
        # org id -> (expires at, time.monotonic() seconds; the row's concrete field values)
        self.entries: dict[str, tuple[float, tuple[Any, ...]]] = {}
        # Bumped by every eviction: a fill that read before one is dropped (it may hold
        # the row the eviction was for).
        self.generation = 0
        self.lock = threading.Lock()


_cache = _Cache()


def generation() -> int:
    """The eviction count now: take it before reading a row to ``remember`` it."""
    return _cache.generation


def cached_organization(org_id: str) -> Organization | None:
    """A fresh instance of the cached row ``org_id`` (callers may change theirs), or
    None when it is not cached or its ``TTL_SECONDS`` are up."""
    entry = _cache.entries.get(org_id)
    if entry is None or entry[0] <= time.monotonic():
        return None
    return Organization.from_db(DEFAULT_DB_ALIAS, _FIELDS, entry[1])


def remember(org: Organization, since: int) -> None:
    """Cache ``org``, just read or created on the default database, once it is known
    committed: now in autocommit, else when the outermost ``atomic`` block commits
    (never if it rolls back, nor under autocommit turned off by hand). Nothing is
    cached when an eviction happened after ``since`` (``generation()`` taken before the
    read)."""
    values = tuple(getattr(org, name) for name in _FIELDS)
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.in_atomic_block:
        transaction.on_commit(partial(_store, org.pk, values, since))
    elif conn.get_autocommit():
        _store(org.pk, values, since)
    # else a transaction managed by hand (autocommit off): its end is not seen here


def _store(org_id: str, values: tuple[Any, ...], since: int) -> None:
    with _cache.lock:
        if _cache.generation == since:
            _cache.entries[org_id] = (time.monotonic() + TTL_SECONDS, values)


def forget(org_id: str) -> None:
    """Evict ``org_id`` (a fill that read it before now is dropped too)."""
    with _cache.lock:
        _cache.generation += 1
        _cache.entries.pop(org_id, None)


def clear() -> None:
    """Evict every row (tests, after a flush or a rollback; a stale row's failure)."""
    with _cache.lock:
        _cache.generation += 1
        _cache.entries.clear()


def _after_fork() -> None:
    # A child (a cluster worker) starts empty, with a lock no thread of the parent holds.
    _cache.lock = threading.Lock()
    _cache.entries.clear()


os.register_at_fork(after_in_child=_after_fork)


def on_organization_deleted(sender, instance: Organization, using: str, **kwargs) -> None:
    """``post_delete``: evict now, and again when the delete commits (a call between the
    two may read and cache the row the delete has not yet removed for others)."""
    forget(instance.pk)
    transaction.on_commit(partial(forget, instance.pk), using=using)


def on_organization_saved(sender, instance: Organization, created: bool, using: str, **kwargs) -> None:
    """``post_save`` of an edit (the admin renaming a tenant): evict as a delete does."""
    if not created:
        on_organization_deleted(sender, instance, using)


def on_request_exception(sender, request=None, **kwargs) -> None:
    """``got_request_exception`` (sent inside the ``except`` of Django's handler): an
    ``IntegrityError`` may be a foreign key refusing a stale cached organization that
    another process deleted; clearing costs one read per organization, so any clears."""
    if isinstance(sys.exc_info()[1], IntegrityError):
        clear()
