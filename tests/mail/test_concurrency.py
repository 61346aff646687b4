"""Mail sent at the same moment on PostgreSQL, from real threads: every mail gets its own
issue number, its own thread and its own ledger entry, and an event told twice at once
admits one run."""

from __future__ import annotations

import pytest

from mail.events import do_handle_store_event
from mail.models import LedgerEntry, MailRun, Thread
from mail.services import do_send_mail
from mail.store import StoreEvent, current_store
from tests.conftest import run_in_threads
from tests.mail.conftest import PERSON
from workforce.sessions import ensure_organization

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

N = 6


def test_mail_sent_at_once_all_lands(agents, org):
    agents()

    def one(i: int):
        return do_send_mail(ensure_organization("default"), sender=PERSON, to="eng.idle", body=f"mail {i}").number

    numbers = run_in_threads(one, N)
    assert sorted(numbers) == list(range(1, N + 1))
    assert sorted(Thread.objects.values_list("number", flat=True)) == list(range(1, N + 1))
    assert LedgerEntry.objects.filter(event="mail.sent").count() == N
    assert len(current_store().list_issues("default", "eng.idle")) == N
    assert MailRun.objects.filter(status="refused").count() == N  # eng.idle takes no mail runs: each refused once


def test_an_event_told_twice_at_once_admits_one_run(agents, org):
    agents()
    thread = do_send_mail(org, sender=PERSON, to="eng.idle", body="once")
    issue = current_store().get_issue("default", "eng.idle", thread.number)
    MailRun.objects.all().delete()
    LedgerEntry.objects.filter(event="run.denied").delete()
    run_in_threads(lambda i: do_handle_store_event(StoreEvent("opened", "default", "eng.idle", issue, delivery=f"d{i}")), N)
    assert MailRun.objects.filter(thread=thread).count() == 1
    assert LedgerEntry.objects.filter(event="run.denied").count() == 1
