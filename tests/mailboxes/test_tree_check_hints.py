"""``manage.py check`` on the tree (issue 25 item 13): every problem names its file, a
misspelled key gets "did you mean `members`?", and a routed mailbox's member with no
``description:`` (never chosen by the route, silently) is a warning."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from mailboxes.checks import check_routed_members, check_workforce_tree
from seats.checks import check_workers
from tests.conftest import mailbox_md
from workforce.tree import did_you_mean

DESCRIBED = "---\ndescription: Answers billing questions.\nmodel: embedded/echo\n---\n\nYou help.\n"
UNDESCRIBED = "---\nmodel: embedded/echo\n---\n\nYou help.\n"


def test_did_you_mean_names_the_closest_key_or_nothing():
    keys = ("flow", "description", "members", "boards", "instructions", "routing", "boardActions", "mintFor")
    assert did_you_mean("member", keys) == " (did you mean `members`?)"
    assert did_you_mean("Members", keys) == " (did you mean `members`?)"
    assert did_you_mean("boardactions", keys) == " (did you mean `boardActions`?)"
    assert did_you_mean("descripton", keys) == " (did you mean `description`?)"
    assert did_you_mean("colour", keys) == ""
    assert did_you_mean(3, keys) == ""


def test_a_misspelled_mailbox_key_names_its_file_and_the_key_meant(make_tree, settings):
    settings.WORKFORCE_ROOT = str(
        make_tree(
            {
                "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Status."),
                "teams/eng/mailboxes/typo/MAILBOX.md": mailbox_md("Typo.", member="[eng.lead]"),
                "teams/eng/mailboxes/odd/MAILBOX.md": mailbox_md("Odd.", colour="blue"),
            }
        )
    )
    (error,) = check_workforce_tree()
    lines = error.msg.splitlines()
    assert "refused 2 of 3 declarations" in lines
    assert (
        '  teams/eng/mailboxes/typo/MAILBOX.md: eng.typo: "member" is not a mailbox key (did you mean `members`?); '
        "the declarable keys are flow, description, members, boards, instructions, routing, boardActions, mintFor"
    ) in lines
    assert (
        '  teams/eng/mailboxes/odd/MAILBOX.md: eng.odd: "colour" is not a mailbox key; '
        "the declarable keys are flow, description, members, boards, instructions, routing, boardActions, mintFor"
    ) in lines


def test_a_misspelled_worker_key_and_a_worker_that_cannot_be_hired_name_their_files(make_tree, settings, db):
    settings.WORKFORCE_ROOT = str(
        make_tree(
            {
                "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Status.", members=("eng.lead",)),
                "teams/eng/workers/lead/WORKER.md": "---\ndescription: Leads.\ntool: []\n---\n\nLead.\n",
                "teams/eng/workers/scout/WORKER.md": "---\ndescription: Scouts.\ntools: [send-email]\n---\n\nScout.\n",
            }
        )
    )
    messages = [e.msg for e in check_workers()]
    assert any(
        m.startswith(
            'teams/eng/workers/lead: [refused-declaration] teams/eng/workers/lead/WORKER.md: declares "tool", '
            "which a worker cannot declare (did you mean `tools`?); the keys are description,"
        )
        for m in messages
    ), messages
    assert any(
        m.startswith('teams/eng/workers/scout/WORKER.md: worker eng.scout: tools: names "send-email"') for m in messages
    ), messages


def routed_tree(make_tree, *, beta: str, routing: bool = True):
    extra = {"routing": "\n  fallback: eng.alpha"} if routing else {}
    return make_tree(
        {
            "teams/eng/mailboxes/desk/MAILBOX.md": mailbox_md("The desk.", members=("eng.alpha", "eng.beta"), **extra),
            "teams/eng/workers/alpha/WORKER.md": DESCRIBED,
            "teams/eng/workers/beta/WORKER.md": beta,
        }
    )


def test_a_routed_mailboxs_member_without_a_description_is_a_warning_naming_both_files(make_tree, settings):
    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    settings.WORKFORCE_ROOT = str(routed_tree(make_tree, beta=UNDESCRIBED))
    (warning,) = check_routed_members()
    assert isinstance(warning, checks.Warning) and warning.id == "mailboxes.W004"
    assert warning.msg == (
        "teams/eng/mailboxes/desk/MAILBOX.md: eng.desk routes each post to one member (routing:), but its member "
        "eng.beta has no description: in teams/eng/workers/beta/WORKER.md, so the route never chooses it."
    )
    assert warning.hint == "Add a description: line to teams/eng/workers/beta/WORKER.md saying what eng.beta answers."


@pytest.mark.parametrize("beta, routing", [(DESCRIBED, True), (UNDESCRIBED, False)])
def test_no_warning_when_every_member_is_described_or_the_mailbox_is_not_routed(make_tree, settings, beta, routing):
    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    settings.WORKFORCE_ROOT = str(routed_tree(make_tree, beta=beta, routing=routing))
    assert check_routed_members() == []


def test_manage_py_check_prints_the_warning_and_the_errors_together(make_tree, settings, db):
    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    root = routed_tree(make_tree, beta=UNDESCRIBED)
    (root / "teams/eng/workers/gamma").mkdir(parents=True)
    (root / "teams/eng/workers/gamma/WORKER.md").write_text("---\ndescripton: Gathers.\n---\n\nGather.\n")
    settings.WORKFORCE_ROOT = str(root)
    with pytest.raises(SystemCheckError) as failed:
        call_command("check")
    text = str(failed.value)
    assert "(mailboxes.W004) teams/eng/mailboxes/desk/MAILBOX.md: eng.desk routes each post" in text
    assert (
        'teams/eng/workers/gamma/WORKER.md: declares "descripton", which a worker cannot declare (did you mean `description`?)'
    ) in text
