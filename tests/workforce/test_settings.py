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


def _settings_error(env: dict[str, str]) -> str:
    """What importing the settings with ``env`` says on stderr (empty when it imports)."""
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", "import workforce_project.settings"],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("WORKFORCE_")}, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return run.stderr.strip().splitlines()[-1] if run.returncode else ""


def test_the_web_process_turns_refuse_a_negative_or_non_number_at_start():
    assert _settings_error({"WORKFORCE_INLINE_TURNS": "0"}) == ""
    assert _settings_error({"WORKFORCE_INLINE_TURNS": "-1"}) == (
        "django.core.exceptions.ImproperlyConfigured: WORKFORCE_INLINE_TURNS=-1 is negative; 0 sends every turn to the cluster."
    )
    assert _settings_error({"WORKFORCE_INLINE_TURNS": "two"}) == (
        "django.core.exceptions.ImproperlyConfigured: WORKFORCE_INLINE_TURNS='two' is not a whole number."
    )


def test_the_log_level_takes_any_case_and_refuses_what_is_not_one():
    assert _settings_error({"WORKFORCE_LOG_LEVEL": "warning"}) == ""
    assert _settings_error({"WORKFORCE_LOG_LEVEL": "loud"}) == (
        "django.core.exceptions.ImproperlyConfigured: WORKFORCE_LOG_LEVEL='LOUD' is not a log level: "
        "use DEBUG, INFO, WARNING, ERROR or CRITICAL."
    )


def test_token_authentication_takes_the_token_as_token_or_bearer():
    """With WORKFORCE_AUTH=token the REST views read a DRF token under either keyword, then a
    session (docs/api.md "Endpoints"); without it they read none."""
    import json
    import os
    import subprocess
    import sys

    def classes(auth: str) -> list[str]:
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, workforce_project.settings as s; print(json.dumps(s.REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']))",
            ],
            cwd=ROOT,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("WORKFORCE_")}, "WORKFORCE_AUTH": auth},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        return json.loads(run.stdout.strip().splitlines()[-1])

    assert classes("token") == [
        "rest_framework.authentication.TokenAuthentication",
        "workforce.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ]
    assert classes("none") == []


def _database_connection_params(env: dict[str, str]) -> dict:
    """The default database's ``OPTIONS`` and what Django hands psycopg from them
    (``get_connection_params``: the cursor class's binding, ``"server"`` or ``"client"``,
    and ``prepare_threshold``), in a fresh process whose settings read ``env`` (no
    connection is opened)."""
    import json
    import os
    import subprocess
    import sys

    code = (
        "import json, django; django.setup()\n"
        "from django.db import connection\n"
        "from django.conf import settings\n"
        "options = settings.DATABASES['default'].get('OPTIONS', {})\n"
        "params = connection.get_connection_params() if connection.vendor == 'postgresql' else {}\n"
        "binding = None\n"
        "if params:\n"
        "    import psycopg\n"
        "    binding = 'client' if issubclass(params['cursor_factory'], psycopg.ClientCursor) else 'server'\n"
        "print(json.dumps({'options': {k: options[k] for k in ('server_side_binding', 'prepare_threshold') if k in options},"
        " 'binding': binding, 'threshold': params.get('prepare_threshold')}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("WORKFORCE_") and k != "DATABASE_URL"},
            "DJANGO_SETTINGS_MODULE": "workforce_project.settings",
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


# Never connected to: the settings and the connection parameters are read, nothing more.
PG_URL = "postgres://nobody@127.0.0.1:1/not_opened"


def test_postgresql_binds_server_side_and_prepares_by_default(tmp_path):
    assert _database_connection_params({"DATABASE_URL": PG_URL, "WORKFORCE_VAR_DIR": str(tmp_path)}) == {
        "options": {"server_side_binding": True, "prepare_threshold": 2},
        "binding": "server",
        "threshold": 2,
    }


def test_prepared_statements_off_binds_client_side_and_prepares_nothing(tmp_path):
    for word in ("false", "0", "off"):
        env = {"DATABASE_URL": PG_URL, "WORKFORCE_DB_PREPARED": word, "WORKFORCE_VAR_DIR": str(tmp_path)}
        assert _database_connection_params(env) == {
            "options": {},
            "binding": "client",
            "threshold": None,
        }


def test_sqlite_takes_no_postgresql_options(tmp_path):
    assert _database_connection_params({"WORKFORCE_VAR_DIR": str(tmp_path)}) == {
        "options": {},
        "binding": None,
        "threshold": None,
    }
