"""Mailbox kinds of your own (spec "Registering a kind of your own")."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from mailboxes.kinds import register_mailbox_kind
from mailboxes.roster import (
    TreeError,
    load_roster,  # noqa: E402
)
from workforce.flows import Action, FlowKind, registry

from ..conftest import mailbox_md


@pytest.fixture
def custom_kind():
    flow = register_mailbox_kind(FlowKind(kind="my-mailbox", actions={"read": Action("read", lambda ctx, data: {})}))
    yield flow
    registry.unregister("my-mailbox")


def test_a_kind_called_channel_is_refused():
    with pytest.raises(ImproperlyConfigured, match='can\'t be called "channel"'):
        register_mailbox_kind(FlowKind(kind="channel"))


def test_a_record_naming_a_registered_kind_of_your_own_binds_on_it(make_tree, custom_kind):
    roster = load_roster(make_tree({"teams/eng/mailboxes/odd/MAILBOX.md": mailbox_md(flow="my-mailbox")}))
    assert [(m.id, m.kind) for m in roster.mailboxes] == [("eng.odd", "my-mailbox")]


def test_a_kind_of_your_own_cannot_hold_a_board(make_tree, custom_kind):
    with pytest.raises(TreeError) as refused:
        load_roster(make_tree({"teams/eng/mailboxes/odd/MAILBOX.md": mailbox_md(flow="my-mailbox", boards="[work]")}))
    assert "cannot hold a board" in str(refused.value)
    assert "refused 1 of 1 declarations" in str(refused.value)


def test_a_kind_not_registered_is_refused_by_name_never_the_builtin(make_tree):
    with pytest.raises(Exception) as refused:
        load_roster(make_tree({"teams/eng/mailboxes/odd/MAILBOX.md": mailbox_md(flow="my-mailbox")}))
    assert 'flow: names the kind "my-mailbox", which was not registered' in str(refused.value)
