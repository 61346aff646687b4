"""Declaring boards (spec "Holding a board", "Working the rows"):
names, ledger ids, tool suffixes, and what the binder refuses."""

from __future__ import annotations

import pytest

from boards.naming import board_name_problem, mailbox_board, split_board_id, tool_suffix
from mailboxes.binder import MailboxKindSpec, RosterRefused, bind_roster
from mailboxes.reader import MailboxManifest

KINDS = {"mailbox": MailboxKindSpec("mailbox", builtin=True), "mine": MailboxKindSpec("mine")}


def record(mailbox_id: str, **declared) -> MailboxManifest:
    return MailboxManifest(mailbox_id, {"description": "d", "members": ["eng.lead"], **declared}, "charter")


def problems_of(*records) -> list[tuple[str, str]]:
    with pytest.raises(RosterRefused) as refused:
        bind_roster(records, KINDS)
    return refused.value.problems


def test_ledger_id_and_suffix():
    board = mailbox_board("engineering.incidents", "followups")
    assert board.id == "engineering.incidents.followups"
    assert board.tool_suffix == "engineering_incidents_followups"
    assert tool_suffix("support.help.escalations") == "support_help_escalations"
    assert tool_suffix("eng.feature-x.wörk") == "eng_feature_x_w_rk"
    assert split_board_id("engineering.incidents.followups") == ("engineering.incidents", "followups")
    with pytest.raises(ValueError):
        split_board_id("followups")


@pytest.mark.parametrize(
    "name",
    [
        "",
        " ",
        "a b",
        "a\tb",
        "feature.triage",
        "a/b",
        "a*",
        "[a]",
        "a]",
        "lock",
        "LOCK",
        "Lock",
        "__proto__",
        "prototype",
        "constructor",
        3,
        None,
    ],
)
def test_bad_board_names(name):
    assert board_name_problem(name) is not None
    with pytest.raises(ValueError):
        mailbox_board("eng.incidents", name)


@pytest.mark.parametrize("name", ["followups", "on-call", "work_x", "Escalations", "locks", "proto"])
def test_good_board_names(name):
    assert board_name_problem(name) is None


def test_mailbox_board_needs_a_mailbox_id():
    with pytest.raises(ValueError):
        mailbox_board("", "followups")


def test_bound_boards_and_their_ledger_ids():
    roster = bind_roster([record("eng.incidents", boards=["followups", "escalations"])], KINDS)
    mailbox = roster.mailbox("eng.incidents")
    assert mailbox.boards == ["followups", "escalations"]
    assert mailbox.board_actions is False
    assert mailbox.board_id("followups") == "eng.incidents.followups"


@pytest.mark.parametrize(
    "boards,fragment",
    [
        ("followups", "boards: must be a list of names"),
        ({"a": 1}, "boards: must be a list of names"),
        (["a.b"], "breaks the board name rule"),
        ([""], "can't be empty"),
        (["lock"], 'reserved: "lock"'),
        (["constructor"], "reserved: __proto__, prototype and constructor"),
        (["work", "work"], '"work" is declared twice'),
        ([1], "is not text"),
    ],
)
def test_binder_refuses_bad_boards_naming_the_mailbox(boards, fragment):
    problems = problems_of(record("eng.incidents", boards=boards))
    assert problems and all(mailbox_id == "eng.incidents" for mailbox_id, _ in problems)
    assert any(fragment in message for _, message in problems), problems


def test_boards_on_a_kind_of_your_own_are_refused():
    problems = problems_of(record("eng.odd", flow="mine", boards=["work"]))
    assert any('a kind of your own ("mine") cannot hold a board' in m for _, m in problems)


@pytest.mark.parametrize("value", ["yes", "true", 1, None, ["true"]])
def test_board_actions_must_be_true_or_false(value):
    problems = problems_of(record("eng.incidents", boards=["work"], boardActions=value))
    assert ("eng.incidents", "boardActions: must be true or false") in problems


@pytest.mark.parametrize("opted_in", ["first", "second", "both"])
def test_colliding_suffixes_are_refused_naming_both_boards_when_either_opted_in(opted_in):
    """The spec's own example: eng.feature's work and eng_feature's work both give
    eng_feature_work."""
    first = record("eng.feature", boards=["work"], boardActions=opted_in in ("first", "both"))
    second = record("eng_feature", boards=["work"], boardActions=opted_in in ("second", "both"))
    problems = problems_of(first, second)
    messages = [m for _, m in problems if "eng_feature_work" in m]
    assert len(messages) == 1
    assert "eng.feature.work" in messages[0] and "eng_feature.work" in messages[0]


def test_colliding_suffixes_without_board_actions_are_fine():
    roster = bind_roster([record("eng.feature", boards=["work"]), record("eng_feature", boards=["work"])], KINDS)
    assert len(roster.mailboxes) == 2


def test_a_collision_in_a_tree_on_disk(make_tree):
    """Folder names can't hold an underscore, but a board name can: eng.feature-work's
    board x and eng.feature's board work_x both give eng_feature_work_x."""
    from mailboxes.roster import TreeError, load_roster

    from ..conftest import mailbox_md

    root = make_tree(
        {
            "teams/eng/mailboxes/feature-work/MAILBOX.md": mailbox_md(boards="[x]", boardActions="true"),
            "teams/eng/mailboxes/feature/MAILBOX.md": mailbox_md(boards="[work_x]"),
        }
    )
    with pytest.raises(TreeError) as refused:
        load_roster(root)
    text = str(refused.value)
    assert "eng.feature-work.x" in text and "eng.feature.work_x" in text and "eng_feature_work_x" in text
