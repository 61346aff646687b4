"""The post form past the backlog's bound (workforce.backlog): the refused page at 503
with ``Retry-After``, and nothing posted."""

from __future__ import annotations

from mailboxes.models import Line
from workforce import backlog
from workforce.models import Request

from .test_pages import acting  # noqa: F401  (a fixture)


def test_a_post_from_the_page_past_the_bound_is_refused_503_and_writes_nothing(acting, open_tree, settings, monkeypatch):  # noqa: F811
    open_tree()
    settings.WORKFORCE_BACKLOG_LIMIT = 5
    monkeypatch.setattr(backlog, "count_backlog", lambda: 9)
    backlog.reset_backlog_cache()
    try:
        before = Request.objects.count()
        answer = acting.post("/mailboxes/eng.standup/post", {"body": "from the page"}, HTTP_HX_REQUEST="true")
        assert answer.status_code == 503 and answer["Retry-After"] == "5"
        # To htmx only the message, which web.js swaps into the form's status.
        assert answer.content.decode() == (
            '<span class="error" role="alert">backlog-full: 9 wakes are waiting for the workers (the bound is 5); '
            "nothing was posted. Retry in 5 s (Retry-After).</span>\n"
        )
        assert (Line.objects.count(), Request.objects.count()) == (0, before)
    finally:
        backlog.reset_backlog_cache()


def test_a_post_without_script_past_the_bound_gets_the_refused_page(acting, open_tree, settings, monkeypatch):  # noqa: F811
    open_tree()
    settings.WORKFORCE_BACKLOG_LIMIT = 5
    monkeypatch.setattr(backlog, "count_backlog", lambda: 9)
    backlog.reset_backlog_cache()
    try:
        answer = acting.post("/mailboxes/eng.standup/post", {"body": "from the page"})
        assert answer.status_code == 503 and answer["Retry-After"] == "5"
        assert b"<h1>Refused</h1>" in answer.content and b"backlog-full: 9 wakes" in answer.content
    finally:
        backlog.reset_backlog_cache()


def test_a_throttled_post_from_the_page_answers_htmx_only_the_message(acting, open_tree, monkeypatch):  # noqa: F811
    open_tree()
    import web.views

    monkeypatch.setattr(web.views, "principal_wait", lambda principal, user=None: 12.5)
    before = Request.objects.count()
    answer = acting.post("/mailboxes/eng.standup/post", {"body": "from the page"}, HTTP_HX_REQUEST="true")
    assert answer.status_code == 429 and answer["Retry-After"] == "13"
    assert answer.content.decode() == (
        '<span class="error" role="alert">throttled: Too many calls from this user or organization; '
        "retry in 13 s (Retry-After).</span>\n"
    )
    assert (Line.objects.count(), Request.objects.count()) == (0, before)
