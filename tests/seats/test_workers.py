"""Workers on disk (spec "Waking agent seats"; spec 004 "Setting one up")."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from seats.workers import WORKER_LOAD_FAILED, WorkerManifest, read_workforce
from tests.conftest import mailbox_md, write_tree
from tests.seats.conftest import worker_md
from workforce.tree import NAME_RULE, REFUSED_DECLARATION, UNREADABLE_SLOT, WorkforceRootError

DEVICES = """\
---
description: Phones, laptops, and anything else that won't turn on or charge.
---

You answer device questions for the support team.
"""


def write(root: Path, rel: str, text: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_team_and_org_workers(tmp_path):
    write(tmp_path, "teams/support/workers/devices/WORKER.md", DEVICES)
    write(
        tmp_path,
        "teams/support/workers/help/WORKER.md",
        "---\ndescription: Ask the support team anything.\nflow: coordinator\n"
        "delegates: [support.devices, support.general]\nrouting: best-fit\nfallback: support.general\n---\n\n"
        "You are the support desk.\n",
    )
    write(
        tmp_path,
        "org/workers/chief-of-staff/WORKER.md",
        "---\ndescription: Runs the organization's errands.\nmodel: openai/gpt-4o-mini\n"
        "tools: [post-to-mailbox]\ninstructions: Be brief.\n---\n",
    )
    workers, errors = read_workforce(tmp_path)
    assert errors == []
    assert [w.id for w in workers] == ["chief-of-staff", "support.devices", "support.help"]
    chief, devices, help_ = workers
    assert devices == WorkerManifest(
        id="support.devices",
        declared={"description": "Phones, laptops, and anything else that won't turn on or charge."},
        body="\nYou answer device questions for the support team.\n",
        path="teams/support/workers/devices",
        team="support",
    )
    assert devices.flow == "agent" and devices.model == "" and devices.tools == []
    assert devices.instructions == "You answer device questions for the support team."
    assert chief.team is None and chief.instructions == "Be brief." and chief.tools == ["post-to-mailbox"]
    assert chief.model == "openai/gpt-4o-mini"
    assert help_.flow == "coordinator"
    assert help_.config == {
        "delegates": ["support.devices", "support.general"],
        "routing": "best-fit",
        "fallback": "support.general",
    }


def test_strict_yaml_keeps_strings(tmp_path):
    write(tmp_path, "teams/a/workers/b/WORKER.md", "---\ndescription: no\n---\n")
    [worker], errors = read_workforce(tmp_path)
    assert errors == [] and worker.description == "no"


def test_a_tree_without_workers_is_empty(tmp_path):
    write(tmp_path, "teams/a/mailboxes/b/MAILBOX.md", mailbox_md())
    assert read_workforce(tmp_path) == ([], [])


def test_the_root_is_the_only_thing_that_raises(tmp_path):
    with pytest.raises(WorkforceRootError):
        read_workforce(tmp_path / "missing")
    (tmp_path / "link").symlink_to(tmp_path)
    with pytest.raises(WorkforceRootError):
        read_workforce(tmp_path / "link")


def errors_of(root):
    workers, errors = read_workforce(root)
    return {e.path: (e.kind, e.message) for e in errors}, workers


def test_every_problem_is_collected_and_the_rest_load(tmp_path):
    write(tmp_path, "teams/support/workers/devices/WORKER.md", DEVICES)
    write(tmp_path, "teams/support/workers/Bad Name/WORKER.md", DEVICES)
    write(tmp_path, "teams/Support Team/workers/x/WORKER.md", DEVICES)
    (tmp_path / "teams/support/workers/empty").mkdir()
    write(tmp_path, "teams/support/workers/dup/WORKER.md", "---\ndescription: a\ndescription: b\n---\n")
    write(tmp_path, "teams/support/workers/nofm/WORKER.md", "just text\n")
    write(tmp_path, "teams/support/workers/extra/WORKER.md", "---\ndescription: a\nsystem: hi\n---\n")
    write(tmp_path, "teams/support/workers/both/WORKER.md", "---\ndescription: a\ninstructions: x\n---\nbody too\n")
    write(
        tmp_path,
        "teams/support/workers/shapes/WORKER.md",
        "---\ndescription: ''\nmodel: echo\ntools: post-to-mailbox\nflow: Not A Kind\nrounds: two\n---\n",
    )
    write(tmp_path, "teams/support/workers/latin1/WORKER.md", b"---\ndescription: caf\xe9\n---\n")
    write(tmp_path, "teams/support/workers/loose.md", "ignored")
    errors, workers = errors_of(tmp_path)
    assert [w.id for w in workers] == ["support.devices"]
    assert errors["teams/support/workers/Bad Name"][0] == WORKER_LOAD_FAILED
    assert NAME_RULE in errors["teams/support/workers/Bad Name"][1]
    assert "Team folder" in errors["teams/Support Team/workers/x"][1]
    assert "has no WORKER.md" in errors["teams/support/workers/empty"][1]
    assert "duplicate key" in errors["teams/support/workers/dup"][1]
    assert "WORKER.md" in errors["teams/support/workers/nofm"][1]
    assert errors["teams/support/workers/extra"] == (
        REFUSED_DECLARATION,
        'teams/support/workers/extra/WORKER.md: declares "system", which a worker cannot declare; the keys are '
        "description, flow, model, tools, instructions, delegates, routing, fallback, rounds, discover, capabilities, run, drains, boardTools",
    )
    assert "both given" in errors["teams/support/workers/both"][1]
    assert "UTF-8" in errors["teams/support/workers/latin1"][1]
    _, shapes = errors["teams/support/workers/shapes"]
    # one LoadError per problem; the dict keeps the last, so read them all
    all_errors = [e.message for e in read_workforce(tmp_path).errors if e.path == "teams/support/workers/shapes"]
    assert len(all_errors) == 5
    assert any("description: must be text" in m for m in all_errors)
    assert any("model: must be provider/name" in m for m in all_errors)
    assert any("tools: must be a list" in m for m in all_errors)
    assert any("flow: must be a kind name" in m for m in all_errors)
    assert any("rounds: must be a whole number" in m for m in all_errors)


def test_links_are_never_followed(tmp_path):
    real = write(tmp_path, "elsewhere/devices/WORKER.md", DEVICES).parent
    (tmp_path / "teams/support/workers").mkdir(parents=True)
    (tmp_path / "teams/support/workers/devices").symlink_to(real)
    write(tmp_path, "teams/ops/workers/pager/WORKER.md", DEVICES)
    (tmp_path / "teams/ops/workers/pager/WORKER.md").unlink()
    (tmp_path / "teams/ops/workers/pager/WORKER.md").symlink_to(real / "WORKER.md")
    (tmp_path / "teams/web").mkdir()
    (tmp_path / "teams/web/workers").symlink_to(real.parent)
    (tmp_path / "org").mkdir()
    (tmp_path / "org/workers").symlink_to(real.parent)
    errors, workers = errors_of(tmp_path)
    assert workers == []
    assert errors["teams/support/workers/devices"][0] == WORKER_LOAD_FAILED
    assert "symbolic link" in errors["teams/support/workers/devices"][1]
    assert "symbolic link" in errors["teams/ops/workers/pager"][1]
    assert errors["teams/web/workers"][0] == UNREADABLE_SLOT
    assert errors["org/workers"][0] == UNREADABLE_SLOT


def test_check_names_every_worker_problem(tmp_path, settings):
    write_tree(
        tmp_path,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(),
            "teams/eng/workers/lead/WORKER.md": worker_md(tools="[send-email]"),
            "teams/eng/workers/Bad/WORKER.md": worker_md(),
            "org/workers/chief/WORKER.md": worker_md(model="acme/brain"),
        },
    )
    settings.WORKFORCE_ROOT = str(tmp_path)
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    text = str(failed.value)
    assert "seats.E001" in text and "teams/eng/workers/Bad" in text
    assert "seats.E002" in text and 'worker eng.lead: tools: names "send-email"' in text
    assert 'worker chief: model: model "acme/brain": unknown provider "acme"' in text


def test_the_example_tree_reads_and_hires(settings):
    from seats.hiring import hire_problems

    root = Path(settings.BASE_DIR) / "examples" / "support-desk"
    workers, errors = read_workforce(root)
    assert errors == []
    assert [w.id for w in workers] == [
        "support.accounts",
        "support.devices",
        "support.general",
        "support.help",
        "support.lead",
    ]  # support.help: the coordinator over the three answering workers
    assert all(w.model == "embedded/echo" for w in workers)
    assert hire_problems(workers) == []


def test_os_and_editor_droppings_beside_workers_are_passed_over(tmp_path):
    write(tmp_path, "teams/support/workers/general/WORKER.md", worker_md("Answers anything."))
    write(tmp_path, "teams/support/workers/.DS_Store/x", "x")
    write(tmp_path, "org/workers/.DS_Store", b"\x00")
    write(tmp_path, "org/workers/.idea/misc.xml", "x")
    workers, errors = read_workforce(tmp_path)
    assert errors == [] and [w.id for w in workers] == ["support.general"]


def test_a_worker_file_holding_a_nul_is_a_load_error_naming_its_line(tmp_path):
    # issue 22 item 5: the one input rule holds for the tree too; no text field keeps a NUL
    write(tmp_path, "teams/support/workers/general/WORKER.md", worker_md("Answers\x00 anything.", body="Help.\n\x00"))
    workers, errors = read_workforce(tmp_path)
    assert workers == [] and len(errors) == 1
    assert "WORKER.md, line 2: the file holds a NUL character" in str(errors[0])
