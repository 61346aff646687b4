"""System checks: a bad tree stops start-up with every problem named at once
(spec "Treat a non-empty errors as fatal"), and django-q2's timeout stays below retry with
finite attempts."""

from __future__ import annotations

import pytest
from django.core import checks
from django.test import override_settings

from mailboxes.checks import check_workforce_tree
from tests.conftest import mailbox_md, write_tree
from workforce.checks import check_q_cluster


def test_a_good_tree_passes(make_tree, settings):
    settings.WORKFORCE_ROOT = str(make_tree())
    assert check_workforce_tree() == []


def test_the_example_tree_passes():
    assert check_workforce_tree() == []


def test_a_bad_tree_reports_every_problem_at_once(tmp_path, settings):
    root = write_tree(
        tmp_path / "bad",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Fine."),
            "teams/eng/mailboxes/lounge/README.md": "no mailbox here\n",
            "teams/eng/mailboxes/Stand Up/MAILBOX.md": mailbox_md("Bad folder."),
            "teams/eng/mailboxes/sys/MAILBOX.md": mailbox_md("System.", system="You are a bot."),
            "teams/eng/mailboxes/typo/MAILBOX.md": mailbox_md("Typo.", member="[eng.lead]"),
            "teams/eng/mailboxes/boards/MAILBOX.md": mailbox_md("Boards.", boards="[a.b, lock]"),
            "teams/eng/channels/old/CHANNEL.md": mailbox_md("Old."),
        },
    )
    settings.WORKFORCE_ROOT = str(root)
    errors = check_workforce_tree()
    assert len(errors) == 1
    (error,) = errors
    assert isinstance(error, checks.Error) and error.id == "workforce.E002"
    text = error.msg
    assert "teams/eng/mailboxes/lounge" in text
    assert "Stand Up" in text
    assert "system:" in text and "refused-declaration" in text
    assert "pre-rename-record" in text and "CHANNEL.md" in text
    assert '"member"' in text and "eng.typo" in text
    assert "eng.boards" in text and "a.b" in text and "lock" in text
    assert "refused 2 of 3 declarations" in text  # eng.standup binds; the check still fails


def test_load_errors_alone_fail_the_check(tmp_path, settings):
    root = write_tree(tmp_path / "bad", {"teams/eng/mailboxes/lounge/README.md": "nothing\n"})
    settings.WORKFORCE_ROOT = str(root)
    (error,) = check_workforce_tree()
    assert "teams/eng/mailboxes/lounge" in error.msg


def test_an_unreadable_root_fails_the_check(tmp_path, settings):
    settings.WORKFORCE_ROOT = str(tmp_path / "missing")
    (error,) = check_workforce_tree()
    assert error.id == "workforce.E001"
    assert str(tmp_path / "missing") in error.msg


def test_the_tree_check_runs_under_manage_py_check(tmp_path, settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.WORKFORCE_ROOT = str(write_tree(tmp_path / "bad", {"teams/eng/mailboxes/lounge/README.md": "x\n"}))
    with pytest.raises(SystemCheckError) as caught:
        call_command("check")
    assert "teams/eng/mailboxes/lounge" in str(caught.value)


GOOD = {"name": "t", "timeout": 60, "retry": 90, "max_attempts": 3, "orm": "default"}


def ids(errors) -> list[str]:
    return [e.id for e in errors]


def test_a_good_q_cluster_passes():
    with override_settings(Q_CLUSTER=GOOD):
        assert check_q_cluster() == []


@pytest.mark.parametrize("timeout,retry", [(90, 90), (120, 60)])
def test_timeout_not_below_retry_is_refused(timeout, retry):
    with override_settings(Q_CLUSTER={**GOOD, "timeout": timeout, "retry": retry}):
        errors = check_q_cluster()
    assert ids(errors) == ["workforce.E010"]
    assert str(timeout) in errors[0].msg and str(retry) in errors[0].msg


@pytest.mark.parametrize("missing", ["timeout", "retry"])
def test_timeout_or_retry_missing_is_refused(missing):
    conf = {k: v for k, v in GOOD.items() if k != missing}
    with override_settings(Q_CLUSTER=conf):
        assert ids(check_q_cluster()) == ["workforce.E010"]


@pytest.mark.parametrize("attempts", [None, 0, -1, "3"])
def test_missing_or_unbounded_max_attempts_is_refused(attempts):
    conf = {k: v for k, v in GOOD.items() if k != "max_attempts"}
    if attempts is not None:
        conf["max_attempts"] = attempts
    with override_settings(Q_CLUSTER=conf):
        assert ids(check_q_cluster()) == ["workforce.E011"]


def test_both_problems_are_reported_at_once():
    with override_settings(Q_CLUSTER={"timeout": 200, "retry": 100}):
        assert ids(check_q_cluster()) == ["workforce.E010", "workforce.E011"]


def test_the_project_settings_pass():
    from workforce_project import settings as project_settings

    with override_settings(Q_CLUSTER=project_settings.Q_CLUSTER):
        assert check_q_cluster() == []
