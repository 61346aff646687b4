"""The secret key: with DJANGO_SECRET_KEY unset each installation makes its own, once,
shared by every process with the same WORKFORCE_VAR_DIR; the repository's old constant
is refused by a system check."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core import checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from workforce_project.checks import check_secret_key
from workforce_project.secret_key import REPOSITORY_KEY, load_or_create_secret_key

REPO = Path(__file__).resolve().parents[2]


def _settings_key(var_dir: Path) -> str:
    """SECRET_KEY as a fresh process with no DJANGO_SECRET_KEY and ``var_dir`` sees it."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env.update(WORKFORCE_VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="workforce_project.settings")
    out = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.SECRET_KEY)"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def test_without_a_key_each_installation_makes_its_own_and_keeps_it(tmp_path):
    first, again = _settings_key(tmp_path / "a"), _settings_key(tmp_path / "a")
    other = _settings_key(tmp_path / "b")
    assert first != REPOSITORY_KEY and len(first) == 50
    assert again == first  # the web server and the cluster (same VAR_DIR) share it
    assert other != first  # another installation has another key
    key_file = tmp_path / "a" / "secret_key"
    assert key_file.read_text().strip() == first
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def _race(path: str, barrier, results) -> None:
    barrier.wait(timeout=30)
    results.put(load_or_create_secret_key(Path(path)))


def test_processes_starting_at_once_end_with_the_same_key(tmp_path):
    path = tmp_path / "var" / "secret_key"
    n = 8
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(path), barrier, results)) for _ in range(n)]
    for proc in procs:
        proc.start()
    keys = [results.get(timeout=60) for _ in range(n)]
    for proc in procs:
        proc.join(timeout=30)
    assert len(set(keys)) == 1
    assert keys[0] == path.read_text().strip()
    assert sorted(p.name for p in path.parent.iterdir()) == ["secret_key"]  # no temporary file left


def test_an_existing_key_file_is_read_not_replaced(tmp_path):
    path = tmp_path / "secret_key"
    path.write_text("kept-key\n")
    assert load_or_create_secret_key(path) == "kept-key"


def test_the_repository_key_is_refused_by_a_check(settings):
    settings.SECRET_KEY = REPOSITORY_KEY
    (error,) = check_secret_key()
    assert isinstance(error, checks.Error) and error.id == "workforce_project.E001"
    with pytest.raises(SystemCheckError, match="workforce_project.E001"):
        call_command("check")


def test_a_key_of_ones_own_passes_the_check(settings):
    settings.SECRET_KEY = "x" * 50
    assert check_secret_key() == []
