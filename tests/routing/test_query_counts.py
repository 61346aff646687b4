"""The routed fan-out does not grow with the roster (fan-out paths assert
their query count)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes.models import Route
from mailboxes.routing import do_route_post
from workforce.sessions import do_run_action
from workforce.testing import mock_evaluation_model

from .conftest import DESK, MEMBER, desk_md, worker_md

# The desk's first routed post, inside the test's transaction (SAVEPOINT and RELEASE
# stand for BEGIN and COMMIT): the session read under its lock and the request's INSERT
# (PostgreSQL: one CTE statement), the line, its item (PostgreSQL: one CTE statement
# that also completes the request; SQLite: the counters' UPDATE … RETURNING, the
# line's INSERT, the item's INSERT), the ledger (read it; being the first, start it
# from the history window: its request ids, its lines; INSERT it), the fan-out's
# running route request, the Route row (its task goes with the commit), and on SQLite
# the request's UPDATE. A later post reads the ledger and UPDATEs it instead (two fewer; on PostgreSQL
# the line's statement does both: four fewer). On PostgreSQL the first post's line statement
# tries the ledger's append too, finds no ledger, and the post then reads it as SQLite does.
# Its decision: read the route (with its request), the members' seats as the principal
# reaches them now (one query, whatever the roster: a seat hired or fired while the app
# runs), the hold check, the decision's conditional UPDATE, the route request locked and
# updated, the item (PostgreSQL: one CTE statement that also bumps the item counter;
# SQLite: the counter's UPDATE … RETURNING and the INSERT), and the one delivery, released
# in its own INSERT (nothing is held and the bounds have room: mailboxes.fairness,
# do_insert_deliveries; no release statement after it) with its task.
EXPECTED_POST = {"postgresql": 10, "sqlite": 14}
EXPECTED_DECIDE = {"postgresql": 12, "sqlite": 13}
# A later post: no history window read and no INSERT (SQLite: the ledger read and its
# UPDATE instead; PostgreSQL: the line's own statement reads and updates it, no statement
# of its own: mailboxes.lines.LedgerAppend).
LATER_POST_FEWER = {"postgresql": 4, "sqlite": 2}
LATER_POST_LEDGER = {"postgresql": ["WITH"], "sqlite": ["SELECT", "UPDATE"]}


def big_desk(n: int) -> dict[str, str]:
    names = [f"w{i}" for i in range(n)]
    files = {
        "teams/support/mailboxes/desk/MAILBOX.md": desk_md(
            members=[f"support.{m}" for m in names], routing="{fallback: support.w0}"
        )
    }
    files.update(
        {f"teams/support/workers/{m}/WORKER.md": worker_md(f"Questions about topic {m}.", model="embedded/echo") for m in names}
    )
    return files


def counts(routed, org, django_capture_on_commit_callbacks, n: int) -> tuple[int, int]:
    routed(big_desk(n), route=mock_evaluation_model(answers={"member": "support.w1"}))
    with django_capture_on_commit_callbacks(execute=False):
        with CaptureQueriesContext(connection) as posting:
            do_run_action(org=org, kind="mailbox", session_id=DESK, action="post", input={"body": "hi"}, user_id=MEMBER)
    with django_capture_on_commit_callbacks(execute=False):
        with CaptureQueriesContext(connection) as deciding:
            assert do_route_post(Route.objects.get().pk) == "evaluated"
    return len(posting), len(deciding)


def test_a_routed_post_and_its_decision_cost_the_same_for_3_or_30_members(routed, org, django_capture_on_commit_callbacks):
    small = counts(routed, org, django_capture_on_commit_callbacks, 3)
    from mailboxes.models import Line
    from workforce.models import Session

    Session.objects.filter(session_id=DESK).delete()
    Line.objects.all().delete()
    big = counts(routed, org, django_capture_on_commit_callbacks, 30)
    assert small == big == (EXPECTED_POST[connection.vendor], EXPECTED_DECIDE[connection.vendor]), (small, big)


def test_a_later_routed_post_reads_and_updates_the_ledger_only(routed, org, django_capture_on_commit_callbacks):
    routed(big_desk(3), route=mock_evaluation_model(answers={"member": "support.w1"}))
    for body in ("first", "second"):
        with django_capture_on_commit_callbacks(execute=False):
            with CaptureQueriesContext(connection) as posting:
                do_run_action(org=org, kind="mailbox", session_id=DESK, action="post", input={"body": body}, user_id=MEMBER)
    # PostgreSQL: the ledger's read and its update are CTEs of the line's statement.
    assert len(posting) == EXPECTED_POST[connection.vendor] - LATER_POST_FEWER[connection.vendor]
    ledger = [q["sql"] for q in posting.captured_queries if "mailboxes_routeledger" in q["sql"]]
    assert [sql.split(None, 1)[0] for sql in ledger] == LATER_POST_LEDGER[connection.vendor]
    if connection.vendor == "postgresql":
        assert '"mailboxes_line"' in ledger[0]  # the line's own statement
    assert not any(q["sql"].startswith('SELECT "mailboxes_line"') for q in posting.captured_queries)  # no line read back
    route = Route.objects.get(post__body="second")
    assert route.previous.body == "first" and [entry["text"] for entry in route.recent] == ["first"]
