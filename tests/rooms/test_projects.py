"""Projects (spec "A room per project"): the service API, the REST endpoints, and the
creator's talk session readied with the project."""

from __future__ import annotations

import pytest

from mailboxes.models import InventoryMailbox, Project, ProjectMember, TalkListing
from mailboxes.projects import do_add_project_member, do_create_project
from mailboxes.roster import current_roster
from workforce.models import Session
from workforce.refusals import Refusal

from .conftest import ALICE, BOB, OUTSIDER, ROOM_TREE


def test_creating_a_project_over_http_readies_the_creators_talk_session(room_tree, client, org):
    room_tree()
    answer = client.post(
        "/api/projects", {"userId": ALICE, "title": "Launch", "brief": "Ship it.", "members": [BOB]}, format="json"
    )
    assert answer.status_code == 201, answer.content
    data = answer.json()
    assert (data["title"], data["brief"], data["status"], data["owner"], data["members"]) == (
        "Launch",
        "Ship it.",
        "active",
        ALICE,
        [ALICE, BOB],
    )
    talk = Session.objects.get(organization=org, session_id=data["talkSessionId"])
    assert (talk.flow_kind, talk.user_id, talk.state) == ("mailbox", ALICE, {"talk": {"projectId": data["id"]}})
    assert TalkListing.objects.get(project__project_id=data["id"], user_id=ALICE).session == talk
    assert not TalkListing.objects.filter(user_id=BOB).exists()  # Bob reaches the room through join
    # A talk session is never an inventory row.
    assert not InventoryMailbox.objects.filter(mailbox_id=data["talkSessionId"]).exists()


def test_create_readies_the_talk_session_in_the_same_transaction(room_tree, org, monkeypatch):
    room_tree()
    from mailboxes import projects

    def broken(*args, **kwargs):
        raise RuntimeError("the talk session could not be written")

    monkeypatch.setattr(projects.TalkListing.objects, "create", broken)
    with pytest.raises(RuntimeError):
        do_create_project(org, owner=ALICE, title="Launch", ready_talk=True)
    assert not Project.objects.exists() and not Session.objects.filter(session_id__startswith="talk-").exists()


def test_a_row_written_outside_a_turn_gets_no_talk_session(room_tree, org):
    room_tree()
    project, talk = do_create_project(org, owner=ALICE, title="Quiet", members=[BOB])
    assert talk is None and not TalkListing.objects.filter(project=project).exists()


def test_list_and_show_are_for_members_only(room_tree, client, org, other_org):
    room_tree()
    do_create_project(org, owner=ALICE, title="Launch", project_id="launch", members=[BOB], ready_talk=True)
    do_create_project(org, owner=OUTSIDER, title="Secret", project_id="secret")
    do_create_project(other_org, owner=ALICE, title="Elsewhere", project_id="elsewhere")
    listed = client.get(f"/api/projects?userId={BOB}").json()["projects"]
    assert [p["id"] for p in listed] == ["launch"]
    assert "talkSessionId" not in listed[0]  # Bob has not joined yet
    assert [p["id"] for p in client.get(f"/api/projects?userId={ALICE}").json()["projects"]] == ["launch"]
    shown = client.get(f"/api/projects/launch?userId={ALICE}").json()
    assert shown["members"] == [ALICE, BOB] and shown["talkSessionId"].startswith("talk-")
    for url in (f"/api/projects/secret?userId={ALICE}", f"/api/projects/elsewhere?userId={ALICE}", "/api/projects/launch"):
        missing = client.get(url)
        assert missing.status_code == 404 and missing.json()["error"]["reason"] == "no-such-project"


def test_the_owner_adds_members(room_tree, client, org):
    room_tree()
    do_create_project(org, owner=ALICE, title="Launch", project_id="launch", members=[BOB], ready_talk=True)
    added = client.post("/api/projects/launch/members", {"userId": ALICE, "member": "u_carol"}, format="json")
    assert added.status_code == 201 and added.json()["members"] == [ALICE, BOB, "u_carol"]
    again = client.post("/api/projects/launch/members", {"userId": ALICE, "member": "u_carol"}, format="json")
    assert again.status_code == 201 and ProjectMember.objects.filter(user_id="u_carol").count() == 1
    by_member = client.post("/api/projects/launch/members", {"userId": BOB, "member": "u_dan"}, format="json")
    assert by_member.status_code == 403 and by_member.json()["error"]["reason"] == "not-project-owner"
    by_outsider = client.post("/api/projects/launch/members", {"userId": OUTSIDER, "member": "u_dan"}, format="json")
    assert by_outsider.status_code == 404 and by_outsider.json()["error"]["reason"] == "no-such-project"
    assert not ProjectMember.objects.filter(user_id="u_dan").exists()


def test_service_refusals(room_tree, org):
    room_tree()
    do_create_project(org, owner=ALICE, title="Launch", project_id="launch")
    for kwargs, reason in (
        ({"project_id": "launch"}, "project-exists"),
        ({"project_id": "Bad Id"}, "invalid-input"),
        ({"title": ""}, "invalid-input"),
    ):
        with pytest.raises(Refusal) as caught:
            do_create_project(org, **{"owner": ALICE, "title": "T", **kwargs})
        assert caught.value.reason == reason
    with pytest.raises(Refusal) as caught:
        do_add_project_member(org, "nowhere", user_id=BOB, by=ALICE)
    assert caught.value.reason == "no-such-project"


def test_bad_bodies_are_invalid_input(room_tree, client):
    room_tree()
    for body in (
        {"userId": ALICE},
        {"userId": ALICE, "title": "T", "colour": "red"},
        {"userId": ALICE, "title": "T", "id": "A B"},
    ):
        answer = client.post("/api/projects", body, format="json")
        assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input", body


def test_the_template_is_never_opened_and_never_listed(room_tree, client, org):
    room_tree(ROOM_TREE)
    assert current_roster().room_template().id == "eng.room"
    assert not Session.objects.filter(session_id="eng.room").exists()
    assert [m["id"] for m in client.get("/api/mailboxes").json()["mailboxes"]] == ["eng.standup"]


def test_the_schema_documents_projects_and_the_inventory_without_warnings(db, capsys):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("spectacular", stdout=out)
    err = capsys.readouterr().err
    for path in ("/api/projects:", "/api/projects/{project_id}:", "/api/projects/{project_id}/members:", "/api/mailboxes:"):
        assert path in out.getvalue(), path
    assert "/api/seats/{seat_id}/mailboxes:" in out.getvalue()
    assert "operationId" not in err and "Warning" not in err, err
