"""Mail over HTTP: ``POST /api/mail`` (the ``mail.send`` permission with token auth;
anyone in development), and the thread reads, scoped to the caller's organization."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import override_settings
from rest_framework.test import APIClient

from mail.models import LedgerEntry, Thread
from workforce.models import Membership
from workforce.sessions import ensure_organization


@pytest.fixture
def client():
    return APIClient()


def send(client, committed, body: dict):
    return committed(client.post, "/api/mail", body, format="json")


def test_a_person_sends_a_mail_in_development_mode(client, agents, committed):
    agents()
    answer = send(client, committed, {"userId": "ann@example.org", "to": "eng.alpha", "subject": "Hi", "body": "Hello"})
    assert answer.status_code == 201, answer.json()
    data = answer.json()
    assert data["thread"] == "eng.alpha:1" and data["from"] == "human:ann@example.org" and data["to"] == "eng.alpha"
    assert data["labels"] == ["mail:new"] and data["hops"] == 0 and data["state"] == "new"
    thread = client.get("/api/mail/eng.alpha:1").json()
    assert thread["state"] == "replied" and [m["from"] for m in thread["messages"]] == [
        "human:ann@example.org",
        "agent:eng.alpha",
    ]
    listed = client.get("/api/mail?to=eng.alpha").json()["threads"]
    assert [t["thread"] for t in listed] == ["eng.alpha:1"]
    ledger = client.get("/api/mail/eng.alpha:1/ledger").json()["entries"]
    assert [e["event"] for e in ledger] == ["mail.sent", "mail.replied"]


@pytest.mark.parametrize(
    "body, status, reason",
    [
        ({"userId": "ann", "to": "eng.nobody", "body": "x"}, 404, "recipient-not-found"),
        ({"userId": "ann", "to": "eng.alpha", "body": "  "}, 400, "invalid-input"),
        ({"userId": "ann", "to": "eng.alpha", "body": "x", "subject": "two\nlines"}, 400, "invalid-input"),
        ({"userId": "ann", "to": "eng.alpha", "body": "x", "from": "agent:eng.boss"}, 400, "invalid-input"),
        ({"to": "eng.alpha", "body": "x"}, 400, "invalid-input"),
    ],
)
def test_refusals_write_nothing(client, agents, committed, body, status, reason):
    agents()
    answer = send(client, committed, body)
    assert answer.status_code == status and answer.json()["error"]["reason"] == reason
    assert not Thread.objects.exists() and not LedgerEntry.objects.exists()


@override_settings(WORKFORCE_AUTH="token")
def test_with_token_auth_sending_needs_the_mail_send_permission(client, agents, committed, org):
    agents()
    user = User.objects.create_user("ann", email="ann@example.org")
    Membership.objects.create(user=user, organization=org)
    client.force_authenticate(user)
    refused = send(client, committed, {"to": "eng.alpha", "body": "x"})
    assert refused.status_code == 403 and refused.json()["error"]["reason"] == "mail-send-not-permitted"
    assert not Thread.objects.exists()
    user.user_permissions.add(Permission.objects.get(content_type__app_label="mail", codename="send"))
    user = User.objects.get(pk=user.pk)  # a fresh permission cache
    client.force_authenticate(user)
    answer = send(client, committed, {"to": "eng.alpha", "body": "x"})
    assert answer.status_code == 201 and answer.json()["from"] == "human:ann@example.org"
    # The sender is the authenticated user, never a userId naming someone else.
    other = send(client, committed, {"userId": "bob", "to": "eng.alpha", "body": "x"})
    assert other.status_code == 403 and other.json()["error"]["reason"] == "principal-mismatch"


@override_settings(WORKFORCE_AUTH="token")
def test_another_organizations_thread_is_not_found(client, agents, committed, org):
    agents()
    acme = ensure_organization("acme")
    for name, where in (("ann", org), ("zed", acme)):
        user = User.objects.create_user(name, email=f"{name}@example.org")
        Membership.objects.create(user=user, organization=where)
        user.user_permissions.add(Permission.objects.get(content_type__app_label="mail", codename="send"))
    client.force_authenticate(User.objects.get(username="ann"))
    assert send(client, committed, {"to": "eng.reader", "body": "ours"}).status_code == 201
    client.force_authenticate(User.objects.get(username="zed"))
    answer = client.get("/api/mail/eng.reader:1")
    assert answer.status_code == 404 and answer.json()["error"]["reason"] == "thread-not-found"
    assert client.get("/api/mail/eng.reader:1/ledger").status_code == 404
    assert client.get("/api/mail").json()["threads"] == []
    assert client.get("/api/mail/not-a-thread").status_code == 404
