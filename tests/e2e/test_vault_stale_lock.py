"""A vault lock a killed writer left (issue 22, item 9) on a real ``serve``: mail to that
agent is delivered and its run completes, the lock is gone, and the log names the file.
Before the fix every ``POST /api/mail`` to the agent answered 503 ``vault-unavailable``
after about 11 s, for good."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import session_requests, wait_for
from tests.e2e.test_mail_cluster import worker

pytestmark = pytest.mark.e2e


def test_mail_to_an_agent_whose_vault_a_killed_writer_left_locked_is_delivered(tmp_path, start_server):
    root = write_tree(tmp_path / "tree", {"teams/eng/workers/alpha/WORKER.md": worker("Reads every mail.")})
    server = start_server(root)
    mail = {"userId": "ann@example.org", "to": "eng.alpha", "subject": "First", "body": "Hello."}
    assert server.call("POST", "/api/mail", mail).status == 201

    # What a SIGKILL of serve in the middle of moving the branch leaves behind.
    vault = Path(server.env["WORKFORCE_VAR_DIR"]) / "vaults" / "default" / "eng.alpha.git"
    lock = vault / "refs" / "heads" / "main.lock"
    lock.write_bytes(b"0" * 40 + b"\n")
    past = time.time() - 120
    os.utime(lock, (past, past))

    started = time.monotonic()
    answer = server.call("POST", "/api/mail", {**mail, "subject": "Second"})
    took = time.monotonic() - started
    assert answer.status == 201, answer.body
    assert answer.body["thread"] == "eng.alpha:2"
    assert took < 5, f"the post took {took:.1f}s"
    assert not lock.exists()

    def both_runs_done():
        runs = [r for r in session_requests(server, "mail:eng.alpha", "onMail") if r["status"] == "completed"]
        return {r["output"]["thread"] for r in runs} >= {"eng.alpha:1", "eng.alpha:2"}

    wait_for(both_runs_done, timeout=90, what="both mails' runs completed", log=server.log)
    assert f"removed the stale vault lock {lock}" in server.log.read_text()
