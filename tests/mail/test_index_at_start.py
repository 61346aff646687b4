"""``mail.repair.do_index_unswept_vaults``: what ``serve`` and the web app's start run
before answering. A vault this database never read is indexed whole at once, its newest
commits included (the periodic sweep leaves commits younger than its settling time);
a vault the database already reads is left to the sweep; running it again does nothing."""

from __future__ import annotations

from mail.models import MailRun, Thread, VaultCursor
from mail.repair import do_index_unswept_vaults, do_sweep_vaults
from mail.services import do_send_mail
from tests.mail.conftest import PERSON


def forget_the_index() -> None:
    """A database that never read the vaults: no threads, runs or cursors (the ledger
    stays, as the seal would name the sender anyway)."""
    MailRun.objects.all().delete()
    Thread.objects.all().delete()
    VaultCursor.objects.all().delete()


def test_a_vault_never_read_is_indexed_whole_at_once(agents, org, store, committed):
    agents()
    for body in ("one", "two", "three"):
        do_send_mail(org, sender=PERSON, to="eng.idle", body=body, store=store)
    do_send_mail(org, sender=PERSON, to="eng.reader", body="for the reader", store=store)
    forget_the_index()
    assert do_sweep_vaults(store=store) == []  # the sweep: too young to settle
    indexed = committed(do_index_unswept_vaults, store=store)
    assert sorted(indexed) == ["eng.idle:1", "eng.idle:2", "eng.idle:3", "eng.reader:1"]
    threads = {t.thread_id: t for t in Thread.objects.all()}
    assert threads["eng.idle:2"].sender == PERSON and threads["eng.idle:2"].subject == "two"
    assert sorted(VaultCursor.objects.values_list("vault", flat=True)) == ["eng.idle", "eng.reader"]
    # Each mail:new mail is admitted once: eng.reader runs, eng.idle takes no mail runs.
    assert MailRun.objects.filter(thread__recipient="eng.reader").count() == 1
    assert sorted(MailRun.objects.filter(thread__recipient="eng.idle").values_list("status", flat=True)) == ["refused"] * 3
    assert committed(do_index_unswept_vaults, store=store) == []
    assert MailRun.objects.count() == 4


def test_a_vault_the_database_reads_already_is_left_to_the_sweep(agents, org, store, committed):
    agents()
    do_send_mail(org, sender=PERSON, to="eng.idle", body="one", store=store)
    committed(do_index_unswept_vaults, store=store)
    do_send_mail(org, sender=PERSON, to="eng.idle", body="two", store=store)
    Thread.objects.filter(number=2).delete()
    assert do_index_unswept_vaults(store=store) == []
    assert not Thread.objects.filter(number=2).exists()
