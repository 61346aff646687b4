"""A post is one transaction of a few statements (issue "Speed", the lean post path;
docs/architecture.md "A post end to end"): the counts are exact, per database, so a
change that adds a statement to the post fails here."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes.models import Line
from tests.conftest import MEMBER, on_postgres
from workforce.models import Item, Request, Session
from workforce.sessions import do_run_action

# A plain post (a mailbox kind without a notify block or a route), as the test's
# transaction shows it: its BEGIN/COMMIT are the SAVEPOINT/RELEASE around it here.
# PostgreSQL, two statements:
#   WITH found AS (SELECT session … FOR UPDATE), inserted AS (INSERT request) …
#       the session under its row lock (the action locks_session) and the running request
#   WITH counters AS (UPDATE session SET item_seq + 1, line_seq + 1 … RETURNING),
#        line AS (INSERT line), item AS (INSERT item), settled AS (UPDATE request) …
#       both numbers from the one locked row, the line, its item, the request completed
# SQLite (no data-modifying CTE; a statement costs no round trip there), six:
#   SELECT session; INSERT request; UPDATE session … RETURNING item_seq, line_seq;
#   INSERT line … RETURNING id; INSERT item; UPDATE request (completed).
PLAIN_POST = {
    "postgresql": ["SAVEPOINT", "WITH", "WITH", "RELEASE"],
    "sqlite": ["SAVEPOINT", "SELECT", "INSERT", "UPDATE", "INSERT", "INSERT", "UPDATE", "RELEASE"],
}

# A refused post writes nothing: its transaction is rolled back whole, and the failed
# request is written on its own (the session read again, the request INSERT).
REFUSED_POST = {
    "postgresql": ["SAVEPOINT", "WITH", "ROLLBACK", "RELEASE", "SAVEPOINT", "SELECT", "INSERT", "RELEASE"],
    "sqlite": ["SAVEPOINT", "SELECT", "INSERT", "ROLLBACK", "RELEASE", "SAVEPOINT", "SELECT", "INSERT", "RELEASE"],
}


def _verbs(captured: CaptureQueriesContext) -> list[str]:
    return [query["sql"].split(None, 1)[0].upper() for query in captured.captured_queries]


def _post(org, body: str, **extra) -> Request:
    return do_run_action(
        org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": body, **extra}, user_id=MEMBER
    )


def test_a_plain_post_is_one_short_transaction(open_tree, org, django_assert_num_queries):
    open_tree()
    _post(org, "first")
    expected = PLAIN_POST[connection.vendor]
    with django_assert_num_queries(4 if on_postgres() else 8):
        with CaptureQueriesContext(connection) as captured:
            answer = _post(org, "second")
    assert _verbs(captured) == expected
    assert answer.status == "completed"
    line = Line.objects.get(body="second")
    assert answer.output == line.as_wire()
    assert line.seq == 2 and line.request_id == answer.pk
    session = Session.objects.get(session_id="eng.standup")
    assert (session.line_seq, session.item_seq) == (2, 2)
    [item] = Item.objects.filter(session=session, seq=2)
    assert (item.component, item.data, item.request_id) == ("mailbox-post", line.as_wire(), answer.pk)


def test_a_refused_post_writes_nothing_and_records_its_failed_request(open_tree, org):
    open_tree()
    _post(org, "first")
    with CaptureQueriesContext(connection) as captured:
        refused = _post(org, "who?", author="mallory")
    assert _verbs(captured) == REFUSED_POST[connection.vendor]
    assert refused.status == "failed" and refused.error["reason"] == "author-not-a-member"
    stored = Request.objects.get(request_id=refused.request_id)
    assert (stored.status, stored.error, stored.output) == ("failed", refused.error, None)
    assert stored.started_at is not None and stored.finished_at is not None
    session = Session.objects.get(session_id="eng.standup")
    assert (session.line_seq, session.item_seq) == (1, 1)  # no number was used up
    assert list(Line.objects.values_list("body", flat=True)) == ["first"]
    assert _post(org, "next").status == "completed"
    assert list(Line.objects.order_by("seq").values_list("seq", "body")) == [(1, "first"), (2, "next")]
