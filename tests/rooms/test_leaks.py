"""What a room and a project tell someone who is not in them (spec "A room per project";
docs/api.md "Endpoints": another user's or organization's object answers as an unknown one):

- creating a project with an id a project you are not in holds answers what ``GET`` of
  that id answers you (404 ``no-such-project``), not a 409 that says it exists;
- ``join`` on a project you are not in answers as an unknown project;
- another user's talk session, bound or not, answers every mailbox and room action word
  for word as a talk address nobody holds (``session-not-found``);
- a project's members are people of its organization (``member-not-in-organization``);
- a room post's wakes are listed under the post's request (``runs?startedBy=``).
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings

from mailboxes.models import Project, ProjectMember, TalkListing
from mailboxes.projects import do_add_project_member, do_create_project
from workforce.models import Membership, Request, Session
from workforce.refusals import Refusal

from .conftest import ALICE, BOB, OUTSIDER

URL = "/api/flows/mailbox/{}/actions/{}"
ACTIONS = [
    ("post", {"body": "hi"}),
    ("read", {}),
    ("read", {"after": 3}),
    ("join", {"projectId": "launch"}),
    ("join", {"projectId": "nowhere"}),
    ("fileTask", {"board": "b", "goal": "g"}),
    ("fileTask", {}),
    ("readBoard", {"board": "b"}),
    ("list_tasks_b", {}),
]


def error(response) -> tuple[int, dict]:
    return response.status_code, response.json()["error"]


def as_unknown(held: str, unknown: str, answer: tuple[int, dict]) -> tuple[int, dict]:
    """``answer`` with the held id's name replaced by the unknown one's."""
    status, err = answer
    return status, {key: value.replace(held, unknown) for key, value in err.items()}


# ----------------------------------------------------------------------------- creating a project


def test_a_non_member_creating_a_taken_id_gets_what_get_answers_them(project, client):
    shown = client.get("/api/projects/launch", {"userId": OUTSIDER})
    created = client.post("/api/projects", {"userId": OUTSIDER, "title": "Mine", "id": "launch"}, format="json")
    assert created.status_code == shown.status_code == 404
    assert (
        created.json()["error"]
        == shown.json()["error"]
        == {
            "reason": "no-such-project",
            "message": 'no-such-project: No project "launch" in this organization.',
        }
    )
    # ... which is also what both answer for an id nobody holds.
    unknown = client.get("/api/projects/nowhere", {"userId": OUTSIDER}).json()["error"]
    assert unknown["message"].replace("nowhere", "launch") == shown.json()["error"]["message"]
    assert Project.objects.get(project_id="launch").title == "Launch"  # untouched
    assert not ProjectMember.objects.filter(user_id=OUTSIDER).exists()


def test_a_member_creating_a_taken_id_is_told_it_exists(project, client):
    again = client.post("/api/projects", {"userId": BOB, "title": "Again", "id": "launch"}, format="json")
    assert again.status_code == 409 and again.json()["error"]["reason"] == "project-exists"


def test_another_organizations_project_id_is_free_in_yours(project, client, other_org):
    mine, _ = do_create_project(other_org, owner=OUTSIDER, title="Theirs", project_id="launch")
    assert mine.organization_id == other_org.pk
    assert Project.objects.filter(project_id="launch").count() == 2


# ----------------------------------------------------------------------------- join


def test_join_on_a_project_you_are_not_in_answers_as_an_unknown_project(project, client):
    theirs = client.post(URL.format("talk-out1", "join"), {"userId": OUTSIDER, "input": {"projectId": "launch"}}, format="json")
    unknown = client.post(URL.format("talk-out2", "join"), {"userId": OUTSIDER, "input": {"projectId": "nowhe"}}, format="json")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"] == as_unknown("nowhe", "launch", error(unknown))[1]
    assert not TalkListing.objects.filter(user_id=OUTSIDER).exists()


def test_join_on_another_organizations_project_is_unknown(project, act, other_org):
    do_create_project(other_org, owner=BOB, title="Elsewhere", project_id="elsewhere", ready_talk=True)
    joined = act("talk-bob-x", "join", {"projectId": "elsewhere"}, user_id=BOB)
    assert joined.error["reason"] == "no-such-project"
    assert not TalkListing.objects.filter(session__session_id="talk-bob-x").exists()
    # Every talk listing points at a session in its project's organization.
    for listing in TalkListing.objects.select_related("project", "session"):
        assert listing.session.organization_id == listing.project.organization_id


# ----------------------------------------------------------------------------- another user's talk session


@pytest.mark.parametrize("action,input", ACTIONS)
def test_another_users_talk_session_answers_as_an_id_nobody_holds(project, client, action, input):
    _, alice, _ = project
    unbound = "talk-alice-unbound"
    made = client.post(URL.format(unbound, "join"), {"userId": ALICE, "input": {"projectId": "nowhere"}}, format="json")
    assert made.status_code == 404 and Session.objects.filter(session_id=unbound, user_id=ALICE).exists()
    requests = Request.objects.count()
    for held in (alice, f"{alice}:eng.lead", unbound):
        unknown = "talk-" + "0" * (len(held) - 5) if ":" not in held else f"talk-{'0' * 20}:eng.lead"
        theirs = client.post(URL.format(held, action), {"userId": OUTSIDER, "input": input}, format="json")
        free = client.post(URL.format(unknown, action), {"userId": OUTSIDER, "input": input}, format="json")
        if action == "join" and ":" not in held:
            # A free talk address is taken by join (that is what join is for); a held one
            # can't be, and answers as the kernel does for a session you may not read.
            assert free.status_code != 404 or free.json()["error"]["reason"] == "no-such-project"
            assert error(theirs)[0] == 404 and error(theirs)[1]["reason"] == "session-not-found"
            continue
        assert error(theirs) == as_unknown(unknown, held, error(free)), (held, action)
        # (A board tool the roster names for no board is no action at all, on either.)
        reason = "action-not-found" if action == "list_tasks_b" else "session-not-found"
        assert error(theirs)[0] == 404 and error(theirs)[1]["reason"] == reason
        assert not Session.objects.filter(session_id=unknown).exists()  # nothing created
    # Nothing was recorded on Alice's sessions.
    assert not Request.objects.filter(session__user_id=ALICE, user_id=OUTSIDER).exists()
    assert Request.objects.filter(user_id=OUTSIDER).count() == Request.objects.count() - requests


def test_your_own_unbound_talk_session_still_says_join_first(project, act):
    made = act("talk-mine", "join", {"projectId": "nowhere"}, user_id=BOB)
    assert made.error["reason"] == "no-such-project"
    posted = act("talk-mine", "post", {"body": "hi"}, user_id=BOB)
    assert posted.error["reason"] == "talk-not-bound" and "join" in posted.error["message"]


# ----------------------------------------------------------------------------- members


def test_a_member_is_a_user_id(project, client):
    for member in ["x/y", "a\nb", "bob smith", "u\u00e9"]:
        added = client.post("/api/projects/launch/members", {"userId": ALICE, "member": member}, format="json")
        assert added.status_code == 400 and added.json()["error"]["reason"] == "invalid-input", member
        created = client.post("/api/projects", {"userId": ALICE, "title": "T", "members": [member]}, format="json")
        assert created.status_code == 400 and created.json()["error"]["reason"] == "invalid-input", member
    assert set(ProjectMember.objects.values_list("user_id", flat=True)) == {ALICE, BOB}


def test_an_outsider_learns_nothing_about_users_from_adding_members(project, client):
    added = client.post("/api/projects/launch/members", {"userId": OUTSIDER, "member": "x/y"}, format="json")
    assert added.status_code == 404 and added.json()["error"]["reason"] == "no-such-project"


@pytest.fixture
def accounts(org, other_org):
    """ALICE and BOB in the default organization, OUTSIDER in acme."""
    users = {}
    for name, in_org in ((ALICE, org), (BOB, org), (OUTSIDER, other_org)):
        users[name] = User.objects.create_user(name)
        Membership.objects.create(user=users[name], organization=in_org)
    return users


@override_settings(WORKFORCE_AUTH="token")
def test_with_token_auth_a_member_of_another_organization_is_refused(room_tree, client, org, accounts):
    room_tree()
    client.force_authenticate(accounts[ALICE])
    for members in ([OUTSIDER], [BOB, OUTSIDER], ["nobody-at-all"]):
        created = client.post("/api/projects", {"title": "Launch", "id": "launch", "members": members}, format="json")
        assert created.status_code == 404, created.content
        assert created.json()["error"]["reason"] == "member-not-in-organization"
    assert not Project.objects.exists()
    created = client.post("/api/projects", {"title": "Launch", "id": "launch", "members": [BOB]}, format="json")
    assert created.status_code == 201 and created.json()["members"] == [ALICE, BOB]
    # Another organization's user and a name nobody holds get one answer, word for word.
    theirs = client.post("/api/projects/launch/members", {"member": OUTSIDER}, format="json")
    nobody = client.post("/api/projects/launch/members", {"member": "nobody-at-all"}, format="json")
    assert theirs.status_code == nobody.status_code == 404
    assert theirs.json()["error"]["message"].replace(OUTSIDER, "nobody-at-all") == nobody.json()["error"]["message"]
    assert list(ProjectMember.objects.values_list("user_id", flat=True).order_by("pk")) == [ALICE, BOB]
    with pytest.raises(Refusal) as caught:
        do_add_project_member(org, "launch", user_id=OUTSIDER, by=ALICE)
    assert caught.value.reason == "member-not-in-organization"


# ----------------------------------------------------------------------------- runs


def test_a_room_posts_wakes_are_listed_under_its_request(project, act, client):
    _, alice, _ = project
    posted = act(alice, "post", {"body": "who is on it?"}, user_id=ALICE)
    turns = Request.objects.filter(session__parent__session_id=alice, action="onMailboxPost")
    assert turns.count() == 2
    assert {turn.parent_request_id for turn in turns} == {posted.pk}
    # The runs listing filters by it: hold the turns as running and ask.
    turns.update(status=Request.Status.RUNNING)
    runs = client.get(f"/api/sessions/{alice}/runs", {"userId": ALICE, "startedBy": posted.request_id}).json()
    assert sorted(run["startedBy"] for run in runs["runs"]) == [posted.request_id] * 2


# ----------------------------------------------------------------------------- the break-it pass


def test_a_brief_is_capped_like_any_text_a_client_writes(room_tree, client, org, settings):
    room_tree()
    settings.WORKFORCE_MAX_TEXT_CHARS = 100
    long = client.post("/api/projects", {"userId": ALICE, "title": "T", "brief": "x" * 101}, format="json")
    assert long.status_code == 400 and long.json()["error"] == {
        "reason": "invalid-input",
        "message": "invalid-input: brief: text of at most 100 characters.",
    }
    with pytest.raises(Refusal):
        do_create_project(org, owner=ALICE, title="T", brief="x" * 101)  # the create-project tool's way in
    assert not Project.objects.exists()
    assert client.post("/api/projects", {"userId": ALICE, "title": "T", "brief": "x" * 100}, format="json").status_code == 201


def test_a_long_unknown_project_id_is_not_echoed_whole(room_tree, client):
    room_tree()
    answer = client.get("/api/projects/" + "x" * 5000, {"userId": ALICE})
    assert answer.status_code == 404 and len(answer.json()["error"]["message"]) < 200


def test_an_anonymous_inventory_read_reaches_no_ones_own_seat(room_tree, client):
    from tests.seats.conftest import worker_md

    room_tree()
    md = worker_md("Notes.", model="embedded/echo")
    hired = client.post("/api/workers", {"userId": "anonymous", "id": "notes", "workerMd": md}, format="json")
    assert hired.status_code == 201
    assert client.get("/api/seats/notes/mailboxes", {"userId": "anonymous"}).status_code == 200  # its owner
    anonymous = client.get("/api/seats/notes/mailboxes")  # nobody named
    assert anonymous.status_code == 404 and anonymous.json()["error"]["reason"] == "seat-not-found"
