"""``serve`` prints each hire-time board warning once (not also as a log line, nor again
from its check or its cluster), and ``manage.py check`` warns about the same problems."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.conftest import REPO, wait_for
from tests.e2e.test_board_drain_cluster import tree

pytestmark = pytest.mark.e2e

UNATTENDED = 'mailbox eng.incidents holds board "escalations" (eng.incidents.escalations), and no hired seat drains it'
UNKNOWN = "seat eng.analyst drains board eng.incident.followups, which no mailbox holds"


def test_serve_prints_each_board_warning_once(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"))
    assert server.call("GET", "/api/mailboxes/eng.incidents/transcript").status == 200
    workers = int(server.env.get("WORKFORCE_Q_WORKERS") or 1)  # the settings' default
    # Every worker of the cluster has booted (django-q logs each one ready) before counting.
    log = wait_for(
        lambda: (text := server.log.read_text()).count("ready for work") >= workers and text,
        timeout=60,
        what=f"the cluster's {workers} workers to be ready",
        log=server.log,
    )
    assert log.count(UNATTENDED) == 1, log
    assert log.count(UNKNOWN) == 1, log
    assert f"warning: {UNATTENDED}" in log and f"warning: {UNKNOWN}" in log


def test_check_warns_about_the_board_problems(tmp_path, server_database):
    import os

    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(server_database)
    env["WORKFORCE_ROOT"] = str(tree(tmp_path / "tree"))
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "check"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"(mailboxes.W001) {UNKNOWN}" in done.stderr
    assert f"(mailboxes.W003) {UNATTENDED}" in done.stderr


def test_serve_warns_about_a_mailbox_whose_file_changed_after_it_was_opened(start_server, tmp_path):
    from tests.conftest import mailbox_md, write_tree

    root = tree(tmp_path / "tree")
    server = start_server(root)
    assert server.call("GET", "/api/mailboxes/eng.incidents/transcript").status == 200
    server.stop()
    assert "differs from what it was opened with" not in server.log.read_text()
    write_tree(
        root,
        {
            "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
                "Where the engineering team works incidents.", members=("eng.lead",), boards="[followups, escalations]"
            )
        },
    )
    again = start_server(root)
    assert again.call("GET", "/api/mailboxes/eng.incidents/transcript").status == 200
    log = again.log.read_text()
    assert log.count("differs from what it was opened with") == 1, log
    assert (
        "warning: mailbox eng.incidents's MAILBOX.md differs from what it was opened with: "
        "members (drops eng.analyst). An open mailbox keeps"
    ) in log


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_the_access_log_follows_workforce_log_level(start_server, tmp_path, level):
    server = start_server(tree(tmp_path / "tree"), "--no-cluster", env={"WORKFORCE_LOG_LEVEL": level})
    assert server.call("GET", "/api/mailboxes/eng.incidents/transcript").status == 200
    line = '"GET /api/mailboxes/eng.incidents/transcript HTTP/1.1" 200'
    if level == "INFO":
        wait_for(lambda: line in server.log.read_text(), timeout=10, what="the access log line", log=server.log)
    else:
        assert server.call("GET", "/api/mailboxes/eng.incidents/transcript").status == 200
        assert line not in server.log.read_text()
        assert "serving " in server.log.read_text()  # serve's own lines are still said
