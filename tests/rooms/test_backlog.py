"""A room line past the backlog's bound (workforce.backlog): 503 ``backlog-full`` with
``Retry-After``, no room line and no delivery; taken again once the backlog drains."""

from __future__ import annotations

from mailboxes.models import Delivery, RoomLine
from workforce import backlog

from .conftest import ALICE


def test_a_room_line_past_the_bound_is_refused_then_taken_once_drained(project, client, settings, monkeypatch):
    _, alice, _ = project
    settings.WORKFORCE_BACKLOG_LIMIT = 2
    open_wakes = {"n": 2}
    monkeypatch.setattr(backlog, "count_backlog", lambda: open_wakes["n"])
    backlog.reset_backlog_cache()
    url = f"/api/flows/mailbox/{alice}/actions/post"
    try:
        answer = client.post(url, {"userId": ALICE, "input": {"body": "what is blocked?"}}, format="json")
        assert answer.status_code == 503 and answer["Retry-After"] == "5"
        assert answer.json()["error"]["reason"] == "backlog-full"
        assert (RoomLine.objects.count(), Delivery.objects.count()) == (0, 0)
        open_wakes["n"] = 1
        backlog.reset_backlog_cache()  # the next check counts again (as after BACKLOG_CACHE_SECONDS)
        answer = client.post(url, {"userId": ALICE, "input": {"body": "what is blocked?"}}, format="json")
        assert answer.status_code == 202, answer.content
        assert RoomLine.objects.count() == 1 and Delivery.objects.count() == 2
    finally:
        backlog.reset_backlog_cache()
