"""Declaring routing (spec "Routing a mailbox"): ``routing:`` with ``fallback:``; every
problem refused with the spec's words, all at once, nothing opened."""

from __future__ import annotations

import pytest

from mailboxes.roster import TreeError, load_roster
from mailboxes.routing import configure_route, route_by_purpose
from seats.hiring import hire_workforce
from seats.workers import read_workforce
from workforce.flows import FlowKind, registry
from workforce.models import Session

from .conftest import DESK, desk_md, routed_tree, worker_md

DESK_FILE = "teams/support/mailboxes/desk/MAILBOX.md"


@pytest.fixture
def quiet_kind():
    """A worker kind that can't hear a post (no onMailboxPost)."""
    flow = registry.register(FlowKind(kind="quiet", facets={"worker": True, "tools": {}}))
    yield flow
    registry.unregister("quiet")


def bind(make_tree, files, *, route=True, hire=True):
    """Hire the tree's workers, build the kind with a route over them (or none), bind."""
    root = make_tree(files)
    seats = hire_workforce(read_workforce(root).workers) if hire else []
    configure_route("mailbox", route_by_purpose(seats, model="embedded/lexical") if route else None)
    return load_roster(root)


def refusal(make_tree, files, **kw) -> str:
    with pytest.raises(TreeError) as refused:
        bind(make_tree, files, **kw)
    return str(refused.value)


def test_a_routed_mailbox_binds_with_its_fallback(make_tree, db):
    roster = bind(make_tree, routed_tree())
    assert roster.mailbox(DESK).routing == {"fallback": "support.general"}


def test_routing_that_is_not_a_mapping_is_refused(make_tree, db):
    message = refusal(make_tree, routed_tree(**{DESK_FILE: desk_md(routing="support.general")}))
    assert "support.desk: routing: must be a mapping with fallback:" in message


def test_an_unknown_key_under_routing_is_refused_by_name(make_tree, db):
    message = refusal(make_tree, routed_tree(**{DESK_FILE: desk_md(routing="{fallback: support.general, model: x}")}))
    assert 'routing: "model" is not a routing key; the only key is fallback' in message


def test_routing_without_a_fallback_is_refused(make_tree, db):
    message = refusal(make_tree, routed_tree(**{DESK_FILE: desk_md(routing="{}")}))
    assert "routing: names no fallback:, the member who takes a post the route can't place" in message


def test_a_fallback_that_is_not_a_member_is_refused(make_tree, db):
    message = refusal(make_tree, routed_tree(**{DESK_FILE: desk_md(routing="{fallback: support.lead}")}))
    assert 'routing: fallback "support.lead" is not a member of this mailbox' in message
    assert "the fallback has to be a member whose hired seat can hear a post" in message


def test_a_fallback_whose_seat_cannot_hear_a_post_is_refused(make_tree, db, quiet_kind):
    files = routed_tree(**{"teams/support/workers/general/WORKER.md": worker_md("Anything else.", flow="quiet")})
    message = refusal(make_tree, files)
    assert 'support.desk: routing: fallback "support.general" runs on the quiet kind, which can\'t hear a post' in message


def test_a_fallback_with_no_hired_seat_is_refused(make_tree, db):
    message = refusal(make_tree, routed_tree(**{"teams/support/workers/general/WORKER.md": None}))
    assert 'routing: fallback "support.general" has no hired seat' in message


def test_routing_on_a_kind_built_without_a_route_is_refused(make_tree, db, settings):
    settings.WORKFORCE_ROUTE_MODEL = ""  # the built-in kind is then built without one
    message = refusal(make_tree, routed_tree(), route=False)
    assert 'support.desk: routing: needs a kind built with a route, and "mailbox" has none' in message


def test_every_problem_is_named_at_once_and_nothing_is_opened(make_tree, db, quiet_kind):
    files = routed_tree(
        **{
            DESK_FILE: desk_md(routing="{fallback: support.lead, extra: 1}"),
            "teams/support/mailboxes/help/MAILBOX.md": desk_md(routing="[support.general]"),
            "teams/support/mailboxes/ok/MAILBOX.md": desk_md(),
        }
    )
    message = refusal(make_tree, files)
    assert "refused 2 of 3 declarations" in message
    assert '"extra" is not a routing key' in message and 'fallback "support.lead" is not a member' in message
    assert "support.help: routing: must be a mapping" in message
    assert not Session.objects.exists()


def test_boot_refuses_to_start_naming_the_mailbox(make_tree, db, quiet_kind, settings):
    from workforce_project.boot import boot

    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    root = make_tree(routed_tree(**{"teams/support/workers/general/WORKER.md": worker_md("Anything else.", flow="quiet")}))
    with pytest.raises(TreeError, match='support.desk: routing: fallback "support.general" runs on the quiet kind'):
        boot(root)
    assert not Session.objects.exists()


def test_boot_builds_the_kind_with_the_route_model(make_tree, db, settings):
    from mailboxes.routing import RouteByPurpose
    from workforce_project.boot import boot

    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    roster = boot(make_tree(routed_tree()))
    route = registry.require("mailbox").facets["route"]
    assert isinstance(route, RouteByPurpose) and route.model == "embedded/lexical"
    assert sorted(s.seat_id for s in route.seats) == ["support.accounts", "support.devices", "support.general"]
    assert roster.mailbox(DESK).routing == {"fallback": "support.general"}
