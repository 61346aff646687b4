"""Tools a seat can hold for rooms and the inventory: ``create-project`` (spec "A room per
project": a project created inside a flow turn readies its creator's talk session when
a template is in place) and ``discover: [mailboxes]``'s ``list-mailboxes``."""

from __future__ import annotations

from mailboxes.models import Project, TalkListing
from tests.conftest import OWNER, mailbox_md
from tests.seats.conftest import worker_md

from .conftest import ROOM_TREE

PLANNER = worker_md(
    "Starts projects.",
    model="embedded/echo",
    tools="[create-project]",
    discover="[mailboxes]",
    body='Start one.\n/tool create-project {"title": "From a turn"}\n/tool list-mailboxes {}',
)


def tree(with_template: bool = True) -> dict:
    files = {k: v for k, v in ROOM_TREE.items() if with_template or "room/" not in k}
    files["teams/eng/workers/planner/WORKER.md"] = PLANNER
    files["teams/eng/mailboxes/plans/MAILBOX.md"] = mailbox_md("Plans.", members=("eng.planner",))
    return files


def test_a_project_created_in_a_turn_readies_the_creators_talk_session(room_tree, act):
    room_tree(tree())
    act("eng.plans", "post", {"body": "start the launch"}, user_id="u_42")
    project = Project.objects.get(title="From a turn")
    assert project.owner_user_id == OWNER  # the person the turn runs for: the mailbox's principal
    listing = TalkListing.objects.get(project=project)
    assert (listing.user_id, listing.session.state) == (OWNER, {"talk": {"projectId": project.project_id}})
    from workforce.models import Item

    (call,) = [i.data for i in Item.objects.filter(component="tool-call") if i.data["name"] == "create-project"]
    assert call["result"] == {"ok": True, "projectId": project.project_id, "talkSessionId": listing.session.session_id}
    (listed,) = [i.data for i in Item.objects.filter(component="tool-call") if i.data["name"] == "list-mailboxes"]
    assert listed["result"] == {
        "ok": True,
        "mailboxes": [{"id": "eng.plans", "description": "Plans.", "members": ["eng.planner"]}],
    }


def test_without_a_template_a_turns_project_gets_no_talk_session(room_tree, act):
    room_tree(tree(with_template=False))
    act("eng.plans", "post", {"body": "start the launch"}, user_id="u_42")
    project = Project.objects.get(title="From a turn")
    assert not TalkListing.objects.filter(project=project).exists()
