"""Reason codes and their HTTP statuses: the kernel holds its own, each app registers its
codes from its AppConfig.ready() (docs/architecture.md "Settings and reason codes")."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, OperationalError

from boards.apps import REASONS as BOARD_REASONS
from coordinators.apps import REASONS as COORDINATOR_REASONS
from mailboxes.apps import REASONS as MAILBOX_REASONS
from workforce import refusals
from workforce.refusals import KERNEL_REASONS, Refusal, failure_text, http_status_for, register_reason, registered_reasons

# Every code and status the service answered before the codes moved to their apps.
ANSWERED = {
    "invalid-input": 400,
    "idempotency-key-reused": 409,
    "payload-too-large": 413,
    "not-found": 404,
    "method-not-allowed": 405,
    "not-acceptable": 406,
    "unsupported-media-type": 415,
    "mailbox-not-bound": 404,
    "board-not-declared": 404,
    "session-not-found": 404,
    "flow-not-found": 404,
    "action-not-found": 404,
    "request-not-found": 404,
    "author-not-a-member": 403,
    "talk-session-not-listed": 403,
    "not-a-member": 403,
    "principal-mismatch": 403,
    "not-authenticated": 401,
    "mailbox-is-a-template": 409,
    "session-not-addressable": 409,
    "external-dispatcher": 503,
    "internal-error": 500,
    "task_not_found": 404,
    "unknown_assignee": 400,
    "invalid_arguments": 400,
    "state-field-reserved": 400,
    "worker-not-on-roster": 404,
    "coordinator-not-found": 404,
    "delegate-cannot-take-work": 409,
    "delegate-already-listed": 409,
    "delegates-full": 409,
    "delegate-not-listed": 409,
    "fallback-not-a-delegate": 409,
}


def test_every_code_answers_the_status_it_answered():
    assert ANSWERED.items() <= registered_reasons().items()
    assert {code: http_status_for(code) for code in ANSWERED} == ANSWERED
    assert http_status_for("delegate-is-busy") == 409  # nobody registered it: a state conflict
    assert Refusal("mailbox-not-bound", "no such mailbox").http_status == 404


def test_the_kernel_holds_only_its_own_codes():
    apps_codes = set(MAILBOX_REASONS) | set(BOARD_REASONS) | set(COORDINATOR_REASONS)
    assert not apps_codes & set(KERNEL_REASONS)
    assert set(ANSWERED) <= set(KERNEL_REASONS) | apps_codes
    assert MAILBOX_REASONS == {
        "mailbox-not-bound": 404,
        "board-not-declared": 404,
        "author-not-a-member": 403,
        "talk-session-not-listed": 403,
        "mailbox-is-a-template": 409,
        "unknown-assignee": 409,
        "seat-not-found": 404,
        "no-such-project": 404,
        "talk-not-bound": 404,
        "talk-bound-elsewhere": 409,
        "talk-on-a-mailbox": 409,
        "project-exists": 409,
        "member-not-in-organization": 404,
        "author-on-a-person-post": 400,
        "not-project-owner": 403,
        "answer-token-refused": 403,
    }
    assert BOARD_REASONS == {"task_not_found": 404, "unknown_assignee": 400, "invalid_arguments": 400}
    assert len(COORDINATOR_REASONS) == 8


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(refusals, "_statuses", dict(KERNEL_REASONS))


def test_register_reason_sets_the_status_and_is_idempotent(registry):
    assert http_status_for("room-is-full") == 409
    register_reason("room-is-full", 429)
    register_reason("room-is-full", 429)
    assert http_status_for("room-is-full") == 429
    assert Refusal("room-is-full", "ten members already").http_status == 429


@pytest.mark.parametrize(
    "code, status, message",
    [
        ("invalid-input", 422, "reason 'invalid-input' already answers 400; it cannot also answer 422"),
        ("room-is-full", 200, "reason 'room-is-full': a refusal answers a 4xx or 5xx status, not 200"),
        ("room-is-full", "404", "reason 'room-is-full': a refusal answers a 4xx or 5xx status, not '404'"),
        ("", 404, "a reason code is non-empty text, not ''"),
    ],
)
def test_register_reason_refuses_a_conflict_or_a_status_that_is_not_an_error(registry, code, status, message):
    with pytest.raises(ValueError) as raised:
        register_reason(code, status)
    assert str(raised.value) == message
    assert http_status_for("invalid-input") == 400


def test_a_database_error_is_told_by_its_class_and_logged_in_full(caplog):
    deadlock = OperationalError("deadlock detected\nDETAIL: Process 1 waits for ShareLock on transaction 2")
    assert failure_text(deadlock) == (
        "the database refused the statement (OperationalError); the error's detail is in the server's log"
    )
    assert "Process 1 waits for ShareLock on transaction 2" in caplog.text
    assert failure_text(IntegrityError("DETAIL: Key (id)=(5)")).startswith("the database refused the statement (IntegrityError)")
    assert failure_text(ValueError("bad")) == "ValueError: bad"  # anything else, as before
