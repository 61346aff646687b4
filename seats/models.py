"""Seats: hired workers.

A *seat* is a hired worker: its id (the record id a mailbox's ``members:`` lists), its
kind (the flow it runs on), its scope and what its WORKER.md declared. One seat id may
exist in several scopes; a caller reaches its own first, then its organization's, then a
shared one (spec "Waking agent seats").
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from workforce.models import Lease, Organization, Session


class Seat(models.Model):
    """One hired worker."""

    class Scope(models.TextChoices):
        OWN = "own", "a user's own"
        ORG = "org", "the organization's"
        SHARED = "shared", "shared by every organization"

    seat_id = models.CharField(max_length=200, help_text="The record id: <team>.<name> or <name>.")
    kind = models.CharField(max_length=100, help_text="The flow kind the seat runs on (agent, coordinator, ...).")
    scope = models.CharField(max_length=10, choices=Scope.choices)
    organization = models.ForeignKey(
        Organization,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="seats",
        help_text="Empty for a shared seat.",
    )
    owner_user_id = models.CharField(max_length=200, blank=True, default="", help_text="Only for a user's own seat.")
    description = models.TextField(blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="", help_text="provider/name; empty: WORKFORCE_MODEL.")
    tools = models.JSONField(default=list, blank=True, help_text="The tools the worker's tools: names.")
    instructions = models.TextField(blank=True, default="", help_text="The system prompt.")
    config = models.JSONField(default=dict, blank=True, help_text="Other declared keys (delegates, routing, ...).")
    source = models.CharField(max_length=500, blank=True, default="", help_text="Where the WORKER.md sits in the tree.")
    forked_from = models.CharField(
        max_length=200, blank=True, default="", help_text="A user's own seat forked from another worker: that worker's id."
    )
    hired_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["seat_id"], condition=Q(scope="shared"), name="seat_unique_shared"),
            models.UniqueConstraint(fields=["organization", "seat_id"], condition=Q(scope="org"), name="seat_unique_per_org"),
            models.UniqueConstraint(
                fields=["organization", "owner_user_id", "seat_id"], condition=Q(scope="own"), name="seat_unique_per_owner"
            ),
            models.CheckConstraint(
                condition=(
                    Q(scope="shared", organization__isnull=True, owner_user_id="")
                    | Q(scope="org", organization__isnull=False, owner_user_id="")
                    | (Q(scope="own", organization__isnull=False) & ~Q(owner_user_id=""))
                ),
                name="seat_scope_matches_owner",
            ),
        ]
        indexes = [models.Index(fields=["seat_id"])]

    def __str__(self) -> str:
        where = {"shared": "shared", "org": f"org {self.organization_id}"}.get(
            self.scope, f"{self.owner_user_id} in {self.organization_id}"
        )
        return f"{self.seat_id} ({self.kind}, {where})"

    def model_id(self, default: str) -> str:
        """The seat's model id, or ``default`` when its file named none."""
        return self.model or default


class DrainWake(models.Model):
    """The last ``drain_board_as_seat`` task enqueued for one seat's drain of one board
    with one worker key, and when such a task last started: the sweep of board drains
    enqueues another only when that one is known lost (``workforce.leases.requeue_lost``).

    ``worker_key`` is ``""`` for a drain with no key. ``requeues`` counts the sweep's
    extra enqueues since a drain last enqueued itself or a row was filed.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    board_id = models.CharField(max_length=400)
    seat_id = models.CharField(max_length=200)
    worker_key = models.CharField(max_length=200, blank=True, default="")
    enqueued_at = models.DateTimeField(help_text="When its last task was enqueued.")
    requeues = models.PositiveIntegerField(default=0, help_text="Extra enqueues by the sweeper (its task was lost).")
    ran_at = models.DateTimeField(null=True, blank=True, help_text="When a task of this drain last started.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "board_id", "seat_id", "worker_key"], name="drainwake_unique"),
        ]
        indexes = [models.Index(fields=["enqueued_at"]), models.Index(fields=["ran_at"])]

    def __str__(self) -> str:
        return f"{self.seat_id} drains {self.board_id} ({self.worker_key or '-'})"


class TurnSlot(Lease):
    """The one turn of seat ``seat_id`` that may run in ``session`` at a time (spec
    "Waking agent seats": a seat keeps one conversation per mailbox and remembers the
    thread, so its turns there must not overlap; ``seats.turns.take_turn_slot``).

    Its hold is a ``workforce.models.Lease``: ``claim_token`` is the running turn's token
    (``""`` when free) and ``lease_until`` when its hold lapses (the task cluster kills a task by then), so a holder that died frees the
    slot on its own. Taken and freed under this row's lock, in short transactions: no
    transaction stays open while the turn runs. ``waiting`` counts the slot's waits, so
    taking and freeing it is one UPDATE that reads, from the row it locked, whether anyone
    waits (``seats.turns.take_slot``/``free_slot``).
    """

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    seat_id = models.CharField(max_length=200)
    taken_at = models.DateTimeField(null=True, blank=True)
    waiting = models.IntegerField(
        default=0, help_text="How many TurnWait rows the slot has: bumped under the row lock with each one written or dropped."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "seat_id"], name="turnslot_unique_per_seat_session")]

    def __str__(self) -> str:
        return f"{self.seat_id} in session {self.session_id}: {'held' if self.claim_token else 'free'}"


class TurnWait(models.Model):
    """A caller that found its seat's turn slot taken: the django-q2 task ``task``
    (``args``: ids and JSON) that runs it again, enqueued when the slot is freed (or by
    the ``turn slots`` sweep once the holder's hold lapsed). One per (slot, caller):
    ``key`` is a digest of the task and its arguments."""

    slot = models.ForeignKey(TurnSlot, on_delete=models.CASCADE, related_name="waits")
    key = models.CharField(max_length=64)
    task = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["slot", "key"], name="turnwait_unique_per_slot")]
        indexes = [models.Index(fields=["created_at"])]

    def __str__(self) -> str:
        return f"{self.task}{self.args} waits on slot {self.slot_id}"


class ToolCallEntry(models.Model):
    """One call a seat made to a tool server's tool (docs/tools.md): ``tool.called`` (it
    answered, ``isError`` included), ``tool.failed`` (the server could not be reached,
    died or passed the time limit) or ``run.denied`` (the seat was not granted the tool;
    nothing was called). The ledger operators count calls from, per seat and per server
    (``seats.queries.tool_call_counts``)."""

    class Event(models.TextChoices):
        CALLED = "tool.called"
        FAILED = "tool.failed"
        DENIED = "run.denied"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=40, choices=Event.choices)
    seat_id = models.CharField(max_length=200)
    server = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    request_id = models.CharField(max_length=64, blank=True, default="", help_text="The turn's request.")
    data = models.JSONField(default=dict, blank=True, help_text="What else the event names (a refusal's reason).")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["organization", "seat_id", "server"]), models.Index(fields=["server"])]
        ordering = ["pk"]
        verbose_name_plural = "tool call entries"

    def __str__(self) -> str:
        return f"{self.event} {self.server}/{self.tool} by {self.seat_id}"
