"""Settings are read as ``settings.X``; each default is defined once, in
workforce_project/settings.py (docs/architecture.md "Settings and reason codes")."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
APPS = ("workforce", "boards", "seats", "mailboxes", "coordinators", "workforce_project")
READ = re.compile(r"\bsettings\.([A-Z][A-Z0-9_]*)\b|getattr\(\s*settings\s*,\s*\"([A-Z][A-Z0-9_]*)\"")
OWN_DEFAULT = re.compile(r"getattr\(\s*settings\s*,\s*\"[A-Z][A-Z0-9_]*\"\s*,")
# Modules still to switch to settings.X (the agent-layer change switched its own).
PENDING: set[str] = set()


def sources():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" not in path.parts and path.name not in {"settings.py", "settings_test.py"}:
                yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_every_setting_the_code_reads_is_defined_in_settings_py():
    read = {name for _, text in sources() for match in READ.finditer(text) for name in match.groups() if name}
    assert {"WORKFORCE_ROUTE_TIMEOUT", "WORKFORCE_SWEEP_SECONDS", "WORKFORCE_HISTORY_WINDOW"} <= read
    assert sorted(name for name in read if not hasattr(settings, name)) == []


def test_no_module_gives_a_setting_a_default_of_its_own():
    found = [
        f"{rel}:{text[: m.start()].count(chr(10)) + 1}"
        for rel, text in sources()
        if rel not in PENDING
        for m in OWN_DEFAULT.finditer(text)
    ]
    assert found == []


def test_the_route_timeout_defaults_to_the_model_timeout():
    assert settings.WORKFORCE_ROUTE_TIMEOUT == settings.WORKFORCE_MODEL_TIMEOUT == 60
