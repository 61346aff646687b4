"""A coordinator's conversations, delegates, posts, rounds and deliveries (spec 004):
each gets its own table, with the constraints that make the spec's promises hold.

- ``Conversation``: one per coordinator conversation (a session on the ``coordinator``
  kind). It takes its own copy of the file's ``delegates:`` and ``fallback:`` on its
  first post or first delegate action (``copied_at``); later changes stay in it.
- ``Delegate``: one worker on a conversation's list (unique per conversation).
- ``Post``: one person's message (``post_id`` is the id of the request that carried it).
- ``Round``: one round of one post (unique per post and number): open (waiting for its
  answers until its deadline), closed, unopened (past the 50-open-rounds limit: its
  answers go no further) or last (``rounds:`` reached: its answers go no further).
- ``DelegatedPost``: one delivery of a post to one delegate in one round, unique per
  ``(post, round, worker)``: what keeps a post's cost within delegates × (rounds + 1)
  delegate turns.
- ``Answer``: a delegate's answer, at most one per delivery (one-to-one).
- ``Job``: a routing decision that needs a model (best fit's evaluator call, the
  coordinator's own turn), run on the task cluster outside any transaction.
- ``DelegateSession``: the session a delegate works one conversation's posts in, found
  by worker and filing session id.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workforce.models import LeasedWork, Organization, Request, Session

from .constants import MAX_ROUNDS


class Conversation(models.Model):
    """One coordinator conversation: its session, its coordinator (a worker id), its
    own delegate list (``delegates``) and fallback, and the round-robin cursor."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="coordinator_conversation")
    worker = models.CharField(max_length=200, help_text="The coordinator's worker id.")
    fallback = models.CharField(max_length=200, blank=True, default="", help_text="Empty: no fallback.")
    copied_at = models.DateTimeField(help_text="When it took its copy of delegates: and fallback:.")
    rr_last_worker = models.CharField(max_length=200, blank=True, default="", help_text="Round robin: the last delegate.")
    rr_last_index = models.IntegerField(default=-1, help_text="Round robin: where the last delegate stood in the list.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.session.session_id} ({self.worker})"


class Delegate(models.Model):
    """One delegate of one conversation, in list order (``position``)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="delegates")
    worker = models.CharField(max_length=200)
    note = models.TextField(blank=True, default="", help_text="Best fit picks by it before the worker's description.")
    position = models.PositiveIntegerField()
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "worker"], name="coordinator_delegate_once_per_conversation"),
        ]
        ordering = ["conversation", "position", "pk"]

    def __str__(self) -> str:
        return self.worker

    def as_wire(self) -> dict:
        """``{worker}`` or ``{worker, note}``."""
        return {"worker": self.worker, "note": self.note} if self.note else {"worker": self.worker}


class Post(models.Model):
    """A person's message to the coordinator. ``route_by``/``route_worker`` keep where
    round 0 went once decided (best fit's hold reads them)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="posts")
    post_id = models.CharField(max_length=40, unique=True, help_text="The id of the request that carried it.")
    author = models.CharField(max_length=200, help_text="The person's user id.")
    text = models.TextField()
    posted_by = models.JSONField(null=True, blank=True, help_text='Who wrote it: {"kind": "user", "id", "verified"}.')
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    route_by = models.CharField(max_length=20, blank=True, default="")
    route_worker = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["conversation", "id"])]

    def __str__(self) -> str:
        return self.post_id


class Round(models.Model):
    """One round of one post: 0 for the person's post, one more each time answers go
    back out (spec "Letting delegates answer each other")."""

    class Status(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"
        UNOPENED = "unopened", "unopened (50 rounds were open)"
        LAST = "last", "last (rounds: reached)"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="rounds")
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveSmallIntegerField()
    status = models.CharField(max_length=10, choices=Status.choices)
    opened_at = models.DateTimeField(auto_now_add=True)
    deadline_at = models.DateTimeField(null=True, blank=True, help_text="Only an open round has one.")
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.CharField(max_length=10, blank=True, default="", help_text="answers or deadline.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["post", "number"], name="coordinator_round_once_per_post"),
            models.CheckConstraint(condition=Q(number__lte=MAX_ROUNDS), name="coordinator_round_at_most_3"),
        ]
        indexes = [
            models.Index(fields=["conversation", "status"]),
            # The deadline timer's read, several times a second in each cluster worker.
            models.Index(fields=["deadline_at"], name="coordinator_round_open_due", condition=Q(status="open")),
        ]

    def __str__(self) -> str:
        return f"{self.post.post_id} round {self.number} ({self.status})"


class DelegatedPost(LeasedWork):
    """One delivery: a post (or the answers passed on in a later round) handed to one
    delegate in one round. Claimed with a conditional UPDATE, so a redelivered task
    never runs the delegate's turn twice; ``reported`` is True once the coordinator
    knows how it ended (answered and failed always; cancelled only when the delegate's
    flow sets ``delegated_post_on_finished``)."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        ANSWERED = "answered"
        FAILED = "failed"
        CANCELLED = "cancelled"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="deliveries")
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="deliveries")
    round = models.PositiveSmallIntegerField()
    worker = models.CharField(max_length=200)
    kind = models.CharField(max_length=100, help_text="The delegate's flow when it was handed the post.")
    writer = models.CharField(max_length=500, help_text="Who wrote what it is handed: the person, or the delegates.")
    message = models.TextField(help_text="The door's message: <from>, through <coordinator>: <post>.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    reported = models.BooleanField(default=False)
    started_at = models.DateTimeField(null=True, blank=True)
    delegate_session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    turn_request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.JSONField(null=True, blank=True, help_text='{"reason": ..., "message": ...}')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["post", "round", "worker"], name="coordinator_one_delivery_per_post_round_delegate"),
            models.CheckConstraint(condition=Q(round__lte=MAX_ROUNDS), name="coordinator_delivery_round_at_most_3"),
        ]
        indexes = [
            models.Index(fields=["status", "lease_until"]),
            models.Index(fields=["post", "round"]),
            models.Index(fields=["enqueued_at"]),
            models.Index(fields=["started_at"]),
        ]
        verbose_name = "delegated post"

    def __str__(self) -> str:
        return f"{self.post.post_id} r{self.round} -> {self.worker} ({self.status})"


class Answer(models.Model):
    """A delegate's answer, landed in the conversation under its worker id: one per
    delivery. ``late``: it landed after its round closed, or in a round that isn't
    open, so it went no further."""

    delivery = models.OneToOneField(DelegatedPost, on_delete=models.CASCADE, related_name="answer")
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="answers")
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="answers")
    round = models.PositiveSmallIntegerField()
    worker = models.CharField(max_length=200)
    text = models.TextField()
    posted_by = models.JSONField(null=True, blank=True, help_text='Who wrote it: {"kind": "seat", "id", "verified"}.')
    goes_further = models.BooleanField(default=False)
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["post", "round"])]

    def __str__(self) -> str:
        return f"{self.worker} on {self.post.post_id} r{self.round}"


class Job(LeasedWork):
    """A routing decision that needs a model, made on the task cluster with the model
    called outside any transaction and recorded once (conditional UPDATE).

    ``place``: best fit places a post (round 0) or an answer (``source``, into
    ``round``). ``judgment``: the coordinator's own turn on a post (round 0) or, after
    round ``round - 1`` closed, on its answers (hand-offs go out in ``round``).
    """

    class Kind(models.TextChoices):
        PLACE = "place"
        JUDGMENT = "judgment"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="jobs")
    post = models.ForeignKey(Post, on_delete=models.CASCADE, related_name="jobs")
    round = models.PositiveSmallIntegerField(help_text="The round its deliveries go out in.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    source = models.ForeignKey(
        Answer,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The answer being placed (best fit, rounds).",
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["post", "round", "kind"], condition=Q(source__isnull=True), name="coordinator_job_once_per_post_round"
            ),
            models.UniqueConstraint(fields=["source"], condition=Q(source__isnull=False), name="coordinator_job_once_per_answer"),
        ]
        indexes = [
            models.Index(fields=["status", "lease_until"]),
            models.Index(fields=["enqueued_at"]),
            models.Index(fields=["finished_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.post.post_id} r{self.round} ({self.status})"


class DelegateSession(models.Model):
    """The session ``worker`` works ``conversation``'s posts in (spec "Changing the
    delegates": found by worker and filing session id)."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="delegate_sessions")
    worker = models.CharField(max_length=200)
    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "worker"], name="coordinator_delegate_session_once"),
        ]

    def __str__(self) -> str:
        return f"{self.worker} for {self.conversation.session.session_id}"
