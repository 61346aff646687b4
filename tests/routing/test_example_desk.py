"""The example tree's routed support desk (spec "Routing a mailbox"): its descriptions route
real questions with the embedded evaluator, and a post reaches only the member it fits."""

from __future__ import annotations

from bench.route_questions import HELD_OUT, QUESTIONS, format_table, route_table
from mailboxes.models import Delivery, Line
from workforce.llm import set_model_resolver
from workforce.sessions import do_run_action

from .conftest import DESK, DEVICES, GENERAL, route_items


def test_twenty_support_questions_route_to_the_right_member(capsys):
    rows = route_table()
    assert len(rows) == len(QUESTIONS) == 20
    with capsys.disabled():
        print("\n" + format_table(rows))
        print("\nHeld out (never tuned against):\n" + format_table(route_table(questions=HELD_OUT)))
    assert sum(right for *_, right in rows) >= 18


def test_the_example_desk_boots_routed_and_a_post_reaches_only_the_member_it_fits(
    settings, db, org, django_capture_on_commit_callbacks
):
    from workforce_project.boot import boot, open_roster

    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    set_model_resolver(None)  # the real embedded models: echo seats, the lexical evaluator
    roster = boot(settings.WORKFORCE_ROOT)
    assert roster.mailbox(DESK).routing == {"fallback": GENERAL}
    open_roster(roster)
    with django_capture_on_commit_callbacks(execute=True):
        do_run_action(
            org=org, kind="mailbox", session_id=DESK, action="post", input={"body": "My laptop won't charge."}, user_id="u_42"
        )
    lines = list(Line.objects.filter(session__session_id=DESK).order_by("seq"))
    assert [(ln.author, ln.seat_authored) for ln in lines] == [(None, False), (DEVICES, True)]
    assert lines[1].body == f"{DEVICES} heard: workforce in {DESK}: My laptop won't charge."
    assert [d.member for d in Delivery.objects.all()] == [DEVICES]
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated")]
    with django_capture_on_commit_callbacks(execute=True):
        do_run_action(
            org=org,
            kind="mailbox",
            session_id=DESK,
            action="post",
            input={"body": "Where is my order? It was due Tuesday."},
            user_id="u_42",
        )
    assert [(i["member"], i["by"]) for i in route_items()] == [(DEVICES, "evaluated"), (GENERAL, "evaluated")]
