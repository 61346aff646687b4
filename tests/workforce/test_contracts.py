"""Contracts in code (docs/architecture.md "Contracts in code"): a function that writes as part
of its caller's transaction refuses to run in autocommit, and every ``do_*`` whose
docstring says it runs in its caller's transaction is marked so."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.db import transaction

from coordinators import delegates, policies
from mail import services as mail_services
from mailboxes import inventory, projects, routing
from mailboxes import services as mailbox_services
from workforce import sessions
from workforce.contracts import NotInCallersTransaction, in_callers_transaction, runs_in_callers_transaction
from workforce.models import Organization

ROOT = Path(__file__).resolve().parents[2]
APPS = ("workforce", "boards", "seats", "mailboxes", "coordinators", "mail", "web")

MARKED = [
    (delegates, "do_change_delegates"),
    (routing, "do_finish_fan_out"),
    (inventory, "do_register_inventory"),
    (projects, "do_ready_talk_session"),
    (sessions, "do_update_then_emit_item"),
    (mailbox_services, "do_post_line"),
    (mail_services, "_write_send"),
    (policies, "record_pick"),
]


@in_callers_transaction
def _write_org(org_id: str) -> Organization:
    """A write that belongs to its caller's transaction."""
    return Organization.objects.create(id=org_id, name=org_id)


def test_outside_a_transaction_the_call_fails_naming_the_function_and_writes_nothing():
    with pytest.raises(NotInCallersTransaction) as refused:
        _write_org("never")
    assert str(refused.value) == (
        "tests.workforce.test_contracts._write_org runs inside its caller's transaction: "
        "call it inside transaction.atomic(), not in autocommit"
    )


@pytest.mark.django_db(transaction=True)
def test_inside_the_callers_transaction_it_runs_and_commits_or_rolls_back_with_it():
    with pytest.raises(NotInCallersTransaction):
        _write_org("autocommit")
    assert not Organization.objects.filter(id="autocommit").exists()
    with transaction.atomic():
        _write_org("kept")
    assert Organization.objects.filter(id="kept").exists()
    with pytest.raises(RuntimeError, match="roll back"), transaction.atomic():
        _write_org("dropped")
        raise RuntimeError("roll back")
    assert not Organization.objects.filter(id="dropped").exists()


@pytest.mark.parametrize("module, name", MARKED, ids=[name for _, name in MARKED])
def test_each_marked_function_refuses_autocommit_before_it_reads_its_arguments(module, name):
    func = getattr(module, name)
    assert runs_in_callers_transaction(func)
    with pytest.raises(NotInCallersTransaction, match=rf"^{re.escape(module.__name__)}\.{name} runs inside"):
        func(None, None, None, None, None)


# A docstring that says the function runs in its caller's transaction.
SAYS_CALLERS_TRANSACTION = re.compile(
    r"inside the caller's transaction|call(ed)? inside (a|the) transaction"
    r"|runs inside the action's transaction",
    re.IGNORECASE,
)


def _do_functions_that_say_so() -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            for node in tree.body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("do_"):
                    doc = " ".join((ast.get_docstring(node) or "").split())
                    if SAYS_CALLERS_TRANSACTION.search(doc):
                        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                        found.append(f"{module}.{node.name}")
    return found


def test_every_do_function_whose_docstring_says_it_runs_in_its_callers_transaction_is_marked():
    said = sorted(_do_functions_that_say_so())
    assert said == [
        "coordinators.delegates.do_change_delegates",
        "mailboxes.inventory.do_register_inventory",
        "mailboxes.projects.do_ready_talk_session",
        "mailboxes.routing.do_finish_fan_out",
        "mailboxes.services.do_post_line",
        "workforce.sessions.do_record_running_request_with_item",
        "workforce.sessions.do_update_then_emit_item",
    ]
    unmarked = [
        name
        for name in said
        if not runs_in_callers_transaction(getattr(importlib.import_module(name.rpartition(".")[0]), name.rpartition(".")[2]))
    ]
    assert unmarked == []
