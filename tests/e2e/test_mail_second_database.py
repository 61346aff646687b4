"""A database started on vaults another database wrote (README: "a second database on
the same directory ... indexes the same mail at its first start"): ``serve`` indexes
them before it answers, so the first request finds the mail (it answered 404
``thread-not-found`` until the periodic sweep, settling time included, about 35 s)."""

from __future__ import annotations

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import Server

pytestmark = pytest.mark.e2e

IDLE = """---
description: Takes no mail runs.
model: embedded/echo
---

Read the mail.
"""


def send(server: Server, to: str, body: str, subject: str) -> dict:
    answer = server.call("POST", "/api/mail", {"userId": "ann@example.org", "to": to, "subject": subject, "body": body})
    assert answer.status == 201, answer.body
    return answer.body


def test_a_second_database_on_the_same_vaults_answers_their_mail_at_once(tmp_path, start_server):
    root = write_tree(tmp_path / "tree", {"teams/eng/workers/idle/WORKER.md": IDLE})
    first = start_server(root, "--no-cluster")
    assert send(first, "eng.idle", "Hello", "Hi")["thread"] == "eng.idle:1"
    assert send(first, "eng.idle", "Again", "Hi again")["thread"] == "eng.idle:2"
    first.stop()
    # The same WORKFORCE_VAR_DIR (its vaults, its secret key), another database.
    second = start_server(root, "--no-cluster", env={"DATABASE_URL": f"sqlite:///{tmp_path / 'second.sqlite3'}"})
    thread = second.call("GET", "/api/mail/eng.idle:1")  # the first request it answers
    assert thread.status == 200, thread.body
    assert thread.body["subject"] == "Hi" and thread.body["from"] == "human:ann@example.org"
    assert [m["body"] for m in thread.body["messages"]] == ["Hello"]
    listed = second.call("GET", "/api/mail?to=eng.idle")
    assert [t["thread"] for t in listed.body["threads"]] == ["eng.idle:2", "eng.idle:1"]
    assert "mail: indexed 2 threads from vaults this database had not read" in second.log.read_text()
    assert send(second, "eng.idle", "Third", "Hi there")["thread"] == "eng.idle:3"
