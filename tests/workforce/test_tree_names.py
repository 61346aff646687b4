"""The tree's name rule (spec: "Mailboxes on disk" / "A mailbox's id comes from the folders")."""

import pytest

from workforce.tree.names import NAME_RULE, RESERVED_NAMES, is_seat_id, is_valid_name, name_problem


def test_rule_sentence():
    assert NAME_RULE == "lowercase letters, digits and single hyphens, at most 64 characters"


@pytest.mark.parametrize("name", ["standup", "daily-standup", "a", "0", "team-2", "a" * 64, "com10", "lpt0"])
def test_good_names(name):
    assert name_problem(name) is None
    assert is_valid_name(name)


@pytest.mark.parametrize(
    "name",
    ["Stand Up", "stand.up", "Standup", "a" * 65, "double--hyphen", "-lead", "trail-", "", "under_score", "tab\t", "ok\n", "é"],
)
def test_bad_names_quote_the_name_and_give_the_rule(name):
    problem = name_problem(name)
    assert problem == f'"{name}" breaks the name rule: {NAME_RULE}.'
    assert not is_valid_name(name)


def test_stand_up_message_exactly():
    assert name_problem("Stand Up") == (
        '"Stand Up" breaks the name rule: lowercase letters, digits and single hyphens, at most 64 characters.'
    )


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES))
def test_reserved_device_names(name):
    assert name_problem(name) == f'"{name}" is a reserved device name and cannot name a folder.'


def test_reserved_set_is_the_windows_devices():
    expected = {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(1, 10)} | {f"lpt{i}" for i in range(1, 10)}
    assert RESERVED_NAMES == expected


def test_con_message_exactly():
    assert name_problem("con") == '"con" is a reserved device name and cannot name a folder.'


def test_non_string_is_a_problem_not_a_crash():
    assert name_problem(42) is not None
    assert not is_valid_name(None)


@pytest.mark.parametrize("value", ["lead", "engineering.lead", "eng-2.data-analyst", "a" * 64 + "." + "b" * 64])
def test_seat_ids(value):
    assert is_seat_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        ".",
        "eng.",
        ".lead",
        "a.b.c",
        "Eng.lead",
        "eng.Lead",
        "eng lead",
        "eng..lead",
        "con",
        "eng.con",
        42,
        None,
        ["eng.lead"],
        "a" * 65,
    ],
)
def test_not_seat_ids(value):
    assert not is_seat_id(value)
