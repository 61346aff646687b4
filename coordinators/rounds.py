"""Rounds (spec 004 "Letting delegates answer each other", "What it costs").

With ``rounds:`` 0 (the default) an answer lands and goes no further. With 1 to 3 each
answer goes back out to the other delegates, by the same policy, for that many rounds;
the person's post is round 0.

- A round is opened on its first delivery (``coordinators.opening.open_round``): *open* (it waits for its
  answers until its deadline, ``round_deadline_ms``), *last* (``rounds:`` reached: its
  answers go no further), or *unopened* when the conversation already has 50 rounds
  open: it is still delivered, but its answers land and go no further, and its record
  carries a note.
- best-fit and round-robin route each answer again as it lands (never to its own
  author); everyone and judgment wait for the round to close.
- A round closes when every delivery in it has been answered or has failed (reported;
  ``settled``), or at its deadline: a django-q2 ``Schedule`` (ONCE, at the deadline)
  runs ``coordinators.tasks.close_round_at_deadline``, and every later activity in the
  conversation (a post, a report) closes what is past due too. A delegate still working
  at the deadline keeps working; its answer lands once when it comes and goes no further.
- On closing: everyone hands each delegate the other delegates' answers in one delivery;
  judgment runs the coordinator's turn once with the round's answers (its hand-offs go
  out in the next round).

Each delegate gets at most one delivery per post per round (unique in the database), so
a post costs at most delegates × (rounds + 1) delegate turns.

All of it runs inside a transaction with the conversation's row lock held (a ``Desk``).
"""

from __future__ import annotations

import logging

from django_q.models import Schedule

from . import policies
from .constants import BEST_FIT, EVERYONE, JUDGMENT, ROUND_ROBIN
from .models import DelegatedPost, Job, Post, Round
from .opening import DEADLINE_TASK, open_round, schedule_deadline, schedule_name
from .queries import round_answers

logger = logging.getLogger(__name__)

ANSWERS = "answers"
DEADLINE = "deadline"


def settled(desk, row: Round) -> bool:
    """True when round ``row`` can close on its answers: every delivery in it has been
    reported (answered, failed, or cancelled by a flow that says so), no decision into it
    is pending, and, where answers are routed as they land (best-fit, round-robin), the
    round before it is closed (nothing more can come into it)."""
    if DelegatedPost.objects.filter(post_id=row.post_id, round=row.number, reported=False).exists():
        return False
    if Job.objects.filter(post_id=row.post_id, round=row.number).exclude(status=Job.Status.DONE).exists():
        return False
    if row.number > 0 and desk.policy in (BEST_FIT, ROUND_ROBIN):
        before = Round.objects.filter(post_id=row.post_id, number=row.number - 1).values_list("status", flat=True).first()
        if before == Round.Status.OPEN:
            return False
    return True


def check_round(desk, post: Post, number: int) -> bool:
    """Close round ``number`` of ``post`` if it is open and settled. Returns True when
    it closed it."""
    row = Round.objects.filter(post=post, number=number, status=Round.Status.OPEN).first()
    if row is None or not settled(desk, row):
        return False
    return close_round(desk, row, ANSWERS)


def close_round(desk, row: Round, by: str) -> bool:
    """Close open round ``row`` (``by``: ``answers`` or ``deadline``) and send what it
    produced on: everyone hands each delegate the others' answers; judgment queues the
    coordinator's turn over them; best-fit and round-robin already sent each answer on,
    so the next round may now close too. Returns False when it was not open."""
    if not Round.objects.filter(pk=row.pk, status=Round.Status.OPEN).update(
        status=Round.Status.CLOSED, closed_at=desk.now, closed_by=by
    ):
        return False
    Schedule.objects.filter(name=schedule_name(row.pk)).delete()
    post = row.post
    policy = desk.policy
    if row.number < desk.rounds:
        if policy == EVERYONE:
            policies.everyone_pass_on(desk, post, row.number)
        elif policy == JUDGMENT:
            if (
                round_answers(post.pk, row.number)
                and not Job.objects.filter(post=post, round=row.number + 1, kind=Job.Kind.JUDGMENT, source__isnull=True).exists()
            ):
                policies.queue_job(desk, post, row.number + 1, Job.Kind.JUDGMENT)
    check_round(desk, post, row.number + 1)
    return True


def close_due_rounds(desk) -> list[int]:
    """Close every open round of the conversation whose deadline has passed (the
    conversation's next activity after a deadline does this, besides the scheduled
    check). Returns the closed rounds' ids."""
    closed = []
    due = Round.objects.filter(conversation=desk.conv, status=Round.Status.OPEN, deadline_at__lte=desk.now)
    for row in due.select_related("post").order_by("pk"):
        if close_round(desk, row, DEADLINE):
            closed.append(row.pk)
    return closed


def goes_further(row: Round | None) -> bool:
    """True when an answer landing now in round ``row`` goes back out: the round is
    open (not closed, not the last, not unopened)."""
    return row is not None and row.status == Round.Status.OPEN


__all__ = [
    "ANSWERS",
    "DEADLINE",
    "DEADLINE_TASK",
    "check_round",
    "close_due_rounds",
    "close_round",
    "goes_further",
    "open_round",
    "schedule_deadline",
    "schedule_name",
    "settled",
]
