"""Posts on one mailbox are serialized; posts on two never wait on each other
(spec "Posting and reading"). Real threads on PostgreSQL: SQLite has no
row locks to test."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

from mailboxes.models import Line
from workforce.models import Request, Session
from workforce.sessions import do_run_action

from ..conftest import MEMBER, line_up_at_session_lock, run_in_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 20


def _post_from_threads(org, session_id: str, n: int) -> list[Request]:
    def post(i: int) -> Request:
        return do_run_action(
            org=org,
            kind="mailbox",
            session_id=session_id,
            action="post",
            input={"body": f"post {i}"},
            user_id=MEMBER,
        )

    return run_in_threads(post, n, timeout=60)


def test_twenty_posts_at_once_all_land_in_order(open_tree, org, monkeypatch):
    open_tree()
    line_up_at_session_lock(monkeypatch, N, lock=True)
    results = _post_from_threads(org, "eng.standup", N)
    assert [r.status for r in results].count("completed") == N
    seqs = list(Line.objects.filter(session__session_id="eng.standup").order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, N + 1))
    assert sorted(Line.objects.values_list("body", flat=True)) == sorted(f"post {i}" for i in range(N))


def test_control_an_unlocked_write_loses_lines(open_tree, org, monkeypatch):
    """The same posts with the row lock taken out, each line numbered from the session
    row as it was read (not from the locked row's counter): posters read the same last
    seq, so all but one collide on the per-mailbox sequence and their lines are lost."""
    from mailboxes import lines

    def number_from_the_read(ctx, line, **_):
        seq = ctx.session.line_seq + 1
        Session.objects.filter(pk=ctx.session.pk).update(line_seq=seq)
        line.seq = seq
        line.save(force_insert=True)
        return 0

    open_tree()
    line_up_at_session_lock(monkeypatch, N, lock=False)
    monkeypatch.setattr(lines, "insert_line", number_from_the_read)
    monkeypatch.setattr("mailboxes.services.insert_line", number_from_the_read)
    results = _post_from_threads(org, "eng.standup", N)
    landed = Line.objects.filter(session__session_id="eng.standup").count()
    assert 1 <= landed < N
    assert sum(r.status == "failed" for r in results) == N - landed


def test_posts_on_two_mailboxes_never_wait_on_each_other(open_tree, org):
    open_tree()
    holding = threading.Event()
    release = threading.Event()

    def hold_standup_lock() -> None:
        try:
            with transaction.atomic():
                Session.objects.select_for_update().get(session_id="eng.standup")
                holding.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    holder = threading.Thread(target=hold_standup_lock)
    holder.start()
    assert holding.wait(timeout=10)
    done: list[Request] = []

    def post_incidents() -> None:
        try:
            done.append(
                do_run_action(
                    org=org,
                    kind="mailbox",
                    session_id="eng.incidents",
                    action="post",
                    input={"body": "pager went off"},
                    user_id=MEMBER,
                )
            )
        finally:
            connection.close()

    poster = threading.Thread(target=post_incidents)
    poster.start()
    poster.join(timeout=10)
    finished_while_locked = not poster.is_alive() and bool(done)
    release.set()
    holder.join(timeout=10)
    poster.join(timeout=10)
    assert finished_while_locked, "a post on eng.incidents waited for eng.standup's lock"
    assert done[0].status == "completed"


# --- one Idempotency-Key, several callers at once --------------------------------------------

CALLERS = 6
ROUNDS = 4


def _post_with_one_key(org, key: str, input: dict) -> list[Request]:
    def post(i: int) -> Request:
        return do_run_action(
            org=org,
            kind="mailbox",
            session_id="eng.standup",
            action="post",
            input=input,
            user_id=MEMBER,
            idempotency_key=key,
        )

    return run_in_threads(post, CALLERS, timeout=60)


@pytest.mark.parametrize(
    ("input", "reason"),
    [({}, "invalid-input"), ({"body": "x", "author": "eng.intruder"}, "author-not-a-member")],
    ids=["invalid-input", "author-not-a-member"],
)
def test_refused_posts_with_one_key_at_once_all_answer_the_first_refusal(open_tree, org, input, reason):
    """Identical refused posts sent at the same moment with one key: every caller gets
    the refusal of the one failed request recorded for the key (the others replay it),
    never a deadlock. The refused call's transaction holds the session row lock and the
    key's uncommitted index entry; the failed request's fresh transaction must take
    them in the same order (session, then key), or the two wait on each other."""
    open_tree()
    for round_ in range(ROUNDS):
        key = f"k-refused-{round_}"
        results = _post_with_one_key(org, key, input)
        assert [r.status for r in results] == ["failed"] * CALLERS
        assert {r.error["reason"] for r in results} == {reason}
        assert len({r.request_id for r in results}) == 1
        assert sum(not getattr(r, "replayed", False) for r in results) == 1
        assert Request.objects.filter(idempotency_key=key).count() == 1
    assert Request.objects.filter(action="post").count() == ROUNDS
    assert Line.objects.count() == 0


def test_posts_with_one_key_at_once_land_one_line(open_tree, org):
    """The control beside it: the same race on a post that succeeds acts once, and
    every caller answers that one completed request."""
    open_tree()
    for round_ in range(ROUNDS):
        key = f"k-landed-{round_}"
        results = _post_with_one_key(org, key, {"body": f"round {round_}"})
        assert [r.status for r in results] == ["completed"] * CALLERS
        assert len({r.request_id for r in results}) == 1
        assert Request.objects.filter(idempotency_key=key).count() == 1
    assert sorted(Line.objects.values_list("body", flat=True)) == [f"round {r}" for r in range(ROUNDS)]
