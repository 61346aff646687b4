"""``Idempotency-Key`` on ``POST /api/mail`` and ``POST /api/workers/{worker}/chat``, as
the action endpoint honours it: the same key and body answer the first call
(``Idempotent-Replayed: true``) and act once; the key with another body is 409
``idempotency-key-reused``; each person has their own keys. On PostgreSQL, two sends
(and two chat turns) with one key at the same moment make one thread (one turn)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mail.chat import do_start_chat
from mail.models import ChatRun, LedgerEntry, SendKey, Thread
from mail.services import do_send_person_mail
from mail.store import current_store
from tests.conftest import run_in_threads
from tests.mail.test_chat import TREE as CHAT_TREE
from workforce.models import Request
from workforce.posted_by import user_posted_by
from workforce.principals import Principal
from workforce.sessions import ensure_organization


@pytest.fixture
def client():
    return APIClient()


def send(client, committed, body: dict, key: str | None):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return committed(client.post, "/api/mail", body, format="json", **headers)


def chat(client, committed, message: str, key: str | None, user: str = "ann"):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return committed(client.post, "/api/workers/eng.chatty/chat", {"userId": user, "message": message}, format="json", **headers)


MAIL = {"userId": "ann@example.org", "to": "eng.idle", "subject": "Hi", "body": "Hello"}


def test_a_mail_sent_twice_with_one_key_is_one_thread(client, agents, committed):
    agents()
    first = send(client, committed, MAIL, "k-1")
    again = send(client, committed, MAIL, "k-1")
    assert first.status_code == 201 and again.status_code == 201, again.json()
    assert first.json()["thread"] == again.json()["thread"] == "eng.idle:1"
    assert "Idempotent-Replayed" not in first and again["Idempotent-Replayed"] == "true"
    assert Thread.objects.count() == 1
    assert len(current_store().list_issues("default", "eng.idle")) == 1
    assert LedgerEntry.objects.filter(event="mail.sent").count() == 1
    assert list(SendKey.objects.values_list("user_id", "key", "thread__number")) == [("ann@example.org", "k-1", 1)]


def test_a_key_used_for_another_mail_is_refused_and_writes_nothing(client, agents, committed):
    agents()
    assert send(client, committed, MAIL, "k-1").status_code == 201
    other = send(client, committed, {**MAIL, "body": "Hello again"}, "k-1")
    assert other.status_code == 409, other.json()
    assert other.json()["error"]["reason"] == "idempotency-key-reused"
    assert "eng.idle:1" in other.json()["error"]["message"]
    assert Thread.objects.count() == 1 and len(current_store().list_issues("default", "eng.idle")) == 1


def test_keys_are_per_person_and_mail_without_a_key_is_sent_each_time(client, agents, committed):
    agents()
    assert send(client, committed, MAIL, "k-1").json()["thread"] == "eng.idle:1"
    assert send(client, committed, {**MAIL, "userId": "bob@example.org"}, "k-1").json()["thread"] == "eng.idle:2"
    assert send(client, committed, MAIL, None).json()["thread"] == "eng.idle:3"
    assert send(client, committed, MAIL, None).json()["thread"] == "eng.idle:4"


def test_a_refused_send_keeps_no_key(client, agents, committed):
    agents()
    missing = send(client, committed, {**MAIL, "to": "eng.nobody"}, "k-1")
    assert missing.status_code == 404 and missing.json()["error"]["reason"] == "recipient-not-found"
    assert SendKey.objects.count() == 0
    assert send(client, committed, MAIL, "k-1").json()["thread"] == "eng.idle:1"  # the key is still free


def test_a_key_longer_than_255_characters_is_invalid_input(client, agents, committed):
    agents()
    answer = send(client, committed, MAIL, "k" * 256)
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    assert Thread.objects.count() == 0


@pytest.mark.parametrize("key", ["k\t1", "k\x7f1", "k\x851"])
def test_a_key_holding_a_control_character_is_invalid_input(client, agents, committed, key):
    agents()
    answer = send(client, committed, MAIL, key)
    assert answer.status_code == 400 and answer.json()["error"] == {
        "reason": "invalid-input",
        "message": "invalid-input: Idempotency-Key holds a control character.",
    }
    assert Thread.objects.count() == 0


def test_a_chat_message_sent_twice_with_one_key_runs_one_turn(client, agents, committed):
    agents(CHAT_TREE)
    first = chat(client, committed, "hello", "c-1")
    again = chat(client, committed, "hello", "c-1")
    assert first.status_code == 202 and again.status_code == 202, again.json()
    assert first.json()["requestId"] == again.json()["requestId"]
    assert again["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first
    assert ChatRun.objects.count() == 1
    assert Request.objects.filter(action="onChat").count() == 1
    assert Request.objects.get(action="onChat").idempotency_key == "c-1"


def test_a_chat_key_used_for_another_message_is_refused(client, agents, committed):
    agents(CHAT_TREE)
    assert chat(client, committed, "hello", "c-1").status_code == 202
    other = chat(client, committed, "something else", "c-1")
    assert other.status_code == 409 and other.json()["error"]["reason"] == "idempotency-key-reused"
    assert ChatRun.objects.count() == 1
    # Another person's key is their own; no key runs a turn each time.
    assert chat(client, committed, "hello", "c-1", user="bob").status_code == 202
    assert chat(client, committed, "hello", None).status_code == 202
    assert chat(client, committed, "hello", None).status_code == 202
    assert ChatRun.objects.count() == 4


N = 4


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_sends_with_one_key_at_once_make_one_thread(agents, org):
    agents()

    def one(i: int) -> tuple[str, bool]:
        principal = Principal(org=ensure_organization("default"), user_id="ann@example.org")
        thread = do_send_person_mail(principal, None, to="eng.idle", subject="Hi", body="Hello", idempotency_key="same")
        return thread.thread_id, bool(getattr(thread, "replayed", False))

    answers = run_in_threads(one, N)
    assert {t for t, _ in answers} == {"eng.idle:1"}
    assert sorted(r for _, r in answers) == [False] + [True] * (N - 1)
    assert Thread.objects.count() == 1
    assert len(current_store().list_issues("default", "eng.idle")) == 1
    assert LedgerEntry.objects.filter(event="mail.sent").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_chat_turns_with_one_key_at_once_run_one_turn(agents, org):
    agents(CHAT_TREE)

    def one(i: int) -> str:
        return do_start_chat(
            ensure_organization("default"),
            user_id="ann",
            worker="eng.chatty",
            message="hello",
            posted_by=user_posted_by("ann", verified=False),
            idempotency_key="same",
        ).request_id

    assert len(set(run_in_threads(one, N))) == 1
    assert ChatRun.objects.count() == 1 and Request.objects.filter(action="onChat").count() == 1
