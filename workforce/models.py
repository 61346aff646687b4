"""The kernel's tables: organizations, sessions, requests and items.

A *session* is one conversation on one flow kind (a mailbox is a session on the
``mailbox`` kind). Every action call on a session is a *request*; what a session emits
(transcript lines, route decisions, ...) are its *items*, numbered per session.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import models
from django.db.models import Q
from django.db.models.expressions import Combinable
from django.utils import timezone

DEFAULT_ORG_ID = "default"


def mint_request_id() -> str:
    """A fresh request id: ``req_`` and 24 hex digits."""
    return f"req_{secrets.token_hex(12)}"


class Organization(models.Model):
    """A tenant. Sessions and organization-scoped storage belong to exactly one."""

    id = models.CharField(primary_key=True, max_length=128)
    name = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.id


class Membership(models.Model):
    """Which organization an authenticated user acts in (``WORKFORCE_AUTH=token``)."""

    user = models.OneToOneField("auth.User", on_delete=models.CASCADE, related_name="workforce_membership")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")

    def __str__(self) -> str:
        return f"{self.user} in {self.organization_id}"


class Session(models.Model):
    """One named session on one flow kind, owned by one user, in one organization.

    ``session_id`` is the address clients use (``engineering.standup``); it is unique
    within an organization. ``state`` holds only what the spec calls session state
    (a mailbox's members, charter and description). ``item_seq`` is the last item
    sequence number handed out, bumped with a conditional UPDATE so that items get a
    gap-free per-session order without a table-wide lock. ``line_seq`` is the last
    transcript line number handed out on a session that keeps lines (a mailbox's
    ``mailboxes.models.Line``), bumped in the same UPDATE as ``item_seq``, so one locked
    row gives a post both numbers (docs/architecture.md "A post end to end").
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="sessions")
    session_id = models.CharField(max_length=300)
    flow_kind = models.CharField(max_length=100)
    user_id = models.CharField(max_length=200, help_text="The owner: the principal every line carries.")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="children")
    state = models.JSONField(default=dict, blank=True)
    item_seq = models.BigIntegerField(default=0)
    line_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "session_id"], name="session_unique_id_per_org"),
        ]
        indexes = [models.Index(fields=["flow_kind"])]

    def __str__(self) -> str:
        return f"{self.flow_kind}:{self.session_id}"


class Request(models.Model):
    """One action call on a session: what was asked, by whom, and how it ended."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"
        ABORTED = "aborted"

    request_id = models.CharField(max_length=40, unique=True, default=mint_request_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="requests")
    # No index of its own: the (session, id) index below serves every lookup by session,
    # and a second one lets a planner with stale statistics read a whole session to sort it.
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="requests", db_index=False)
    action = models.CharField(max_length=200)
    internal = models.BooleanField(default=False, help_text="Reached by dispatch, not by a client.")
    user_id = models.CharField(max_length=200, help_text="The caller.")
    input = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    output = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True, help_text='{"reason": ..., "message": ...}')
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)
    parent_request = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Not stored: True on the request ``do_run_action`` answers a repeated Idempotency-Key
    # with (the API answers it 200, not 202).
    replayed: bool = False

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "user_id", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="request_unique_idempotency_key",
            ),
        ]
        indexes = [models.Index(fields=["session", "id"])]

    def __str__(self) -> str:
        return f"{self.request_id} {self.action} ({self.status})"


class Item(models.Model):
    """Something a session emitted, in per-session order (``seq`` starts at 1)."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="items")
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="items")
    seq = models.BigIntegerField()
    type = models.CharField(max_length=40, default="component")
    component = models.CharField(max_length=100, blank=True)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "seq"], name="item_unique_seq_per_session")]
        ordering = ["session", "seq"]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.component or self.type}"


class OrgRecord(models.Model):
    """Organization-scoped key/value storage (the spec's org-scoped collections), e.g.
    the mailbox inventory under ``inventory/mailboxes/<id>``."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="records")
    key = models.CharField(max_length=400)
    data = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "key"], name="orgrecord_unique_key")]

    def __str__(self) -> str:
        return f"{self.organization_id}:{self.key}"


class Lease(models.Model):
    """A hold on a row, the one shape every claim in the server takes
    (``workforce.leases``): ``claim_token`` is the live holder's token
    (``workforce.holders.new_token``: it names the holder's process, so a dead holder's
    hold lapses at once), ``lease_until`` when the hold lapses if its holder neither
    renews nor gives it back. A row holds a live lease while its token is set and
    ``lease_until`` is in the future; what "held" means beyond that (a status) is the
    concrete model's, told to ``workforce.holders.register_leased``.

    Used by the leased work rows (``LeasedWork``: deliveries, delegated posts, jobs), a
    board's rows (``boards.models.BoardTask``, whose token is NULL rather than empty
    when free) and a seat's turn slots (``seats.models.TurnSlot``).
    """

    # Read as ``str | None``: a board row's token is NULL while it is free.
    claim_token: models.CharField[str | int | Combinable | None, str | None] = models.CharField(
        max_length=32, blank=True, default=""
    )
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True


class LeasedWork(Lease):
    """The lease fields of a row of work a task claims (``workforce.leases.claim_lease``):
    a mailbox's delivery, a coordinator's delegated post and job. Each concrete model
    adds its own ``status`` (with ``Status.PENDING`` and ``Status.RUNNING``).

    ``attempts`` counts the claims; ``claim_token`` is the live claim's token, which
    guards what the run writes; a running claim whose ``lease_until`` passed is
    abandoned; ``enqueued_at`` is when its task was last handed to the broker and
    ``requeues`` how many times a sweep enqueued it again because its task was lost
    (``workforce.leases.requeue_lost``); ``finished_at`` when it settled.
    """

    attempts = models.PositiveIntegerField(default=0)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    requeues = models.PositiveIntegerField(default=0, help_text="Extra enqueues by the sweeper (its task was lost).")
    finished_at = models.DateTimeField(null=True, blank=True)

    if TYPE_CHECKING:  # what each concrete model declares, for the lease functions' types
        Status: ClassVar[Any]  # TextChoices with PENDING and RUNNING
        status: str
        started_at: datetime | None
        objects: ClassVar[models.Manager[Any]]

    class Meta:
        abstract = True
