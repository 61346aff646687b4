"""The mail index and ledger in the admin: listed, read-only."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mail.models import LedgerEntry, MailRun, Thread

MODELS = ["thread", "ledgerentry", "mailrun", "webhookdelivery"]


@pytest.fixture
def mailed(agents, send):
    agents()
    send("eng.alpha", "Hello, admin.")


@pytest.mark.parametrize("model", MODELS)
def test_changelists_load_and_nothing_can_be_added(admin_client, mailed, model):
    assert admin_client.get(reverse(f"admin:mail_{model}_changelist")).status_code == 200
    assert admin_client.get(reverse(f"admin:mail_{model}_add")).status_code == 403


@pytest.mark.parametrize("model", [Thread, LedgerEntry, MailRun])
def test_a_row_reads_but_cannot_be_changed_or_deleted(admin_client, mailed, model):
    row = model.objects.first()
    name = model._meta.model_name
    page = admin_client.get(reverse(f"admin:mail_{name}_change", args=[row.pk]))
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.post(reverse(f"admin:mail_{name}_delete", args=[row.pk]), {"post": "yes"}).status_code == 403
    assert model.objects.filter(pk=row.pk).exists()
