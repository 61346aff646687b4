"""A room's post is a hot path: its queries do not grow with the room's lines nor with
the template's seats (one INSERT for every seat's delivery)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes.projects import do_create_project
from tests.conftest import mailbox_md
from tests.seats.conftest import ECHO_LISTENER

from .conftest import ALICE, ROOM_TREE


def _tree(seats: tuple[str, ...]) -> dict:
    files = dict(ROOM_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room.", members=seats, mintFor="projects")
    for seat in seats:
        files[f"teams/eng/workers/{seat.split('.')[1]}/WORKER.md"] = ECHO_LISTENER
    return files


def _post_queries(act, talk: str, body: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        request = act(talk, "post", {"body": body}, user_id=ALICE, run=False)
    assert request.status == "completed", request.error
    return len(captured)


def test_a_room_post_costs_the_same_with_more_lines_and_more_seats(room_tree, act, org):
    room_tree(_tree(("eng.lead", "eng.analyst")))
    _, talk = do_create_project(org, owner=ALICE, title="Two", project_id="two", ready_talk=True)
    first = _post_queries(act, talk.session_id, "one")
    for n in range(25):
        act(talk.session_id, "post", {"body": f"line {n}"}, user_id=ALICE, run=False)
    assert _post_queries(act, talk.session_id, "later") == first

    room_tree(_tree(("eng.lead", "eng.analyst", "eng.a", "eng.b", "eng.c")))
    _, talk = do_create_project(org, owner=ALICE, title="Five", project_id="five", ready_talk=True)
    _post_queries(act, talk.session_id, "warm up")
    assert _post_queries(act, talk.session_id, "five seats") == first
    assert first <= 16, first
