"""Process state (docs/architecture.md "Facets", "Process state"): what the boot
configures lives in one runtime object, read through a ``Slot`` per value, so a read
never depends on which module was configured first."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from boards.drains import BOARD_DRAINS, BoardDrain, current_board_drains
from seats.drains import BOARD_WARNINGS, board_warnings
from tests.boards.test_seat_drain import FOLLOWUPS, tree, worker_md
from workforce.runtime import Slot, ensure_booted, is_booted, mark_booted

REPO = Path(__file__).resolve().parents[2]
APPS = ("workforce", "boards", "seats", "mailboxes", "coordinators", "mail", "web", "workforce_project")

PROBE = Slot("tests.probe", empty=lambda: "empty", after_boot=True)
BOOTS: list[str] = []


def boot_sets_the_probe():
    """A WORKFORCE_BOOT that reads its own slot (it must not boot again) and sets it."""
    BOOTS.append(PROBE.get())
    PROBE.set("booted")


def boot_fails():
    BOOTS.append("failed")
    raise RuntimeError("a bad tree")


@pytest.fixture
def unbooted(settings):
    """A process not booted yet, whose boot is ``boot_sets_the_probe``."""
    was = is_booted()
    BOOTS.clear()
    PROBE.clear()
    settings.WORKFORCE_BOOT = "tests.workforce.test_runtime.boot_sets_the_probe"
    mark_booted(False)
    yield settings
    PROBE.clear()
    mark_booted(was)


def test_a_slot_the_boot_fills_boots_the_process_when_read_first(unbooted):
    assert PROBE.get() == "booted" and is_booted()
    assert BOOTS == ["empty"]  # the boot read the slot from inside itself: no second boot
    assert PROBE.get() == "booted" and BOOTS == ["empty"]


def test_a_read_after_a_failed_boot_is_empty_and_the_next_read_boots_again(unbooted, caplog):
    unbooted.WORKFORCE_BOOT = "tests.workforce.test_runtime.boot_fails"
    assert PROBE.get() == "empty" and not is_booted()
    assert "booting this process for tests.probe failed" in caplog.text
    unbooted.WORKFORCE_BOOT = "tests.workforce.test_runtime.boot_sets_the_probe"
    assert PROBE.get() == "booted" and BOOTS == ["failed", "empty"]


def test_a_slot_with_a_loader_loads_once_until_cleared():
    loads = []
    slot = Slot("tests.loaded", load=lambda: loads.append(1) or len(loads))
    try:
        assert (slot.get(), slot.get(), slot.is_set()) == (1, 1, True)
        slot.clear()
        assert slot.get() == 2
        slot.set(7)
        assert slot.get() == 7 and loads == [1, 1]
    finally:
        slot.clear()


def test_a_slot_takes_exactly_one_of_empty_and_load():
    with pytest.raises(ValueError, match="exactly one of empty= and load="):
        Slot("tests.bad")
    with pytest.raises(ValueError):
        Slot("tests.bad", empty=tuple, load=tuple)


def test_a_cluster_worker_reading_its_board_drains_before_its_first_task_reads_the_hired_ones(make_tree, settings, db):
    """The bug this prevents: a process that read the drains before it booted saw none,
    so a filed row woke no drain."""
    settings.WORKFORCE_ROOT = str(make_tree(tree(lead=worker_md(drains=f"[{FOLLOWUPS}]"))))
    settings.WORKFORCE_BOOT = "workforce_project.boot.boot_process"
    was = is_booted()
    BOARD_DRAINS.clear()
    BOARD_WARNINGS.clear()
    mark_booted(False)
    try:
        assert current_board_drains() == (BoardDrain("eng.lead", FOLLOWUPS, ("lead",)),)
        assert is_booted() and ensure_booted() is False
        assert [w.code for w in board_warnings()] == ["unattended-board"]  # escalations: nobody drains it
    finally:
        BOARD_DRAINS.set(())
        BOARD_WARNINGS.set(())
        mark_booted(was)


def test_no_app_module_keeps_state_in_a_module_global():
    """``global`` rebinding in app code is process state outside the runtime object."""
    found = []
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Global):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: global {', '.join(node.names)}")
    assert found == []
