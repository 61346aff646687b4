"""``workforce_project.checks.check_inline_turns``: the turns serve's web process runs
hold web pool connections, so they must stay below the pool (break-it: 4 slow turns with
WORKFORCE_WEB_CONCURRENCY=4 made a read wait 10 s and answer 503 database-unavailable)."""

from __future__ import annotations

import pytest
from django.core import checks

from tests.conftest import on_postgres
from workforce_project import checks as project_checks

POOL = {"min_size": 2, "max_size": 4, "timeout": 10, "reconnect_timeout": 3}


@pytest.mark.parametrize("turns", [4, 5])
def test_turns_as_many_as_the_web_pool_are_refused(turns, settings, monkeypatch):
    monkeypatch.setattr(project_checks, "web_pool_options", lambda: POOL)
    settings.WORKFORCE_INLINE_TURNS = turns
    (error,) = project_checks.check_inline_turns()
    assert isinstance(error, checks.Error) and error.id == "workforce_project.E030"
    assert error.msg == (
        f"WORKFORCE_INLINE_TURNS ({turns}) must be below WORKFORCE_WEB_CONCURRENCY (4): each turn in the web process "
        "holds one of the web pool's connections, and with every one held requests answer 503 database-unavailable."
    )


@pytest.mark.parametrize("turns", [0, 3])
def test_turns_below_the_web_pool_pass(turns, settings, monkeypatch):
    monkeypatch.setattr(project_checks, "web_pool_options", lambda: POOL)
    settings.WORKFORCE_INLINE_TURNS = turns
    assert project_checks.check_inline_turns() == []


def test_without_a_web_pool_the_check_says_nothing(settings, monkeypatch):
    monkeypatch.setattr(project_checks, "web_pool_options", lambda: None)
    settings.WORKFORCE_INLINE_TURNS = 100
    assert project_checks.check_inline_turns() == []


def test_on_several_machines_the_check_says_nothing(settings, monkeypatch):
    monkeypatch.setattr(project_checks, "web_pool_options", lambda: POOL)
    settings.WORKFORCE_INLINE_TURNS, settings.WORKFORCE_MULTI_NODE = 4, True
    assert project_checks.check_inline_turns() == []


def test_the_default_settings_pass_on_either_database(settings):
    # The defaults (2 turns, 16 connections) on PostgreSQL; no pool at all on SQLite.
    settings.WORKFORCE_INLINE_TURNS, settings.WORKFORCE_WEB_CONCURRENCY = 2, 16
    assert project_checks.check_inline_turns() == []
    settings.WORKFORCE_WEB_CONCURRENCY = 2
    expected = 1 if on_postgres() and project_checks.web_pool_options() is not None else 0
    assert len(project_checks.check_inline_turns()) == expected
