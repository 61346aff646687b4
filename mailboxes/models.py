"""Transcript lines: the durable record of a mailbox (spec "Posting and reading").

Each line also leaves a ``mailbox-post`` item on the mailbox's session (what a page
reads); the line table is what makes the promises hold: a gap-free per-mailbox
sequence (unique, assigned under the session's row lock) and the full transcript
beyond the history window.
"""
from __future__ import annotations

from django.db import models

from workforce.models import Request, Session


class Line(models.Model):
    """One line of a mailbox's transcript.

    ``principal`` is the mailbox session's user (the same on every line); ``author`` is
    an unverified label; ``seat_authored`` marks a seat's line (it wakes nobody).
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="lines")
    seq = models.BigIntegerField()
    line_id = models.CharField(max_length=64, unique=True)
    at = models.BigIntegerField(help_text="Milliseconds since the epoch.")
    principal = models.CharField(max_length=200)
    author = models.CharField(max_length=200, null=True, blank=True)
    seat_authored = models.BooleanField(default=False)
    body = models.TextField()
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="lines")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="line_unique_seq_per_mailbox")]
        ordering = ["session", "seq"]

    def __str__(self) -> str:
        return f"{self.session.session_id}#{self.seq}"

    def as_wire(self) -> dict:
        """The line as the spec shows it: ``{id, at, principal, author?, authorVerified:
        false, body}``, plus ``seatAuthored: true`` on a seat's line."""
        line: dict = {"id": self.line_id, "at": self.at, "principal": self.principal}
        if self.author is not None:
            line["author"] = self.author
        line["authorVerified"] = False
        line["body"] = self.body
        if self.seat_authored:
            line["seatAuthored"] = True
        return line
