"""A room's promises under real concurrency (spec "A room per project": "A seat answers a
post once, even when the post reaches it twice"; a gap-free per-project sequence under
a row lock). Real threads on PostgreSQL, each beside a control with the locks taken out."""

from __future__ import annotations

import pytest

from mailboxes import fairness, notify, rooms
from mailboxes.deliveries import do_deliver
from mailboxes.models import Delivery, Project, RoomLine
from tests.conftest import line_up_at_session_lock, run_in_threads
from workforce.dispatch import dispatch
from workforce.models import Request
from workforce.notify import ON_MAILBOX_POST
from workforce.sessions import do_run_action

from .conftest import ALICE, BOB, LEAD

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 8


def _unlocked(monkeypatch) -> None:
    """The control: the project's row lock read plainly."""
    monkeypatch.setattr(
        rooms,
        "lock_project",
        lambda org_id, project_id: Project.objects.filter(organization_id=org_id, project_id=project_id).first(),
    )


@pytest.fixture
def a_post(project, org, monkeypatch):
    """One post of Alice's whose deliveries were written and never run (their tasks are
    not sent): ``(post line, alice's session id, the lead's token)``."""
    _, alice, _ = project
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    request = do_run_action(org=org, kind="mailbox", session_id=alice, action="post", input={"body": "go?"}, user_id=ALICE)
    assert request.status == "completed", request.error
    monkeypatch.undo()
    line = RoomLine.objects.get(body="go?")
    token = Delivery.objects.get(post_id=line.line_id, member=LEAD).notify_input["answerToken"]
    return line, alice, token


def _answer_from_threads(org, a_post, monkeypatch, *, lock: bool) -> list[Request]:
    line, alice, token = a_post
    line_up_at_session_lock(monkeypatch, N, lock=lock)
    if not lock:
        _unlocked(monkeypatch)

    def send(i: int) -> Request:
        return dispatch(
            org=org,
            kind="mailbox",
            session_id=alice,
            action="answer",
            payload={"postId": line.line_id, "body": f"answer {i}", "author": LEAD, "token": token},
            user_id=ALICE,
        )

    return run_in_threads(send, N, barrier=False, timeout=60)


def test_a_seat_answering_one_post_many_times_at_once_lands_one_answer(a_post, org, monkeypatch):
    results = _answer_from_threads(org, a_post, monkeypatch, lock=True)
    assert [r.status for r in results] == ["completed"] * N
    assert sorted(r.output["landed"] for r in results) == [False] * (N - 1) + [True]
    line = a_post[0]
    assert RoomLine.objects.filter(answer_to=line, author=LEAD).count() == 1
    assert list(RoomLine.objects.filter(project=line.project).values_list("seq", flat=True).order_by("seq")) == [1, 2]


def test_control_without_the_locks_the_constraint_still_lands_at_most_one(a_post, org, monkeypatch):
    """Every answer passes the "already answered?" check at once; the unique constraint
    on (post, seat) is what stops all but one, and the seq they race for collides."""
    results = _answer_from_threads(org, a_post, monkeypatch, lock=False)
    line = a_post[0]
    assert RoomLine.objects.filter(answer_to=line, author=LEAD).count() == 1
    assert sum(1 for r in results if r.status == "completed" and r.output["landed"]) == 1


def _post_from_threads(org, project, monkeypatch, *, lock: bool) -> list[Request]:
    _, alice, bob = project
    monkeypatch.setattr(notify, "enqueue", lambda *args, **kwargs: None)
    monkeypatch.setattr(fairness, "enqueue", lambda *args, **kwargs: None)  # the release's tasks (mailboxes.fairness)
    line_up_at_session_lock(monkeypatch, N, lock=True)  # each talk session's own lock stays
    if not lock:
        _unlocked(monkeypatch)

    def send(i: int) -> Request:
        session, user = (alice, ALICE) if i % 2 else (bob, BOB)
        return do_run_action(org=org, kind="mailbox", session_id=session, action="post", input={"body": f"p{i}"}, user_id=user)

    return run_in_threads(send, N, barrier=False, timeout=60)


def test_two_members_posting_at_once_all_land_in_a_gap_free_sequence(project, org, monkeypatch):
    results = _post_from_threads(org, project, monkeypatch, lock=True)
    assert [r.status for r in results] == ["completed"] * N
    assert list(RoomLine.objects.values_list("seq", flat=True).order_by("seq")) == list(range(1, N + 1))
    assert Delivery.objects.count() == 2 * N  # each post, each seat, once


def test_control_without_the_project_lock_posts_collide(project, org, monkeypatch):
    results = _post_from_threads(org, project, monkeypatch, lock=False)
    failed = [r for r in results if r.status == "failed"]
    assert failed, "without the row lock two posts of different sessions take the same seq"
    assert RoomLine.objects.count() == N - len(failed)


def test_one_delivery_run_from_two_workers_at_once_runs_one_turn(a_post, org):
    line, _, _ = a_post
    delivery = Delivery.objects.get(post_id=line.line_id, member=LEAD)
    outcomes = run_in_threads(lambda i: do_deliver(delivery.pk), 2)
    assert sorted(outcomes) == ["done", "not-claimed"]
    assert Request.objects.filter(action=ON_MAILBOX_POST, session__session_id__endswith=f":{LEAD}").count() == 1
    assert RoomLine.objects.filter(answer_to=line, author=LEAD).count() == 1


def test_concurrent_creates_of_one_project_id_make_one_project_and_leak_nothing(room_tree, org):
    """N people create the project "launch" at the same moment: the unique constraint
    lets one in; each other one is told what ``GET /api/projects/launch`` tells them (404
    ``no-such-project``: they are not its members), never a 500, and no member row or
    talk session of theirs is left behind."""
    from rest_framework.test import APIClient

    from mailboxes.models import ProjectMember, TalkListing

    room_tree()

    def create(i: int):
        answer = APIClient().post("/api/projects", {"userId": f"u_{i}", "title": "Launch", "id": "launch"}, format="json")
        return answer.status_code, answer.json()

    answers = run_in_threads(create, N)
    created = [i for i, (status, _) in enumerate(answers) if status == 201]
    assert len(created) == 1, answers
    winner = f"u_{created[0]}"
    for i, (status, body) in enumerate(answers):
        if i != created[0]:
            assert (status, body["error"]["reason"]) == (404, "no-such-project"), body
    assert Project.objects.filter(project_id="launch").count() == 1
    assert list(ProjectMember.objects.values_list("user_id", flat=True)) == [winner]
    assert list(TalkListing.objects.values_list("user_id", flat=True)) == [winner]
