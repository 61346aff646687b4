"""Back-pressure on a coordinator (workforce.backlog): a client's ``run`` past
WORKFORCE_BACKLOG_LIMIT is refused with ``backlog-full`` before anything is written, and
the coordinator's delegated posts not yet answered count as backlog."""

from __future__ import annotations

import pytest

from coordinators.models import DelegatedPost, Post
from tests.coordinators.conftest import ACCOUNTS, DEVICES
from workforce import backlog
from workforce.models import Request
from workforce.refusals import Refusal


@pytest.fixture
def fresh_count():
    backlog.reset_backlog_cache()
    yield
    backlog.reset_backlog_cache()


def test_a_run_past_the_bound_is_refused_and_writes_nothing(desk, settings, monkeypatch, fresh_count):
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    before = Request.objects.count()
    settings.WORKFORCE_BACKLOG_LIMIT = 5
    monkeypatch.setattr(backlog, "count_backlog", lambda: 5)
    with pytest.raises(Refusal) as refused:
        d.run("hi")
    assert (refused.value.reason, refused.value.http_status, refused.value.retry_after) == ("backlog-full", 503, 5)
    assert (Request.objects.count(), Post.objects.count(), DelegatedPost.objects.count()) == (before, 0, 0)


def test_delegated_posts_not_yet_answered_count_as_backlog(desk, fresh_count):
    d = desk(routing="everyone", delegates=(DEVICES, ACCOUNTS))
    d.run("hi")
    assert d.deliveries().count() == 2 and backlog.count_backlog() == 0  # both answered
    d.deliveries().update(status=DelegatedPost.Status.PENDING)
    assert backlog.count_backlog() == 2
    d.deliveries().filter(worker=DEVICES).update(status=DelegatedPost.Status.RUNNING)
    assert backlog.count_backlog() == 2
    d.deliveries().update(status=DelegatedPost.Status.CANCELLED)
    assert backlog.count_backlog() == 0
