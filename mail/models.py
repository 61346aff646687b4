"""The office's index of mail and its ledger (spec "Where mail lives": "The office keeps
an index of mail in its database"; "How mail becomes work").

The mail itself lives on the vaults (``mail.store``); these tables are what the office
knows of it: ``Thread`` (one issue on a recipient's vault) and its ``Message`` rows
(the issue's body and comments), rebuilt from the vaults by ``manage.py reindex_mail``;
``MailRun`` (one run a mail started, or the admission that refused it) and
``LedgerEntry`` (the events the spec names), which are the office's own record.
"""

from __future__ import annotations

from django.db import models

from workforce.models import LeasedWork, Organization, Request

from .constants import LEDGER_EVENTS


class Thread(models.Model):
    """One mail: issue ``number`` on the vault of agent ``recipient``, in ``organization``.

    ``sender`` is a principal (``human:<email>``, ``agent:<slug>``), as the office wrote
    it in the header; ``state`` follows the issue's label (``delivered`` for a mail that
    came without ``mail:new``: past the loop guard); ``hops`` is the reply
    notification's hop count (0 for a mail someone sent) and ``in_reply_to`` the thread
    it notifies of. ``sender``, ``subject``, ``hops``, ``in_reply_to`` and ``sent_at``
    are the office's record, written once when the thread is first indexed (at send
    time, by the send itself) and never from the issue again; ``edited`` is True once
    the issue's header, title or text no longer are what the office wrote (a forge
    collaborator's edit; ``mail.index``).
    """

    class State(models.TextChoices):
        NEW = "new"
        WORKING = "working"
        REPLIED = "replied"
        CLOSED = "closed"
        DELIVERED = "delivered", "delivered without mail:new"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="mail_threads")
    recipient = models.CharField(max_length=200, help_text="The agent's slug (its worker id): whose vault holds the issue.")
    number = models.PositiveIntegerField(help_text="The issue's number on the recipient's vault.")
    sender = models.CharField(max_length=300, help_text="human:<email> or agent:<slug>, from the office's header.")
    subject = models.CharField(max_length=300)
    state = models.CharField(max_length=20, choices=State.choices)
    labels = models.JSONField(default=list, blank=True)
    hops = models.PositiveIntegerField(default=0)
    in_reply_to = models.CharField(max_length=300, blank=True, default="")
    sent_at = models.DateTimeField()
    updated_at = models.DateTimeField(auto_now=True)
    seen_at = models.DateTimeField(
        null=True, blank=True, help_text="When a run of the recipient was shown it (a mail delivered without mail:new)."
    )
    edited = models.BooleanField(
        default=False, help_text="The issue's header, title or text was changed after the office wrote it: trusted for nothing."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "recipient", "number"], name="mail_thread_unique_issue"),
        ]
        indexes = [models.Index(fields=["organization", "recipient", "state"])]
        permissions = [("send", "Can send mail to agents")]

    def __str__(self) -> str:
        return self.thread_id

    @property
    def thread_id(self) -> str:
        """The thread's address: ``<recipient>:<number>`` (``support.devices:3``)."""
        return f"{self.recipient}:{self.number}"


class Message(models.Model):
    """One text of a thread: ``position`` 0 is the mail (the issue's body), 1, 2, ... its
    comments. ``author`` is the principal in the office's header; ``body`` the text
    under it, both as first indexed; ``edited`` is True once the text or its header was
    changed after the office wrote it."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    position = models.PositiveIntegerField()
    author = models.CharField(max_length=300)
    body = models.TextField()
    sent_at = models.DateTimeField()
    edited = models.BooleanField(default=False, help_text="Changed after the office wrote it: trusted for nothing.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["thread", "position"], name="mail_message_unique_position")]
        ordering = ["thread", "position"]

    def __str__(self) -> str:
        return f"message {self.position} of thread {self.thread_id} by {self.author}"


class MailRun(LeasedWork):
    """The run one mail starts on its recipient (spec "How mail becomes work"): admitted
    (``pending``, then ``running`` under a claim, ``done`` or ``failed``), or
    ``refused`` by admission (``error`` says why). One per thread: a mail told to the
    office twice starts one run."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        REFUSED = "refused"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    thread = models.OneToOneField(Thread, on_delete=models.CASCADE, related_name="run")
    recipient = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    request = models.ForeignKey(Request, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"mail run {self.pk} ({self.status})"


class LedgerEntry(models.Model):
    """One event on the mail ledger (``mail.sent``, ``mail.replied``, ``mail.closed``,
    ``mail.loop_guard``, ``run.denied``): who did it (a principal), which thread (its
    address, kept as text so the ledger outlives the index) and what else the event
    names (``data``)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    event = models.CharField(max_length=40, choices=[(e, e) for e in LEDGER_EVENTS])
    principal = models.CharField(max_length=300)
    thread = models.CharField(max_length=300, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    key = models.CharField(
        max_length=300, null=True, blank=True, unique=True, help_text="An agent tool call's key: a turn run again acts once."
    )
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["organization", "event"]), models.Index(fields=["thread"])]
        ordering = ["pk"]
        verbose_name_plural = "ledger entries"

    def __str__(self) -> str:
        return f"{self.event} {self.thread} by {self.principal}"


class WebhookDelivery(models.Model):
    """One forge webhook delivery the office acted on (``X-Forgejo-Delivery`` /
    ``X-Gitea-Delivery``): a delivery sent again is answered without acting twice."""

    delivery = models.CharField(max_length=200, unique=True)
    event = models.CharField(max_length=40)
    action = models.CharField(max_length=40, blank=True, default="")
    repository = models.CharField(max_length=300, blank=True, default="")
    received_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.event} {self.action} {self.repository} ({self.delivery})"


class ChatRun(LeasedWork):
    """One chat turn a person asked of an agent (spec "Mail versus chat": run kind
    ``chat``, stored in the office database): the turn's ``request`` on the person's chat
    session with the agent, run once on the task cluster under a claim.

    ``posted_by`` is who asked (``workforce.posted_by.PostedBy``, the principal the API,
    the page or the MCP server resolved): the turn's user message item, written when the
    turn runs, carries it as its ``postedBy`` (docs/architecture.md "Who said what")."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    request = models.OneToOneField(Request, on_delete=models.CASCADE, related_name="chat_run")
    seat_id = models.CharField(max_length=200)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PENDING)
    error = models.JSONField(null=True, blank=True)
    posted_by = models.JSONField(null=True, blank=True, help_text='Who asked: {"kind": "user", "id", "verified"}.')
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"chat run {self.pk} with {self.seat_id} ({self.status})"


class VaultCursor(models.Model):
    """How far the vault sweep (``mail.repair``) has read one vault's history: its branch
    up to ``commit`` agrees with the index, so the next sweep reads only what came after."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    vault = models.CharField(max_length=200, help_text="The agent's slug: whose vault.")
    commit = models.CharField(max_length=64, help_text="The last commit the sweep checked the index against.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "vault"], name="mail_vault_cursor_unique_vault")]

    def __str__(self) -> str:
        return f"{self.organization_id}/{self.vault} at {self.commit[:12]}"


class SendKey(models.Model):
    """An ``Idempotency-Key`` a person sent a mail with (``POST /api/mail``, the MCP
    tool ``mail_send``): the key of one send per person in an organization, as a
    request's key is on the action endpoint (``workforce.models.Request``). ``input`` is
    the send as asked (``{to, subject, body}``), compared on a retry; ``thread`` the
    mail it sent. The row is written before the vault is, in the send's transaction, so
    a second send with the key waits on its unique index and answers the first."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    user_id = models.CharField(max_length=200, help_text="The sender (the principal's user id).")
    key = models.CharField(max_length=255)
    input = models.JSONField(default=dict)
    thread = models.ForeignKey(Thread, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "user_id", "key"], name="mail_send_key_unique_key"),
        ]

    def __str__(self) -> str:
        return f"send key {self.key!r} of {self.user_id}"
