"""Claiming a row of work for one run, under a lease (every task is idempotent: the
broker redelivers).

A seat's delivery (``seats.models.Delivery``), a coordinator's delegated post and job
(``coordinators.models.DelegatedPost``, ``Job``) are each run by whichever task claims
it first: ``claim_lease`` is one conditional UPDATE that takes a row that is pending, or
running under a lapsed lease, and has had fewer than ``max_attempts()`` claims. The
claim's token then guards everything the run writes: a run whose token no longer
matches lost its claim (``LeaseLost``) to a task that took the row over.
"""
from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.db.models import DateTimeField, F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone


class LeaseLost(Exception):
    """Our claim on a row lapsed and another task took it over."""


def lease_seconds() -> float:
    """How long a claim holds: the task cluster's ``timeout`` (a task is killed by then)
    plus a small margin."""
    return float(settings.Q_CLUSTER.get("timeout") or 60) + 2


def max_attempts() -> int:
    """Claims a row gets before it is given up (``settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS``)."""
    return int(settings.WORKFORCE_DELIVERY_MAX_ATTEMPTS)


def claim_lease(
    model: type[models.Model], pk: int, *, now: datetime | None = None, stamp_started: bool = True
) -> str | None:
    """Claim row ``pk`` of ``model`` for one run, with one conditional UPDATE.

    The row is taken when its status is ``pending``, or ``running`` with
    ``lease_until`` passed, and its ``attempts`` are below ``max_attempts()``. Taking it
    sets it ``running``, counts the attempt, stores a fresh ``claim_token`` and leases it
    for ``lease_seconds()`` from ``now``; with ``stamp_started`` it also sets
    ``started_at`` on the first claim.

    Args:
        model: a model with ``Status.PENDING``/``Status.RUNNING`` choices on ``status``,
            and ``attempts``, ``claim_token``, ``lease_until`` (and ``started_at``) fields.
        pk: the row's primary key.
        now: the claim's time (default now).

    Returns:
        The claim token, or None when the row was not claimable (done, failed, held by a
        live claim, out of attempts, or gone).
    """
    token = uuid.uuid4().hex
    now = now or timezone.now()
    changes = {
        "status": model.Status.RUNNING,
        "attempts": F("attempts") + 1,
        "claim_token": token,
        "lease_until": now + timedelta(seconds=lease_seconds()),
    }
    if stamp_started:
        changes["started_at"] = Coalesce(F("started_at"), Value(now, output_field=DateTimeField()))
    claimed = (
        model.objects.filter(pk=pk, attempts__lt=max_attempts())
        .filter(Q(status=model.Status.PENDING) | Q(status=model.Status.RUNNING, lease_until__lt=now))
        .update(**changes)
    )
    return token if claimed else None
