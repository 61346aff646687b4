"""Fixtures for a project's room (spec "A room per project"): a tree with a room
template of two echo seats, hired and wired to wake, two members and an outsider.
django-q2 runs ``sync`` here (settings_test): a post's deliveries run when its
transaction's on-commit callbacks run."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from mailboxes.models import Project
from mailboxes.notify import configure_notify, wake_member_seats
from mailboxes.projects import do_create_project
from tests.conftest import MEMBER, OUTSIDER, OWNER, hire_tree, mailbox_md, open_mailboxes, wired_by_hand
from tests.seats.conftest import ECHO_LISTENER, worker_md
from workforce.sessions import do_run_action

ALICE = "u_alice"
BOB = "u_bob"
LEAD = "eng.lead"
ANALYST = "eng.analyst"
SEATS = [LEAD, ANALYST]
CHARTER = "Plan the work, and say what is blocked."

ROOM_TREE = {
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=(LEAD, ANALYST)),
    "teams/eng/mailboxes/room/MAILBOX.md": mailbox_md(
        "The room every project gets.", members=(LEAD, ANALYST), mintFor="projects", body=CHARTER
    ),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
    "teams/eng/workers/analyst/WORKER.md": ECHO_LISTENER,
    "teams/eng/workers/quiet/WORKER.md": worker_md("Hears nothing it is not sent.", model="embedded/echo"),
}

__all__ = ["ALICE", "BOB", "LEAD", "ANALYST", "SEATS", "CHARTER", "ROOM_TREE", "MEMBER", "OUTSIDER", "OWNER"]


@pytest.fixture(autouse=True)
def rooms_runtime():
    with wired_by_hand("mailbox", "agent"):
        yield


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def room_tree(make_tree, org):
    """``room_tree(files=ROOM_TREE) -> root``: write, open, hire and wire the tree."""

    def _make(files: dict[str, str] | None = None):
        root = make_tree(ROOM_TREE if files is None else files)
        open_mailboxes(root, org)
        seats = hire_tree(root)
        configure_notify("mailbox", wake_member_seats(seats))
        return root

    return _make


@pytest.fixture
def project(room_tree, org) -> tuple[Project, str, str]:
    """``(project, alice's talk session id, bob's talk session id)``: a project Alice
    created with Bob as a member; both joined (Alice's readied at create, Bob's by join)."""
    room_tree()
    project, talk = do_create_project(org, owner=ALICE, title="Launch", members=[BOB], project_id="launch", ready_talk=True)
    joined = do_run_action(
        org=org, kind="mailbox", session_id="talk-bob", action="join", input={"projectId": "launch"}, user_id=BOB
    )
    assert joined.status == "completed", joined.error
    return project, talk.session_id, "talk-bob"


@pytest.fixture
def act(org, django_capture_on_commit_callbacks):
    """``act(session_id, action, input, user_id) -> Request``, committed, with every
    delivery it hands out run (sync cluster)."""

    def _act(session_id: str, action: str, input=None, *, user_id: str, internal: bool = False, run: bool = True):
        with django_capture_on_commit_callbacks(execute=run):
            return do_run_action(
                org=org,
                kind="mailbox",
                session_id=session_id,
                action=action,
                input=input or {},
                user_id=user_id,
                internal=internal,
            )

    return _act
