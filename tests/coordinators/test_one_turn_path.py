"""Every turn runs through one function (``seats.turns.drive_turn``): a delegate's turn
on a delegated post (``delegated-post``) and the coordinator's own turn
(``coordinator``), each through its real entry point."""

from __future__ import annotations

from coordinators.models import DelegatedPost, Job
from tests.coordinators.conftest import DEVICES, HELP
from tests.turn_log import spy_drive_turn


def test_a_delegated_post_runs_the_delegates_turn_through_the_one_function(desk, monkeypatch):
    d = desk(routing="round-robin", scripts={DEVICES: lambda call: "fixed"})
    kinds = spy_drive_turn(monkeypatch)
    d.run("hi")
    assert "delegated-post" in kinds
    assert kinds.count("delegated-post") == DelegatedPost.objects.count() == 1
    assert DelegatedPost.objects.get(worker=DEVICES).status == "answered"


def test_the_coordinators_own_turn_runs_through_the_one_function(desk, monkeypatch):
    d = desk(routing="judgment", scripts={HELP: lambda call: "I answer it myself."})
    kinds = spy_drive_turn(monkeypatch)
    d.run("hi")
    assert kinds.count("coordinator") == Job.objects.count() == 1
    assert Job.objects.get(kind="judgment").status == "done"
