"""One answer line per post, even for answers sent at the same moment (spec "The answer
lands in the mailbox"). Real threads on PostgreSQL: SQLite serializes
every writer and has no row locks to test."""

from __future__ import annotations

import pytest

from mailboxes.models import Line
from mailboxes.routing import configure_route
from tests.conftest import line_up_at_session_lock, run_in_threads
from workforce.dispatch import dispatch
from workforce.models import Request
from workforce.sessions import do_run_action

from .conftest import DESK, DEVICES, MEMBER, OWNER

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 8


@pytest.fixture
def a_post(routed, org):
    """An opened routed desk and one client post on it, with nothing run for it (the
    kind is built without a route and without a notify block here, so only the answer
    entry is exercised)."""
    routed()
    configure_route("mailbox", None)
    from mailboxes.notify import configure_notify

    configure_notify("mailbox", None)
    request = do_run_action(
        org=org, kind="mailbox", session_id=DESK, action="post", input={"body": "my printer is jammed"}, user_id=MEMBER
    )
    assert request.status == "completed"
    return Line.objects.get(body="my printer is jammed")


def _answer_from_threads(org, post_id: str, n: int, monkeypatch, *, lock: bool) -> list[Request]:
    line_up_at_session_lock(monkeypatch, n, lock=lock)  # every answer reaches its first lock at the same moment

    def send(i: int) -> Request:
        return dispatch(
            org=org,
            kind="mailbox",
            session_id=DESK,
            action="answer",
            payload={"postId": post_id, "body": f"answer {i}", "author": DEVICES},
            user_id=OWNER,
        )

    return run_in_threads(send, n, barrier=False, timeout=60)


def test_several_answers_to_one_post_at_once_land_one_line(a_post, org, monkeypatch):
    results = _answer_from_threads(org, a_post.line_id, N, monkeypatch, lock=True)
    assert [r.status for r in results] == ["completed"] * N
    assert sorted(r.output["landed"] for r in results) == [False] * (N - 1) + [True]
    answers = Line.objects.filter(answer_to=a_post)
    assert answers.count() == 1
    winner = next(r for r in results if r.output["landed"])
    assert answers.get().line_id == winner.output["line"]["id"]
    assert all(r.output["answerId"] == winner.output["line"]["id"] for r in results if not r.output["landed"])
    assert list(Line.objects.filter(session__session_id=DESK).values_list("seq", flat=True).order_by("seq")) == [1, 2]


def test_control_without_the_lock_the_database_still_lets_one_answer_land(a_post, org, monkeypatch):
    """The same answers with the row lock taken out: every answer passes the "already
    answered?" check, and the unique constraint on the answered post is what stops all
    but one."""
    results = _answer_from_threads(org, a_post.line_id, N, monkeypatch, lock=False)
    assert Line.objects.filter(answer_to=a_post).count() == 1
    assert sum(1 for r in results if r.status == "completed" and r.output["landed"]) == 1
