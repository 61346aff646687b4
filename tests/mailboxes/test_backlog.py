"""Back-pressure (workforce.backlog, docs/running.md "Back-pressure"): past
WORKFORCE_BACKLOG_LIMIT open wakes a client's post is refused with 503 ``backlog-full``
and ``Retry-After`` before anything is written, the count costs one query per second per
process, and posts are taken again once the backlog drains."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes.models import Delivery, Line
from tests.conftest import MEMBER, on_postgres
from workforce import backlog
from workforce.models import Item, Request, Session
from workforce.sessions import do_run_action

from .test_http import assert_failed, post


@pytest.fixture
def clock(monkeypatch):
    """The backlog cache's clock, moved on by hand (``clock.now += 2``), the kept count
    forgotten before and after the test."""

    class Clock:
        now = 1000.0

    monkeypatch.setattr(backlog, "_clock", lambda: Clock.now)
    backlog.reset_backlog_cache()
    yield Clock
    backlog.reset_backlog_cache()


def open_deliveries(n: int, *, status: str = Delivery.Status.PENDING, post: str = "ln_backlog") -> list[Delivery]:
    """``n`` deliveries of one post on eng.standup (unfinished by default: what a cluster
    that fell behind leaves)."""
    session = Session.objects.get(session_id="eng.standup")
    return [
        Delivery.objects.create(
            organization=session.organization, mailbox=session, post_id=post, member=f"m{i}", mode="wake", status=status
        )
        for i in range(n)
    ]


def written() -> tuple[int, int, int, int, int]:
    """What a post writes: lines, requests, items, deliveries, and the mailbox's line_seq."""
    session = Session.objects.get(session_id="eng.standup")
    return (Line.objects.count(), Request.objects.count(), Item.objects.count(), Delivery.objects.count(), session.line_seq)


def test_the_backlog_counts_every_source_in_one_query(opened, clock, django_assert_num_queries):
    assert backlog.backlog_sources() == ["coordinators.delegatedpost", "mail.chatrun", "mail.mailrun", "mailboxes.delivery"]
    open_deliveries(2)
    open_deliveries(1, status=Delivery.Status.RUNNING, post="ln_running")
    open_deliveries(2, status=Delivery.Status.DONE, post="ln_done")
    open_deliveries(1, status=Delivery.Status.FAILED, post="ln_failed")
    with django_assert_num_queries(1):
        assert backlog.count_backlog() == 3


def test_past_the_bound_a_post_is_refused_503_with_retry_after_and_nothing_written(client, opened, clock, settings):
    settings.WORKFORCE_BACKLOG_LIMIT = 3
    assert post(client, {"body": "before"}).status_code == 202
    open_deliveries(3)
    clock.now += 2  # the count kept from the first post is stale
    before = written()
    response = post(client, {"body": "one too many"})
    data = assert_failed(response, 503, "backlog-full")
    assert response["Retry-After"] == "5"
    assert data["requestId"] is None
    assert data["error"]["message"] == (
        "backlog-full: 3 wakes are waiting for the workers (the bound is 3); nothing was posted. Retry in 5 s (Retry-After)."
    )
    assert written() == before
    assert not Line.objects.filter(body="one too many").exists()


def test_once_the_backlog_drains_posts_are_taken_again(client, opened, clock, settings):
    settings.WORKFORCE_BACKLOG_LIMIT = 2
    rows = open_deliveries(2)
    assert_failed(post(client, {"body": "refused"}), 503, "backlog-full")
    Delivery.objects.filter(pk__in=[r.pk for r in rows]).update(status=Delivery.Status.DONE)
    # Still refused while the kept count is fresh (under BACKLOG_CACHE_SECONDS)...
    clock.now += backlog.BACKLOG_CACHE_SECONDS / 2
    assert_failed(post(client, {"body": "still refused"}), 503, "backlog-full")
    # ... and taken once it is counted again.
    clock.now += backlog.BACKLOG_CACHE_SECONDS
    response = post(client, {"body": "taken"})
    assert response.status_code == 202, response.content
    assert "Retry-After" not in response
    assert list(Line.objects.values_list("body", flat=True)) == ["taken"]


def test_a_post_adds_no_query_while_the_count_is_fresh(opened, org, clock, settings, django_assert_num_queries):
    settings.WORKFORCE_BACKLOG_LIMIT = 600

    def post_line(body: str) -> Request:
        return do_run_action(
            org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": body}, user_id=MEMBER
        )

    plain = 4 if on_postgres() else 8  # tests/mailboxes/test_query_counts.py PLAIN_POST, without the notify fan-out
    # The standard tree's eng.standup wakes nobody: a post there is the plain post.
    with django_assert_num_queries(plain + 1):  # the first check counts
        assert post_line("first").status == "completed"
    with django_assert_num_queries(plain):  # fresh: no COUNT
        assert post_line("second").status == "completed"
    clock.now += backlog.BACKLOG_CACHE_SECONDS
    with CaptureQueriesContext(connection) as captured:
        assert post_line("third").status == "completed"
    assert sum("COUNT(*)" in q["sql"] for q in captured.captured_queries) == 1


def test_with_the_bound_off_nothing_is_counted(opened, org, clock, settings, django_assert_num_queries):
    settings.WORKFORCE_BACKLOG_LIMIT = 0
    open_deliveries(5)
    plain = 4 if on_postgres() else 8
    with django_assert_num_queries(plain):
        row = do_run_action(org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": "x"}, user_id=MEMBER)
    assert row.status == "completed"


def test_reads_and_a_seats_own_posts_are_never_refused(client, opened, org, clock, settings):
    settings.WORKFORCE_BACKLOG_LIMIT = 1
    open_deliveries(1)
    response = post(client, action="read")
    assert response.status_code == 202
    # An internal call (a seat's turn answering: the work draining) is not checked.
    row = do_run_action(
        org=org, kind="mailbox", session_id="eng.standup", action="post", input={"body": "x"}, user_id=MEMBER, internal=True
    )
    assert row.status == "completed"


def test_a_retry_of_a_post_that_was_taken_answers_it_past_the_bound(client, opened, clock, settings):
    settings.WORKFORCE_BACKLOG_LIMIT = 2
    first = post(client, {"body": "once"}, **{"Idempotency-Key": "k-1"})
    assert first.status_code == 202
    open_deliveries(2)
    clock.now += 2
    again = post(client, {"body": "once"}, **{"Idempotency-Key": "k-1"})
    assert again.status_code == 202 and again["Idempotent-Replayed"] == "true"
    assert again.json()["requestId"] == first.json()["requestId"]
    other = post(client, {"body": "twice"}, **{"Idempotency-Key": "k-2"})
    assert_failed(other, 503, "backlog-full")
    assert list(Line.objects.values_list("body", flat=True)) == ["once"]
