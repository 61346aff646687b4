"""Limits that keep one caller from tying up the cluster or bloating the store."""

from __future__ import annotations

import pytest
from django.test import override_settings

from mailboxes.models import Line
from mailboxes.routing import LEDGER_TEXT_CHARS, ledger_text
from workforce.llm.lexical import MAX_WORD, terms
from workforce.principals import resolve_principal
from workforce.refusals import Refusal

from ..conftest import mailbox_md


def test_a_huge_word_is_not_stemmed():
    """Stemming time grows with a word's length squared: a 2 MB word is no term at all."""
    assert terms("y" * 2_000_000) == []
    assert terms("printer " + "x" * (MAX_WORD + 1)) == ["printer"]


def test_only_the_head_of_a_long_text_is_weighed():
    assert "printer" not in terms("word " * 5_000 + "printer")


def test_the_ledger_keeps_a_long_line_cut_with_a_note():
    body = "z" * (LEDGER_TEXT_CHARS + 500)
    kept = ledger_text(body)
    assert kept.startswith("z" * LEDGER_TEXT_CHARS)
    assert kept.endswith("[500 more characters in the transcript]")
    assert ledger_text("short") == "short"


@override_settings(WORKFORCE_MAX_TEXT_CHARS=100)
def test_a_post_longer_than_the_text_limit_is_invalid_input(open_tree, act):
    open_tree()
    refused = act("eng.standup", "post", {"body": "x" * 101})
    assert refused.status == "failed" and refused.error["reason"] == "invalid-input"
    assert not Line.objects.exists()
    assert act("eng.standup", "post", {"body": "x" * 100}).status == "completed"


@pytest.mark.parametrize("field,value", [("maxAttempts", 2**31), ("priority", 2**31), ("priority", -(2**31))])
def test_a_number_the_database_cannot_hold_is_invalid_input(open_tree, act, field, value):
    open_tree({"teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(boards="[followups]")})
    refused = act("eng.incidents", "fileTask", {"board": "followups", "goal": "g", field: value})
    assert refused.status == "failed" and refused.error["reason"] == "invalid-input", refused.error


def test_a_user_id_with_a_colon_is_refused(db, rf):
    """Session ids are built from user ids (``<worker>:<user>``): a ``:`` in one could
    spell another user's session id."""
    with pytest.raises(Refusal) as refused:
        resolve_principal(rf.post("/"), "victim:support.devices")
    assert refused.value.reason == "invalid-input"
