"""Typed seams (``workforce.facets``): every facet a built-in kind carries is one of the
declared facets, and a facet reads as its default on a kind that does not set it."""

from __future__ import annotations

import pytest

from workforce.facets import ALL_FACETS, CLIENT_CREATES_SESSIONS, NOTIFY, POST_TURN, PRIVATE_SESSIONS
from workforce.flows import FlowKind, registry

DECLARED = {facet.key for facet in ALL_FACETS}


@pytest.mark.parametrize("kind", ["mailbox", "agent", "coordinator"])
def test_every_facet_a_built_in_kind_carries_is_declared(kind):
    flow = registry.require(kind)
    assert set(flow.facets) <= DECLARED, sorted(set(flow.facets) - DECLARED)


def test_the_declared_keys_are_distinct():
    assert len(DECLARED) == len(ALL_FACETS)


def test_a_facet_reads_as_its_default_where_it_is_not_set():
    bare = FlowKind(kind="bare")
    assert NOTIFY.get(bare) is None and POST_TURN.get(None) is None
    assert PRIVATE_SESSIONS.get(bare) is False
    assert CLIENT_CREATES_SESSIONS.get(bare) is True  # an action call naming a new id creates it
    assert POST_TURN.of("agent") is registry.require("agent").facets["post_turn"]
