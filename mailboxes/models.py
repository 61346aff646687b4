"""Transcript lines: the durable record of a mailbox (spec "Posting and reading").

Each line also leaves a ``mailbox-post`` item on the mailbox's session (what a page
reads); the line table is what makes the promises hold: a gap-free per-mailbox
sequence (unique, assigned under the session's row lock), the full transcript beyond
the history window, and one answer line per routed post (unique ``answer_to``).
Routing's record (``RouteLedger``, ``Route``) and the deliveries of a post to its
members (``Delivery``) live here too.
"""

from __future__ import annotations

from django.db import models

from seats.models import Seat
from workforce.models import LeasedWork, Organization, Request, Session
from workforce.posted_by import as_posted_by


class Line(models.Model):
    """One line of a mailbox's transcript.

    ``principal`` is the mailbox session's user (the same on every line); ``author`` is
    an unverified label; ``seat_authored`` marks a seat's line (it wakes nobody);
    ``posted_by`` is who the server says wrote it (``workforce.posted_by.PostedBy``:
    the caller it resolved, or the seat whose turn it ran), never set by a client; None
    on lines written before it was recorded.
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="lines")
    seq = models.BigIntegerField()
    line_id = models.CharField(max_length=64, unique=True)
    at = models.BigIntegerField(help_text="Milliseconds since the epoch.")
    principal = models.CharField(max_length=200)
    author = models.CharField(max_length=200, null=True, blank=True)
    seat_authored = models.BooleanField(default=False)
    body = models.TextField()
    posted_by = models.JSONField(null=True, blank=True, help_text='Who wrote it: {"kind": "user"|"seat", "id", "verified"}.')
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="lines")
    # A routed member's answer names the post it answers; unique, so a post gets at most
    # one answer line (spec "The answer lands in the mailbox").
    answer_to = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The client post this line answers (a routed member's answer).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="line_unique_seq_per_mailbox"),
            models.UniqueConstraint(
                fields=["answer_to"], condition=models.Q(answer_to__isnull=False), name="line_one_answer_per_post"
            ),
        ]
        ordering = ["session", "seq"]

    def __str__(self) -> str:
        return f"{self.session.session_id}#{self.seq}"

    def as_wire(self) -> dict:
        """The line as the spec shows it: ``{id, at, principal, author?, authorVerified:
        false, body}``, plus ``seatAuthored: true`` on a seat's line and ``postedBy``
        (``{kind, id, verified}``) when the server recorded who wrote it."""
        line: dict = {"id": self.line_id, "at": self.at, "principal": self.principal}
        if self.author is not None:
            line["author"] = self.author
        line["authorVerified"] = False
        line["body"] = self.body
        if self.seat_authored:
            line["seatAuthored"] = True
        posted_by = as_posted_by(self.posted_by)
        if posted_by is not None:
            line["postedBy"] = posted_by
        return line


class RouteLedger(models.Model):
    """What the route remembers of one mailbox (the spec's ``mailboxRouteLedger``, "What
    the route remembers"): its last ``LEDGER_LINES`` lines and its last client post.

    Kept for every mailbox on a kind built with a route, updated on every post whether
    or not the mailbox declares ``routing:``, under the mailbox's row lock; never limited
    by the history window. ``last_seq`` is the seq of the last line recorded: a line
    whose seq does not follow it was posted while the kind ran without a route, and the
    ledger starts afresh from the history window (that post holds nothing).
    """

    session = models.OneToOneField(Session, primary_key=True, on_delete=models.CASCADE, related_name="route_ledger")
    lines = models.JSONField(default=list, blank=True, help_text="The last 20 lines: {id, seq, from, text, seatAuthored?}.")
    last_seq = models.BigIntegerField(default=0)
    last_post = models.ForeignKey(
        Line,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The last client post (where it went: its route).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"route ledger of {self.session.session_id}"


class Route(models.Model):
    """How one client post on a routed mailbox found its member (spec "How a post finds
    its member"). Written with the post (unique per post), decided once by the route
    task: ``decided_at`` is set by a conditional UPDATE, so a redelivered task decides
    nothing twice and the post leaves exactly one ``mailbox-route`` item.

    ``previous`` is the mailbox's last client post before this one (None when this post
    is the first since the kind gained a route): the post that may hold this one.
    ``recent`` is the ledger's lines before the post, as the evaluator and the member
    see them.
    """

    class By(models.TextChoices):
        HELD = "held"
        EVALUATED = "evaluated"
        FALLBACK = "fallback"
        FAILED = "failed"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="routes")
    post = models.OneToOneField(Line, on_delete=models.CASCADE, related_name="route")
    previous = models.ForeignKey(Line, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    recent = models.JSONField(default=list, blank=True)
    fallback = models.CharField(max_length=200, help_text="The mailbox's fallback member when the post landed.")
    member = models.CharField(max_length=200, null=True, blank=True, help_text="Who takes the post; empty when nobody could.")
    by = models.CharField(max_length=10, choices=By.choices, blank=True, default="")
    reason = models.CharField(max_length=40, blank=True, default="")
    detail = models.TextField(blank=True, default="")
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    delivery = models.CharField(max_length=10, blank=True, default="", help_text="What the member got: wake, call or none.")
    enqueued_at = models.DateTimeField(null=True, blank=True)
    requeues = models.PositiveIntegerField(default=0, help_text="Extra enqueues by the sweeper (its task was lost).")
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["decided_at", "enqueued_at"]), models.Index(fields=["enqueued_at"])]

    def __str__(self) -> str:
        return f"{self.post} -> {self.member or '-'} ({self.by or 'pending'})"


class Delivery(LeasedWork):
    """One post handed to one member (spec "Waking members").

    ``mode`` says what runs: ``wake`` (the member's seat hears the post and runs its
    turn), ``fallback`` (the fallback block, for a member whose seat cannot hear) or
    ``call`` (a plain notify block). ``notify_input`` is the MailboxNotifyInput, so the
    task needs nothing but this row. Created with the post (in its transaction), run
    on the task cluster after the commit, and claimed with a conditional UPDATE so that
    a redelivered task never runs a seat's turn twice (unique per ``(post, member)``).
    """

    class Mode(models.TextChoices):
        WAKE = "wake"
        FALLBACK = "fallback"
        CALL = "call"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    mailbox = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="deliveries")
    post_id = models.CharField(max_length=64, help_text="The line's id.")
    member = models.CharField(max_length=200)
    mode = models.CharField(max_length=10, choices=Mode.choices)
    seat = models.ForeignKey(Seat, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries")
    notify_input = models.JSONField(default=dict)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    started_at = models.DateTimeField(null=True, blank=True, help_text="When its first turn started.")
    conversation = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    turn_request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True, help_text='{"reason": ..., "message": ...}')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["post_id", "member"], name="delivery_unique_post_member"),
        ]
        indexes = [
            models.Index(fields=["status", "lease_until"]),
            models.Index(fields=["mailbox", "post_id"]),
            models.Index(fields=["enqueued_at"]),
            models.Index(fields=["started_at"]),
            # The release's read (mailboxes.fairness): an organization's unfinished deliveries only.
            models.Index(
                fields=["organization", "mailbox"],
                condition=models.Q(status__in=["pending", "running"]),
                name="delivery_unfinished_by_org",
            ),
        ]
        verbose_name_plural = "deliveries"
        # The table kept its name when deliveries moved here from the seats app.
        db_table = "seats_delivery"

    def __str__(self) -> str:
        return f"{self.post_id} -> {self.member} ({self.mode}, {self.status})"


# ----------------------------------------------------------------------------- the inventory


class InventorySeat(models.Model):
    """The inventory's row for one seat a mailbox lists (spec "What a mailbox is": the
    inventory row, "only for finding which mailboxes a seat is in"): ``{id, kind,
    hired}``, written when the mailboxes are opened. ``kind`` is the hired seat's kind
    (empty when no seat by that id is hired)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    seat_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=100, blank=True, default="")
    hired = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "seat_id"], name="inventoryseat_unique_per_org")]

    def __str__(self) -> str:
        return f"{self.organization_id}:{self.seat_id}"

    def as_wire(self) -> dict:
        """``{id, kind, hired}``; ``kind`` is None for a seat nobody hired."""
        return {"id": self.seat_id, "kind": self.kind or None, "hired": self.hired}


class InventoryMailbox(models.Model):
    """The inventory's row for one opened mailbox: ``{id, kind, members, openedAt}``
    (``openedAt``, milliseconds since the epoch, is set when the row is created and
    never again). A mailbox id that is now a room template keeps its row, retired
    (``retired_at``), and is listed no more. Rooms and talk sessions are never rows."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    mailbox_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    members = models.JSONField(default=list, blank=True)
    opened_at = models.BigIntegerField(help_text="Milliseconds since the epoch; set on create only.")
    retired_at = models.DateTimeField(null=True, blank=True, help_text="Set when the id became a room template.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "mailbox_id"], name="inventorymailbox_unique_per_org")]
        verbose_name_plural = "inventory mailboxes"

    def __str__(self) -> str:
        return f"{self.organization_id}:{self.mailbox_id}"

    def as_wire(self) -> dict:
        """``{id, kind, description, members, openedAt}``."""
        return {
            "id": self.mailbox_id,
            "kind": self.kind,
            "description": self.description,
            "members": list(self.members),
            "openedAt": self.opened_at,
        }


class InventoryMembership(models.Model):
    """One (seat, mailbox) pair of the inventory: the seat is a member of the mailbox.
    Written before the mailbox's own row, so a listed mailbox always has its members."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    seat_id = models.CharField(max_length=200)
    mailbox_id = models.CharField(max_length=300)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "seat_id", "mailbox_id"], name="inventorymembership_unique")
        ]
        indexes = [models.Index(fields=["organization", "mailbox_id"])]

    def __str__(self) -> str:
        return f"{self.seat_id} in {self.mailbox_id}"


# ----------------------------------------------------------------------------- projects and rooms


class Project(models.Model):
    """A project (spec "A room per project"): its members are the people who can read
    and post in its room; the room's seats come from the template, not from here.

    The row is also the room's lock: a room line's ``seq`` is assigned under this row's
    ``SELECT … FOR UPDATE``, so the room's sequence is gap-free.
    """

    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    project_id = models.CharField(max_length=64)
    title = models.CharField(max_length=200)
    brief = models.TextField(blank=True, default="")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    owner_user_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "project_id"], name="project_unique_id_per_org")]

    def __str__(self) -> str:
        return f"{self.organization_id}:{self.project_id}"


class ProjectMember(models.Model):
    """A person who can read and post in a project's room (the owner is one)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="members")
    user_id = models.CharField(max_length=200)
    added_by = models.CharField(max_length=200, blank=True, default="")
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user_id"], name="projectmember_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.project}"


class TalkListing(models.Model):
    """The one talk session a project lists for one member: the session ``join``
    returns, the only one that member posts and reads through (spec "A room per
    project": "any other session is refused with talk-session-not-listed")."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="talk_listings")
    user_id = models.CharField(max_length=200)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="talk_listing")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user_id"], name="talklisting_one_per_member")]

    def __str__(self) -> str:
        return f"{self.user_id}'s talk in {self.project}: {self.session.session_id}"


class RoomLine(models.Model):
    """One line of a project's room. A person's post has ``user_id`` (the poster) and no
    author; a seat's answer has ``author`` (the seat id), ``seat_authored`` and
    ``user_id`` (whose post it answers), and names the post in ``answer_to``: at most
    one answer per seat per post (unique). ``seq`` is gap-free per project, assigned
    under the project's row lock. Room lines are in no session's history.
    ``posted_by``: who the server says wrote it, as on a mailbox ``Line``."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="lines")
    seq = models.BigIntegerField()
    line_id = models.CharField(max_length=64, unique=True)
    at = models.BigIntegerField(help_text="Milliseconds since the epoch.")
    user_id = models.CharField(max_length=200)
    author = models.CharField(max_length=200, null=True, blank=True)
    seat_authored = models.BooleanField(default=False)
    body = models.TextField()
    posted_by = models.JSONField(null=True, blank=True, help_text='Who wrote it: {"kind": "user"|"seat", "id", "verified"}.')
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    answer_to = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "seq"], name="roomline_unique_seq_per_project"),
            models.UniqueConstraint(
                fields=["answer_to", "author"], condition=models.Q(answer_to__isnull=False), name="roomline_one_answer_per_seat"
            ),
        ]
        ordering = ["project", "seq"]

    def __str__(self) -> str:
        return f"{self.project}#{self.seq}"

    def as_wire(self) -> dict:
        """``{id, seq, at, userId, author?, body, seatAuthored?, postedBy?}``."""
        line: dict = {"id": self.line_id, "seq": self.seq, "at": self.at, "userId": self.user_id}
        if self.author is not None:
            line["author"] = self.author
        line["body"] = self.body
        if self.seat_authored:
            line["seatAuthored"] = True
        posted_by = as_posted_by(self.posted_by)
        if posted_by is not None:
            line["postedBy"] = posted_by
        return line
