"""The vault and the index agree (spec "Where mail lives": the mail is the issue, the
office keeps an index of it): a ``mail_reply`` whose notification would be refused is
refused before the vault is written, and a database failure after the vault was written
is repaired by the vault sweep (``mail.repair``), which tells the office what the vault
holds through the same handler as the vault's own events."""

from __future__ import annotations

import time

import pytest
from django.db import OperationalError
from django.utils import timezone

import mail.services
from mail.constants import MAIL_REPLIED, MAIL_SENT
from mail.header import Header, seal_issue, write_header
from mail.models import LedgerEntry, MailRun, Thread, VaultCursor
from mail.repair import SETTLE_SECONDS, do_sweep_vaults, index_agrees
from mail.services import agent_principal, do_reply_mail, do_send_mail
from mail.sweeps import do_sweep_mail_and_chats
from mail.vault import VaultStore
from tests.mail.conftest import PERSON
from tests.web.test_mail_page import as_member
from workforce.refusals import Refusal

pytestmark = pytest.mark.django_db


def disagreements(store: VaultStore) -> list[str]:
    """Every issue of every vault whose index disagrees with the vault."""
    return [
        f"{vault}:{issue.number}"
        for org_id, vault in store.list_vaults()
        for issue in store.list_issues(org_id, vault)
        if not index_agrees(org_id, vault, issue)
    ]


def later() -> float:
    return time.time() + SETTLE_SECONDS + 5


def test_a_reply_whose_notification_is_refused_writes_nothing_to_the_vault(agents, org, vaults, committed):
    agents()
    store = VaultStore(vaults)
    # A mail from an agent that is not hired here (fired since, or a person's own worker
    # the office does not reach): a reply's notification to it would be refused.
    thread = committed(do_send_mail, org, sender=agent_principal("eng.ghost"), to="eng.idle", body="Status?", store=store)
    before = store.get_issue("default", "eng.idle", 1)
    with pytest.raises(Refusal) as refused:
        committed(do_reply_mail, org, thread, author="eng.idle", body="All good.", store=store)
    assert refused.value.reason == "recipient-not-found"
    after = store.get_issue("default", "eng.idle", 1)
    assert after == before and after.comments == () and after.labels == ("mail:new",)
    thread.refresh_from_db()
    assert (thread.state, thread.labels, thread.messages.count()) == ("new", ["mail:new"], 1)
    assert disagreements(store) == [] and not LedgerEntry.objects.filter(event=MAIL_REPLIED).exists()
    assert do_sweep_vaults(store=store, now=later()) == []  # nothing to repair


def test_a_database_failure_after_the_vault_was_written_is_repaired_by_the_vault_sweep(
    agents, org, vaults, committed, monkeypatch, client
):
    agents()
    store = VaultStore(vaults)
    thread = committed(do_send_mail, org, sender=agent_principal("eng.reader"), to="eng.idle", body="Status?", store=store)
    assert do_sweep_vaults(store=store, now=later()) == []  # the office was told: the index agrees
    assert VaultCursor.objects.filter(vault="eng.idle").exists()

    real_ledger = mail.services.ledger

    def failing_ledger(org, event, *args, **kwargs):
        if event == MAIL_SENT and kwargs.get("inReplyTo"):
            raise OperationalError("server closed the connection unexpectedly")
        return real_ledger(org, event, *args, **kwargs)

    monkeypatch.setattr(mail.services, "ledger", failing_ledger)
    with pytest.raises(OperationalError):
        committed(do_reply_mail, org, thread, author="eng.idle", body="All good.", store=store)
    monkeypatch.setattr(mail.services, "ledger", real_ledger)
    # Both vault writes landed (the reply, the notification to eng.reader); the index
    # and its events rolled back with the transaction.
    assert store.get_issue("default", "eng.idle", 1).labels == ("mail:replied",)
    assert store.get_issue("default", "eng.reader", 1).labels == ("mail:new",)
    assert sorted(disagreements(store)) == ["eng.idle:1", "eng.reader:1"]
    assert not Thread.objects.filter(recipient="eng.reader").exists()

    # A commit younger than the settling time is its writer's to tell: the control.
    assert do_sweep_vaults(store=store, now=time.time()) == []
    assert sorted(disagreements(store)) == ["eng.idle:1", "eng.reader:1"]

    repaired = committed(do_sweep_vaults, store=store, now=later())
    assert sorted(repaired) == ["eng.idle:1", "eng.reader:1"]
    assert disagreements(store) == []
    replied = Thread.objects.get(recipient="eng.idle", number=1)
    assert (replied.state, replied.labels) == ("replied", ["mail:replied"])
    assert [(m.author, m.body) for m in replied.messages.order_by("position")] == [
        ("agent:eng.reader", "Status?"),
        ("agent:eng.idle", "All good."),
    ]
    notified = Thread.objects.get(recipient="eng.reader", number=1)
    assert (notified.sender, notified.hops, notified.in_reply_to) == ("agent:eng.idle", 1, "eng.idle:1")
    # Told as the vault's own event would have: the notification's run is admitted, once.
    assert MailRun.objects.filter(thread=notified).count() == 1
    assert committed(do_sweep_vaults, store=store, now=later()) == []  # idempotent
    assert MailRun.objects.filter(thread=notified).count() == 1
    # The Mail endpoints and the agent's desk show what the vault holds.
    answer = client.get("/api/mail/eng.idle:1").json()
    assert answer["state"] == "replied" and [m["body"] for m in answer["messages"]] == ["Status?", "All good."]
    assert {t["thread"] for t in client.get("/api/mail").json()["threads"]} == {"eng.idle:1", "eng.reader:1"}
    desk = as_member(client).get("/mail/desk/eng.idle/").content.decode()
    assert "eng.idle:1" in desk.split('data-state="replied"', 1)[1].split("</section>", 1)[0]


def test_the_mail_sweep_runs_the_vault_sweep(agents, org, vaults, committed, monkeypatch):
    agents()
    store = VaultStore(vaults)
    monkeypatch.setattr("mail.repair.current_store", lambda: store)
    monkeypatch.setattr("mail.repair.SETTLE_SECONDS", -60)  # every commit counts as settled
    # A mail whose index was lost with its transaction: written on the vault as the office
    # writes it (a sealed header; 22.6: a mail with no header the office sealed starts no run).
    header = Header(sender=PERSON, to="agent:eng.idle", sent=timezone.now().replace(microsecond=0))
    header = seal_issue(header, "lost", org_id="default", vault="eng.idle", title="Lost")
    body = write_header(header, "lost")
    VaultStore(vaults, notify=False).create_issue("default", "eng.idle", title="Lost", body=body, labels=["mail:new"])
    done = committed(do_sweep_mail_and_chats)
    assert done.vaults == ["eng.idle:1"] and bool(done)
    thread = Thread.objects.get(recipient="eng.idle")
    assert (thread.sender, thread.state, thread.edited) == (PERSON, "new", False)
    assert MailRun.objects.get(thread=thread).status == MailRun.Status.REFUSED  # eng.idle takes no mail runs
