"""A post's fan-out request rides a statement the post already sends (speed issue 26):
on PostgreSQL the deliveries' INSERT writes it (a data-modifying CTE), and when the
fan-out writes no delivery (a seat's own line) the line's statement does; on SQLite it
is an INSERT of its own. Either way the stored row is the one the plain INSERT stores."""

from __future__ import annotations

import copy

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes import fairness, notify
from mailboxes.models import Delivery, Line
from mailboxes.routing import configure_route, route_by_purpose
from tests.conftest import MEMBER, mailbox_md
from tests.seats.conftest import ECHO_LISTENER
from workforce import rows
from workforce.models import Request, Session
from workforce.sessions import do_run_action
from workforce.testing import mock_evaluation_model

ONE_SEAT = {
    "teams/eng/mailboxes/m/MAILBOX.md": mailbox_md("M.", members=("eng.lead",)),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
}

# A client post to a one-member mailbox whose seat hears, in the test's transaction (its
# BEGIN/COMMIT are the SAVEPOINT/RELEASE here). PostgreSQL, three statements:
#   WITH found AS (SELECT session … FOR UPDATE), inserted AS (INSERT request) …
#   WITH counters AS (UPDATE session …), line AS (INSERT line), item AS (INSERT item),
#        settled AS (UPDATE request) …
#   WITH flying AS (…), room AS (…), req AS (INSERT request: the fan-out's)
#        INSERT INTO seats_delivery … RETURNING id, enqueued_at, (SELECT id FROM req)
# (the plain path sent a fourth: INSERT INTO workforce_request, the fan-out's request).
POST_TO_ONE_SEAT_POSTGRESQL = [
    "SAVEPOINT",
    'WITH found AS (SELECT "id"',
    "WITH counters AS (",
    "WITH flying AS (",
    "RELEASE",
]
COLUMNS = [f.attname for f in Request._meta.concrete_fields]


# With the kind's route in place (as boot puts it when a route model is set), a mailbox
# that declares no ``routing:`` keeps its route ledger: a later post's ledger is read and
# UPDATEd by two more CTEs of the line's statement (no statement more: mailboxes.lines.
# LedgerAppend), and the fold is the same.
LEDGER_TABLE = '"mailboxes_routeledger"'
LEDGER_CTES = ", ledger AS (UPDATE "


@pytest.fixture(params=["notify", "notify+route"])
def one_seat(request, wired, monkeypatch):
    """A one-member mailbox whose seat hears posts (its tasks not run); with the kind's
    route too for ``notify+route``. Answers whether the route is there."""
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the released delivery's task
    seats = wired(ONE_SEAT)
    if request.param == "notify":
        return False
    configure_route("mailbox", route_by_purpose(seats, model=mock_evaluation_model(answers={})))
    return True


def _starts(sqls: list[str]) -> list[str]:
    return [" ".join(sql.split()) for sql in sqls]


def _post(org, body: str, *, action: str = "post", author: str | None = None) -> Request:
    payload = {"body": body} if author is None else {"body": body, "author": author}
    return do_run_action(org=org, kind="mailbox", session_id="eng.m", action=action, input=payload, user_id=MEMBER)


def _seat_post(org, body: str) -> Request:
    """``eng.lead``'s own line, as its turn's post-to-mailbox writes it (the internal ``seatPost``)."""
    return do_run_action(
        org=org,
        kind="mailbox",
        session_id="eng.m",
        action="seatPost",
        input={"body": body, "author": "eng.lead"},
        user_id=MEMBER,
        internal=True,
    )


def _fan_out_request(post: Request) -> Request:
    return Request.objects.get(parent_request=post, action=notify.FAN_OUT_ACTION)


def _stored(pk: int) -> dict:
    return dict(zip(COLUMNS, Request.objects.filter(pk=pk).values_list(*COLUMNS).get(), strict=True))


def _same_as_a_plain_insert(request: Request) -> None:
    """The row ``request``'s fold stored is the instance's values, and the row a plain
    ``rows.insert`` of a copy stores (but its own id and request_id)."""
    stored = _stored(request.pk)
    assert stored == {name: getattr(request, name) for name in COLUMNS}
    plain = copy.copy(request)
    plain._state = copy.copy(request._state)
    plain._state.adding = True
    plain.pk, plain.request_id = None, f"{request.request_id}-plain"
    rows.insert(plain)
    again = _stored(plain.pk)
    assert {**again, "id": request.pk, "request_id": request.request_id} == stored


@pytest.mark.postgres
def test_a_post_to_a_one_member_mailbox_is_three_statements_on_postgresql(one_seat, org):
    _post(org, "first")
    with CaptureQueriesContext(connection) as captured:
        answer = _post(org, "second")
    sqls = _starts([query["sql"] for query in captured.captured_queries])
    expected = list(POST_TO_ONE_SEAT_POSTGRESQL)
    assert len(sqls) == len(expected), "\n".join(sql[:150] for sql in sqls)
    assert (LEDGER_CTES in sqls[2]) == one_seat  # the line's statement appends to the ledger
    for sql, start in zip(sqls, expected, strict=True):
        assert sql.startswith(start), sql[:150]
    deliveries = sqls[-2]
    assert ', req AS (INSERT INTO "workforce_request"' in deliveries and "(SELECT id FROM req)" in deliveries
    assert not any(sql.startswith('INSERT INTO "workforce_request"') for sql in sqls)
    fan_out = _fan_out_request(answer)
    line = Line.objects.get(body="second")
    [delivery] = Delivery.objects.filter(post_id=line.line_id)
    assert (delivery.member, delivery.mode, delivery.enqueued_at is not None) == ("eng.lead", "wake", True)
    assert (fan_out.status, fan_out.internal, fan_out.user_id) == ("completed", True, MEMBER)
    assert fan_out.input == {"postId": line.line_id}
    assert fan_out.output == {"postId": line.line_id, "deliveries": [{"member": "eng.lead", "outcome": "wake"}]}
    assert fan_out.session == Session.objects.get(session_id="eng.m") and fan_out.organization_id == org.pk
    assert fan_out.pk > answer.pk and fan_out.finished_at is not None


def test_the_fan_out_request_is_stored_as_the_plain_insert_stores_it(one_seat, org, monkeypatch):
    """Both folds (the deliveries' statement; the line's, for a seat's own line, which
    wakes nobody) and SQLite's plain INSERT: the request object the fan-out planned is
    the row stored, field by field, with its primary key set on it."""
    written: list[Request] = []
    real = notify.do_fan_out

    def keep(ctx, line, fan_out, *, planned=None):
        if planned is None:
            planned = notify.plan_fan_out(ctx, line, fan_out)
        result = real(ctx, line, fan_out, planned=planned)
        written.append(planned.request)
        return result

    monkeypatch.setattr(notify, "do_fan_out", keep)
    monkeypatch.setattr("mailboxes.services.do_fan_out", keep)
    client = _post(org, "from a client")
    seat_line = _seat_post(org, "from the seat")
    assert seat_line.status == "completed", seat_line.error
    by_client, by_seat = written
    assert by_client.pk == _fan_out_request(client).pk and by_seat.pk == _fan_out_request(seat_line).pk
    assert by_seat.output["deliveries"] == [{"member": "eng.lead", "outcome": "none"}]
    assert Delivery.objects.count() == 1  # the seat's own line wakes nobody
    for request in written:
        _same_as_a_plain_insert(request)


@pytest.mark.postgres
def test_a_seat_line_carries_its_fan_out_request_in_the_line_statement(one_seat, org):
    _post(org, "first")
    with CaptureQueriesContext(connection) as captured:
        answer = _seat_post(org, "mine")
    sqls = _starts([query["sql"] for query in captured.captured_queries])
    assert not any(LEDGER_TABLE in sql and not sql.startswith("WITH counters AS (") for sql in sqls)
    assert [sql.split(None, 1)[0] for sql in sqls] == ["SAVEPOINT", "WITH", "WITH", "RELEASE"]
    line_statements = [sql for sql in sqls if sql.startswith("WITH counters AS (")]
    assert len(line_statements) == 1 and ', req AS (INSERT INTO "workforce_request"' in line_statements[0]
    assert (LEDGER_CTES in line_statements[0]) == one_seat
    assert not any(sql.startswith('INSERT INTO "workforce_request"') for sql in sqls)
    assert _fan_out_request(answer).output["deliveries"] == [{"member": "eng.lead", "outcome": "none"}]


def test_a_fan_out_under_an_external_dispatcher_records_its_failed_request(one_seat, org, monkeypatch):
    monkeypatch.setattr(notify, "external_dispatcher", lambda: True)
    answer = _post(org, "nobody wakes")
    fan_out = _fan_out_request(answer)
    assert (fan_out.status, fan_out.error["reason"], fan_out.output) == ("failed", "external-dispatcher", None)
    assert not Delivery.objects.exists()
