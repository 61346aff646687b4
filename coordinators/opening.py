"""Opening a round (spec 004 "Letting delegates answer each other"): its row, on its
first delivery, and the django-q2 Schedule that closes it at its deadline. What a
closing round does is ``coordinators.rounds``; delivering into a round
(``coordinators.policies.deliver``) opens it here."""

from __future__ import annotations

from datetime import timedelta

from django.db import IntegrityError, transaction
from django_q.models import Schedule

from workforce.wakeups import TIMERS, wake

from .constants import MAX_OPEN_ROUNDS
from .models import Post, Round

DEADLINE_TASK = "coordinators.tasks.close_round_at_deadline"


def schedule_name(round_id: int) -> str:
    """The django-q2 Schedule that closes round ``round_id`` at its deadline."""
    return f"coordinator-round-{round_id}"


def open_round(desk, post: Post, number: int) -> Round:
    """Round ``number`` of ``post``: the existing row, or a new one, opened (with its
    deadline scheduled), last, or unopened (50 rounds already open)."""
    row = Round.objects.filter(post=post, number=number).first()
    if row is not None:
        return row
    if number >= desk.rounds:
        status = Round.Status.LAST
    elif Round.objects.filter(conversation=desk.conv, status=Round.Status.OPEN).count() >= MAX_OPEN_ROUNDS:
        status = Round.Status.UNOPENED
    else:
        status = Round.Status.OPEN
    deadline = desk.now + timedelta(milliseconds=desk.setup.round_deadline_ms) if status == Round.Status.OPEN else None
    try:
        with transaction.atomic():
            row = Round.objects.create(conversation=desk.conv, post=post, number=number, status=status, deadline_at=deadline)
    except IntegrityError:  # opened at the same moment by a writer not holding the conversation's lock
        return Round.objects.get(post=post, number=number)
    if status == Round.Status.OPEN:
        schedule_deadline(row)
    return row


def schedule_deadline(row: Round) -> None:
    """A django-q2 Schedule (ONCE, at the round's deadline; deleted once it runs) that
    closes the round if it is still open. Written in the caller's transaction."""
    wake(TIMERS)  # the cluster's round timer sleeps until the deadline it knew: wake it at commit
    Schedule.objects.create(
        name=schedule_name(row.pk),
        func=DEADLINE_TASK,
        args=f"{row.pk},",
        schedule_type=Schedule.ONCE,
        repeats=-1,
        next_run=row.deadline_at,
    )
