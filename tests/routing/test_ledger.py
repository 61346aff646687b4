"""What the route remembers (spec "What the route remembers", "What routing can't do"):
the last 20 lines and the last client post, kept for every mailbox on a kind built with
a route and never limited by the history window."""

from __future__ import annotations

from mailboxes.models import Route, RouteLedger
from mailboxes.roster import load_roster, set_current_roster
from mailboxes.routing import LEDGER_LINES, configure_route, read_route_ledger
from workforce.llm import ModelError
from workforce.models import Request, Session

from .conftest import DESK, DEVICES, OWNER, desk_md, lines, ok, route_items, routed_tree


def silent(call):
    return ModelError("the model is busy")


def test_twenty_lines_after_more_than_fifty_requests(routed, post, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 50
    _, resolver = routed()
    for n in range(30):
        post(f"printer question {n}")  # each answered: 60 lines
    assert Request.objects.filter(session__session_id=DESK).count() > 50
    session = Session.objects.get(session_id=DESK)
    ledger = RouteLedger.objects.get(session=session)
    assert len(ledger.lines) == LEDGER_LINES == 20
    assert [ln["id"] for ln in ledger.lines] == [ln.line_id for ln in lines()[-20:]]
    post("printer question 30")
    route = resolver.evaluators["mailbox-route"]
    assert len(route.calls[-1].state["recent"]) == 20
    assert route.calls[-1].state["recent"][0]["text"] == "printer question 20"
    # The member's model sees those 20 lines with the post.
    seen = resolver.calls_for(DEVICES)[-1].messages
    context = next(m["content"] for m in seen if m["role"] == "user" and m["content"].startswith("The last"))
    assert context.startswith(f"The last 20 line(s) in {DESK} before this post, oldest first:")
    assert context.count("\n") == 20


def test_the_ledger_is_not_limited_by_a_small_history_window(routed, post, settings, act):
    settings.WORKFORCE_HISTORY_WINDOW = 6
    _, resolver = routed()
    for n in range(12):
        post(f"printer question {n}")
    assert len(act(DESK, "read").output["transcript"]) < 20  # the window moved on
    post("printer question 12")
    assert len(resolver.evaluators["mailbox-route"].calls[-1].state["recent"]) == 20


def test_the_hold_survives_many_reads(routed, post, act, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 50
    _, resolver = routed(scripts={DEVICES: silent, "*": ok})
    post("my printer is jammed")
    first = Request.objects.get(action="post")
    for _ in range(60):
        act(DESK, "read")
    window = Request.objects.filter(session__session_id=DESK).order_by("-pk")[:50]
    assert first.pk not in [r.pk for r in window]  # the post left the history window
    post("and my password is wrong")
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (DEVICES, "held")]
    assert len(resolver.evaluators["mailbox-route"].calls) == 1


def test_the_ledger_is_kept_whether_or_not_the_mailbox_declares_routing(routed, post):
    routed(routed_tree(**{"teams/support/mailboxes/desk/MAILBOX.md": desk_md(routing=None)}))
    post("hello")
    ledger = read_route_ledger(Session.objects.get(session_id=DESK))
    assert [ln["text"] for ln in ledger["lines"]] == ["hello"]
    assert ledger["lastPost"] == {"id": lines()[0].line_id, "member": None, "by": None}


def test_routing_removed_and_restored_loses_no_lines_and_a_post_made_meanwhile_holds_nothing(routed, post, make_tree):
    _, resolver = routed(scripts={DEVICES: silent, "*": ok})
    post("my printer is jammed")  # devices, unanswered: it would hold the next
    unrouted = load_roster(make_tree(routed_tree(**{"teams/support/mailboxes/desk/MAILBOX.md": desk_md(routing=None)})))
    set_current_roster(unrouted)  # a start with routing: removed
    post("and my password too")  # wakes every agent; holds nothing
    routed_again = load_roster(make_tree(routed_tree()))
    set_current_roster(routed_again)  # routing: restored
    post("my password expired")
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), ("support.accounts", "evaluated")]
    assert len(resolver.evaluators["mailbox-route"].calls) == 2
    ledger = RouteLedger.objects.get()
    assert [ln["id"] for ln in ledger.lines] == [ln.line_id for ln in lines()]  # no line lost
    assert not Route.objects.filter(post__body="and my password too").exists()


def test_the_first_post_after_the_kind_gains_a_route_is_never_held_and_sees_the_window(routed, post, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 4  # a post and its fan-out: two requests each
    seats, resolver = routed()
    route = configure_route_off()
    for n in range(3):
        post(f"before the route {n}")  # a kind without a route keeps no record
    assert not RouteLedger.objects.exists() and not Route.objects.exists()
    configure_route("mailbox", route)
    post("my printer is jammed")
    recent = resolver.evaluators["mailbox-route"].calls[0].state["recent"]
    assert [r["text"] for r in recent] == ["before the route 2"]  # only what the window still holds


def test_a_post_while_the_kind_ran_without_a_route_makes_the_next_one_fresh(routed, post):
    seats, resolver = routed(scripts={DEVICES: silent, "*": ok})
    post("my printer is jammed")  # devices, unanswered
    route = configure_route_off()
    post("hello?")  # the app ran its kind without a route
    configure_route("mailbox", route)
    post("printer again")  # never held: the first since the kind gained a route
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (DEVICES, "evaluated")]
    assert len(resolver.evaluators["mailbox-route"].calls) == 2


def configure_route_off():
    from workforce.flows import registry

    route = registry.require("mailbox").facets["route"]
    configure_route("mailbox", None)
    return route


def test_the_route_item_and_ledger_name_the_principal_when_there_is_no_author(routed, post):
    _, resolver = routed()
    post("my printer is jammed")
    assert RouteLedger.objects.get().lines[0]["from"] == OWNER
