"""The coordinators' sweep is a registered sweep: ``manage.py sweep`` (and each cluster
worker's sweeper thread) recovers a delegated post the broker lost."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.core.management import call_command
from django.utils import timezone

from coordinators import policies
from coordinators.models import DelegatedPost
from tests.coordinators.conftest import DEVICES
from workforce.management.commands import sweep as sweep_command


def test_manage_sweep_enqueues_a_lost_delegated_post_again(desk, monkeypatch):
    d = desk(routing="everyone", delegates=(DEVICES,))
    monkeypatch.setattr(policies, "enqueue", lambda *args: None)  # the broker loses the task
    d.run("hi")
    monkeypatch.undo()
    assert d.answers() == []
    lost = DelegatedPost.objects.get()
    DelegatedPost.objects.filter(pk=lost.pk).update(enqueued_at=timezone.now() - timedelta(days=1))
    monkeypatch.setattr(sweep_command, "ensure_booted", lambda: False)  # the desk fixture configured the process
    out = StringIO()
    with d.capture(execute=True):
        call_command("sweep", "--only", "coordinators", stdout=out)
    assert out.getvalue().splitlines() == [f"coordinators: deliveries [{lost.pk}], jobs [], rounds [], abandoned []"]
    assert len(d.answers()) == 1
    out = StringIO()
    call_command("sweep", "--only", "coordinators", stdout=out)
    assert out.getvalue().splitlines() == ["coordinators: nothing to do"]  # a second sweep finds nothing
