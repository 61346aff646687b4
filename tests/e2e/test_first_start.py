"""The first start of ``serve`` says what it is doing (issue 25 item 12), on a real
``serve`` over an empty database: migrating (the fast way, docs/running.md "The first
start"), reading the tree, opening its mailboxes, serving, and starting the task cluster
once the web server answers; the next start migrates nothing and says nothing of it.
No timing is asserted here (``bench/first_start.py`` measures it)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e

LISTENER = "---\ndescription: Alpha.\nmodel: embedded/echo\n---\n\nYou listen.\n"


def lines_of(server) -> list[str]:
    return server.log.read_text().splitlines()


def test_the_first_start_says_what_it_does_in_order(start_server, tmp_path):
    from django.db.migrations.loader import MigrationLoader

    total = len(MigrationLoader(None, ignore_no_migrations=True).graph.nodes)
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": LISTENER,
        },
    )
    server = start_server(root)
    wait_for(lambda: "task cluster started (pid " in server.log.read_text(), timeout=60, what="the cluster", log=server.log)
    assert server.call("GET", "/api/").status == 200
    said = lines_of(server)
    expected: list[str | re.Pattern[str]] = [
        f"migrating the database ({total} of {total} migrations to apply)",
        re.compile(r"migrated in [0-9.]+s: a new database, its tables made from the models"),
        f"reading the workforce tree {root} and hiring its workers",
        "opening 1 mailbox(es)",
        "eng.standup: opened",
        f"serving {root} on http://127.0.0.1:",
        "open the pages at http://127.0.0.1:",
        "starting the task cluster once the web server answers",
        "task cluster started (pid ",
    ]
    at = []
    for want in expected:
        found = [
            i for i, line in enumerate(said) if (want.fullmatch(line) if isinstance(want, re.Pattern) else line.startswith(want))
        ]
        assert found, (want, said)
        at.append(found[0])
    assert at == sorted(at), said
    # The cluster starts once uvicorn has: after its "startup complete" line.
    started = next(i for i, line in enumerate(said) if "Application startup complete" in line)
    assert started < at[-1], said
    server.stop()

    again = start_server(root)
    wait_for(lambda: "task cluster started (pid " in again.log.read_text(), timeout=60, what="the cluster", log=again.log)
    said = lines_of(again)
    assert not any(line.startswith(("migrating the database", "migrated in")) for line in said), said
    assert "eng.standup: already open" in said and "opening 1 mailbox(es)" in said
