"""``manage.py sweep`` runs every registered sweep once (workforce.sweepers); the older
``sweep_deliveries`` runs the deliveries sweep alone."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from workforce import sweepers
from workforce.management.commands import sweep as sweep_command

# Every sweep starts with close_old_connections(), which touches the connection.
pytestmark = pytest.mark.django_db

EVERY_SWEEP = [
    "dead holders",
    "outage retries",
    "routes",
    "deliveries",
    "board drains",
    "turn slots",
    "round-deadlines",
    "coordinators",
    "mail",
]


@pytest.fixture
def fake_sweeps(monkeypatch):
    """Replace the registry with scripted sweeps; ``ran`` lists the names that ran."""
    monkeypatch.setattr(sweepers, "_by_hand_only", set())
    ran: list[str] = []

    def sweep(name, result):
        def run():
            ran.append(name)
            if isinstance(result, Exception):
                raise result
            return result

        return run

    monkeypatch.setattr(sweepers, "_sweeps", {})
    monkeypatch.setattr(sweep_command, "ensure_booted", lambda: ran.append("boot"))

    def register(**results):
        for name, result in results.items():
            sweepers.register_sweep(name.replace("_", " "), sweep(name.replace("_", " "), result))
        return ran

    return register


def run(*args) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_every_app_registers_its_sweep():
    assert list(sweepers.registered_sweeps()) == EVERY_SWEEP


def test_list_names_every_registered_sweep():
    out, _ = run("sweep", "--list")
    assert out.splitlines() == EVERY_SWEEP


def test_sweep_boots_then_runs_every_sweep_in_order(fake_sweeps):
    ran = fake_sweeps(routes=[4, 7], deliveries={"requeued": [3], "abandoned": []}, board_drains=None)
    out, err = run("sweep")
    assert ran == ["boot", "routes", "deliveries", "board drains"]
    assert out.splitlines() == ["routes: 2: [4, 7]", "deliveries: requeued [3], abandoned []", "board drains: nothing to do"]
    assert err == ""


def test_a_failing_sweep_fails_the_command_after_the_others_ran(fake_sweeps):
    ran = fake_sweeps(routes=RuntimeError("database went away"), deliveries=None)
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match=r"^1 sweep\(s\) failed: routes$"):
        call_command("sweep", stdout=out, stderr=err)
    assert ran == ["boot", "routes", "deliveries"]
    assert err.getvalue().strip() == "routes: failed: RuntimeError: database went away"
    assert out.getvalue().splitlines() == ["deliveries: nothing to do"]


def test_only_runs_the_named_sweeps_and_refuses_an_unknown_name(fake_sweeps):
    ran = fake_sweeps(routes=None, deliveries=None, coordinators=None)
    out, _ = run("sweep", "--only", "coordinators", "--only", "routes")
    assert ran == ["boot", "routes", "coordinators"]
    assert out.splitlines() == ["routes: nothing to do", "coordinators: nothing to do"]
    with pytest.raises(CommandError, match="no sweep named jobs; the sweeps are: routes, deliveries, coordinators"):
        run("sweep", "--only", "jobs")
    assert ran == ["boot", "routes", "coordinators"]  # nothing ran, not even the boot


def test_sweep_deliveries_is_sweep_only_deliveries(fake_sweeps):
    ran = fake_sweeps(routes=None, deliveries={"requeued": [], "abandoned": [9]}, coordinators=None)
    out, _ = run("sweep_deliveries")
    assert ran == ["boot", "deliveries"]
    assert out.splitlines() == ["deliveries: requeued [], abandoned [9]"]


def test_a_boot_that_fails_fails_the_command(fake_sweeps, monkeypatch):
    ran = fake_sweeps(routes=None)

    def broken_tree():
        raise RuntimeError("teams/x: mailbox-load-failed")

    monkeypatch.setattr(sweep_command, "ensure_booted", broken_tree)
    with pytest.raises(CommandError, match="booting failed: teams/x: mailbox-load-failed"):
        run("sweep")
    assert ran == []


def test_the_sweeper_thread_leaves_out_a_sweep_the_cluster_schedules_itself(fake_sweeps):
    ran = fake_sweeps(routes=None)
    sweepers.register_sweep("scheduled", lambda: ran.append("scheduled"), in_sweeper_thread=False)
    assert sweepers.run_sweeps() == {"routes": None}
    assert ran == ["routes"]
    out, _ = run("sweep")
    assert ran == ["routes", "boot", "routes", "scheduled"]
    assert out.splitlines() == ["routes: nothing to do", "scheduled: nothing to do"]


def test_the_coordinators_sweep_runs_by_hand_only():
    assert "coordinators" in sweepers.registered_sweeps()
    assert sweepers._by_hand_only == {"coordinators"}


def test_the_docs_name_the_sweeps_as_sweep_list_prints_them():
    """docs/running.md and docs/workers.md list exactly the names ``--list`` prints, in its order."""
    import re
    from pathlib import Path

    out = StringIO()
    call_command("sweep", "--list", stdout=out)
    printed = out.getvalue().splitlines()
    assert printed == EVERY_SWEEP
    docs = Path(__file__).resolve().parents[2] / "docs"
    running = re.search(
        r"`--list` prints their\s+names, in the order they run: (.*?)\. `--only", (docs / "running.md").read_text(), re.S
    )
    assert running is not None
    assert re.findall(r"`([^`]+)`", running.group(1)) == printed
    workers = re.search(r"once by hand \(([^;]*); `--list` names", (docs / "workers.md").read_text())
    assert workers is not None
    assert workers.group(1).split(", ") == printed
