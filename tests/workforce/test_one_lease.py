"""One lease (``workforce.models.Lease``): every hold in the server (a delivery, a delegated
post, a job, a board row, a turn slot) is a ``Lease`` row registered with
``workforce.holders``, renewed by ``workforce.leases.renew_lease`` and lapsed by
``workforce.holders.lapse_leases``, on both databases."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from boards.models import BoardTask
from coordinators.models import DelegatedPost, Job
from mailboxes.models import Delivery
from seats.models import TurnSlot
from workforce.holders import (
    HOST_DIGITS,
    IDENTITY_DIGITS,
    TOKEN_DIGITS,
    do_release_dead_holders,
    holder_alive,
    new_token,
    process_identity,
    registered_holds,
)
from workforce.leases import renew_lease
from workforce.models import Lease, Session

pytestmark = pytest.mark.django_db

HOLDS = (Delivery, DelegatedPost, Job, BoardTask, TurnSlot)


def dead_token() -> str:
    """A token of this host whose process is not running (pid 0xfffffe has no /proc entry)."""
    token = process_identity()[:HOST_DIGITS] + "fffffe" + "00000000"
    return token + "0" * (TOKEN_DIGITS - IDENTITY_DIGITS)


def test_every_hold_is_a_registered_lease():
    registered = {holds.model for holds in registered_holds()}
    for model in HOLDS:
        assert issubclass(model, Lease), model
        assert model in registered, model
        columns = {f.attname for f in model._meta.concrete_fields}
        assert {"claim_token", "lease_until"} <= columns, model


@pytest.fixture
def slot(org):
    session = Session.objects.create(organization=org, session_id="eng.x", flow_kind="mailbox", user_id="u")
    return TurnSlot.objects.create(session=session, seat_id="eng.lead", claim_token=new_token(), lease_until=timezone.now())


def test_a_lease_is_renewed_by_its_holder_only_in_one_statement(slot, django_assert_num_queries):
    before = slot.lease_until
    with django_assert_num_queries(1):
        assert renew_lease(TurnSlot.objects.filter(pk=slot.pk), new_token(), 60) is None  # not the holder
    assert TurnSlot.objects.get(pk=slot.pk).lease_until == before
    with django_assert_num_queries(1):
        until = renew_lease(TurnSlot.objects.filter(pk=slot.pk), slot.claim_token, 60)
    assert until is not None and until > before + timedelta(seconds=59)
    assert TurnSlot.objects.get(pk=slot.pk).lease_until == until


def test_a_dead_holders_leases_lapse_in_every_kind_of_table(org, slot):
    dead, now = dead_token(), timezone.now()
    assert holder_alive(dead) is False
    later = now + timedelta(seconds=120)
    TurnSlot.objects.filter(pk=slot.pk).update(claim_token=dead, lease_until=later)
    task = BoardTask.objects.create(
        organization=org, board_id="eng.x.work", goal="g", status="in_progress", attempts=1, claim_token=dead, lease_until=later
    )
    live = BoardTask.objects.create(
        organization=org,
        board_id="eng.x.work",
        goal="g",
        status="in_progress",
        attempts=1,
        claim_token=new_token(),
        lease_until=later,
    )
    released = do_release_dead_holders(now=now)
    assert released == {TurnSlot._meta.label: 1, BoardTask._meta.label: 1}
    assert TurnSlot.objects.get(pk=slot.pk).lease_until < now
    assert BoardTask.objects.get(pk=task.pk).lease_until < now
    assert BoardTask.objects.get(pk=live.pk).lease_until == later  # a live holder keeps its lease
