"""Start-up: a yes/no setting refuses a typo by name (as healthchecks' ``envbool`` does), and
the order of the local apps in INSTALLED_APPS does not matter (mail once needed seats'
``ready()`` to have run first)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from workforce_project.settings import env_bool

REPO = Path(__file__).resolve().parents[2]
LOCAL_APPS = ["workforce", "boards", "mailboxes", "seats", "coordinators", "mail", "web"]


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", " yes ", "On"])
def test_the_yes_words_are_true(monkeypatch, raw):
    monkeypatch.setenv("WORKFORCE_X", raw)
    assert env_bool("WORKFORCE_X", False) is True


@pytest.mark.parametrize("raw", ["0", "false", "False", "no", " OFF "])
def test_the_no_words_are_false(monkeypatch, raw):
    monkeypatch.setenv("WORKFORCE_X", raw)
    assert env_bool("WORKFORCE_X", True) is False


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_unset_or_empty_is_the_default(monkeypatch, raw):
    if raw is None:
        monkeypatch.delenv("WORKFORCE_X", raising=False)
    else:
        monkeypatch.setenv("WORKFORCE_X", raw)
    assert env_bool("WORKFORCE_X", True) is True
    assert env_bool("WORKFORCE_X", False) is False


@pytest.mark.parametrize("raw", ["ture", "yess", "2", "enabled"])
def test_a_typo_is_refused_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("WORKFORCE_X", raw)
    with pytest.raises(ImproperlyConfigured) as refused:
        env_bool("WORKFORCE_X", False)
    assert str(refused.value) == f"WORKFORCE_X={raw!r} is not a yes/no value: write true or false (also 1/0, yes/no, on/off)."


def _manage(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "WORKFORCE_VAR_DIR": str(tmp_path / "var"), **env}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", ["DJANGO_DEBUG", "WORKFORCE_DB_POOL", "WORKFORCE_EXTERNAL_DISPATCHER"])
def test_a_mistyped_boolean_setting_stops_start_up(tmp_path, name):
    result = _manage(["check"], tmp_path, **{name: "ture", "DJANGO_SETTINGS_MODULE": "workforce_project.settings"})
    assert result.returncode == 1, result.stdout + result.stderr
    # One line naming the variable and what to write, not a traceback.
    assert result.stderr == f"setting: {name}='ture' is not a yes/no value: write true or false (also 1/0, yes/no, on/off).\n"


def test_a_multi_node_start_without_a_shared_key_writes_no_key_of_its_own(tmp_path):
    """Across machines a node's own key would make every other node refuse its tasks:
    ``serve`` refuses the setup, and before it nothing wrote ``secret_key``."""
    env = {"WORKFORCE_MULTI_NODE": "true", "DJANGO_SETTINGS_MODULE": "workforce_project.settings"}
    full = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "manage.py", "serve", "--no-cluster", "--addr", "127.0.0.1:0"],
        cwd=REPO,
        env={**full, "WORKFORCE_VAR_DIR": str(tmp_path / "var"), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0 and "DJANGO_SECRET_KEY" in result.stderr, result.stdout + result.stderr
    assert not (tmp_path / "var" / "secret_key").exists()


def _reordered_settings(tmp_path: Path, order: list[str]) -> dict[str, str]:
    """Environment for a settings module that is the project's, with the local apps in ``order``."""
    (tmp_path / "reordered_settings.py").write_text(
        "from workforce_project.settings import *  # noqa: F403\n"
        "from workforce_project.settings import INSTALLED_APPS as _APPS\n"
        f"_ORDER = {order!r}\n"
        "_at = _APPS.index('workforce')\n"
        "INSTALLED_APPS = [a for a in _APPS[:_at] if a not in _ORDER] + _ORDER + [a for a in _APPS[_at:] if a not in _ORDER]\n"
    )
    return {
        "DJANGO_SETTINGS_MODULE": "reordered_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")]),
    }


PROBE = (
    "from django.conf import settings\n"
    "from workforce.facets import CAPABILITIES, MAIL_READER\n"
    "from workforce.flows import registry\n"
    "from mail.tools import mail_send_capability\n"
    "agent = registry.require('agent')\n"
    "print([a for a in settings.INSTALLED_APPS if a in %r])\n"
    "print(mail_send_capability in CAPABILITIES.get(agent), MAIL_READER.get(agent) is not None)\n"
)


@pytest.mark.parametrize(
    "order",
    [
        ["workforce", "boards", "mailboxes", "mail", "seats", "coordinators", "web"],  # mail ahead of seats
        list(reversed(LOCAL_APPS)),
    ],
    ids=["mail-ahead-of-seats", "reversed"],
)
def test_the_local_apps_boot_in_any_order(tmp_path, order):
    env = _reordered_settings(tmp_path, order)
    check = _manage(["check"], tmp_path, **env)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "System check identified no issues" in check.stdout
    probe = _manage(["shell", "--no-imports", "-c", PROBE % (LOCAL_APPS,)], tmp_path, **env)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    assert probe.stdout.splitlines() == [repr(order), "True True"]
