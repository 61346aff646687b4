"""Opening mailboxes (spec "Opening it, and why an unopened id is not a mailbox",
"Which organization a mailbox runs in", "Upgrading from channels")."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from mailboxes.models import InventoryMailbox, InventoryMembership, Line
from mailboxes.roster import load_roster, set_current_roster
from mailboxes.services import OpenRefused, do_open_mailboxes
from tests.conftest import MEMBER, OWNER, STANDARD_TREE, mailbox_md
from workforce.models import Item, OrgRecord, Request, Session


def test_one_session_per_record_at_its_id_with_members_charter_and_description(open_tree, org):
    open_tree()
    sessions = {s.session_id: s for s in Session.objects.filter(organization=org)}
    assert set(sessions) == {"eng.standup", "eng.incidents"}
    standup = sessions["eng.standup"]
    assert standup.flow_kind == "mailbox"
    assert standup.user_id == OWNER
    assert standup.organization_id == org.id
    assert standup.state == {
        "members": ["eng.lead", "eng.analyst"],
        "charter": "\nPost what you finished.\n",  # the body below the frontmatter, verbatim
        "description": "Where the engineering team posts daily status.",
    }
    # boards are never stored on the mailbox: they come from the files on every bind.
    assert "boards" not in sessions["eng.incidents"].state
    # opening writes no request, no item and no line.
    assert not Request.objects.exists() and not Item.objects.exists() and not Line.objects.exists()


def test_opening_reports_opened_then_already_open(make_tree, org):
    roster = load_roster(make_tree())
    first = do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    assert sorted((o.mailbox_id, o.outcome) for o in first) == [("eng.incidents", "opened"), ("eng.standup", "opened")]
    second = do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    assert sorted((o.mailbox_id, o.outcome) for o in second) == [
        ("eng.incidents", "already open"),
        ("eng.standup", "already open"),
    ]
    assert Session.objects.count() == 2


def test_an_edit_to_members_or_charter_does_not_reach_an_open_mailbox(make_tree, org, act):
    do_open_mailboxes(org, load_roster(make_tree()).mailboxes, user_id=OWNER)
    edited = dict(STANDARD_TREE)
    edited["teams/eng/mailboxes/standup/MAILBOX.md"] = mailbox_md(
        "A new description.", members=("eng.lead", "eng.newcomer"), body="A new charter."
    )
    roster = load_roster(make_tree(edited))
    outcomes = do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    assert {o.mailbox_id: o.outcome for o in outcomes}["eng.standup"] == "already open"
    state = Session.objects.get(session_id="eng.standup").state
    assert state["members"] == ["eng.lead", "eng.analyst"]
    assert state["charter"] == "\nPost what you finished.\n"
    assert state["description"] == "Where the engineering team posts daily status."
    set_current_roster(roster)
    refused = act("eng.standup", "post", {"body": "hi", "author": "eng.newcomer"})
    assert refused.error["reason"] == "author-not-a-member"


def test_a_board_added_to_an_open_mailbox_file_is_held_at_the_next_bind(make_tree, org, act):
    do_open_mailboxes(org, load_roster(make_tree()).mailboxes, user_id=OWNER)
    edited = dict(STANDARD_TREE)
    edited["teams/eng/mailboxes/standup/MAILBOX.md"] = mailbox_md(
        "Where the engineering team posts daily status.", boards="[blockers]", body="Post what you finished."
    )
    roster = load_roster(make_tree(edited))
    do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    set_current_roster(roster)
    assert act("eng.standup", "read").output["boards"] == ["blockers"]


def test_an_empty_session_a_premature_post_created_is_adopted(make_tree, org, act):
    roster = load_roster(make_tree())
    set_current_roster(roster)
    premature = act("eng.standup", "post", {"body": "too early"})
    assert premature.status == "failed"
    assert premature.error["reason"] == "mailbox-not-bound"
    empty = Session.objects.get(session_id="eng.standup")
    assert empty.state == {}
    assert not Line.objects.exists()

    outcomes = do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    assert {o.mailbox_id: o.outcome for o in outcomes} == {"eng.standup": "adopted", "eng.incidents": "opened"}
    adopted = Session.objects.get(session_id="eng.standup")
    assert adopted.pk == empty.pk
    assert adopted.user_id == OWNER  # the opener owns it: every line's principal
    assert adopted.state["members"] == ["eng.lead", "eng.analyst"]

    posted = act("eng.standup", "post", {"body": "now", "author": "eng.lead"})
    assert posted.status == "completed"
    assert posted.output["body"] == "now"
    assert posted.output["principal"] == OWNER
    assert Line.objects.filter(session=adopted).count() == 1


def test_an_empty_session_of_the_opener_is_adopted(make_tree, org, act):
    roster = load_roster(make_tree())
    set_current_roster(roster)
    act("eng.standup", "post", {"body": "too early"}, user_id=OWNER)
    outcomes = do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    assert {o.mailbox_id: o.outcome for o in outcomes}["eng.standup"] == "adopted"


def _refusal(org, roster, user_id=OWNER) -> OpenRefused:
    with pytest.raises(OpenRefused) as caught:
        do_open_mailboxes(org, roster.mailboxes, user_id=user_id)
    return caught.value


def test_an_id_held_by_another_kind_is_refused_naming_the_occupant(make_tree, org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="agent", user_id=OWNER, state={"x": 1})
    exc = _refusal(org, load_roster(make_tree()))
    assert exc.mailbox_id == "eng.standup"
    assert '"eng.standup"' in exc.occupant and "agent" in exc.occupant
    assert "another flow" in exc.occupant
    assert "Rename the mailbox" in exc.occupant
    # all or nothing: the other mailbox was not opened either
    assert not Session.objects.filter(session_id="eng.incidents").exists()
    assert not OrgRecord.objects.exists()


def test_an_id_held_by_another_user_is_refused_naming_the_occupant(make_tree, org):
    roster = load_roster(make_tree())
    do_open_mailboxes(org, roster.mailboxes, user_id="u_someone")
    exc = _refusal(org, roster)
    assert "u_someone" in exc.occupant
    assert "another user" in exc.occupant


def test_an_id_holding_state_that_is_not_a_readable_mailbox_is_refused(make_tree, org):
    Session.objects.create(
        organization=org, session_id="eng.standup", flow_kind="mailbox", user_id=OWNER, state={"members": "eng.lead"}
    )
    exc = _refusal(org, load_roster(make_tree()))
    assert "not a readable mailbox" in exc.occupant
    assert Session.objects.get(session_id="eng.standup").state == {"members": "eng.lead"}


def test_an_id_held_on_the_old_channel_kind_tells_to_start_from_an_empty_store(make_tree, org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="channel", user_id=OWNER, state={})
    exc = _refusal(org, load_roster(make_tree()))
    assert "channel" in exc.occupant
    assert "start from an empty store" in exc.occupant
    assert Session.objects.get(session_id="eng.standup").flow_kind == "channel"


def test_each_opened_mailbox_gets_its_inventory_row(open_tree, org):
    open_tree()
    rows = {r.mailbox_id: r.as_wire() for r in InventoryMailbox.objects.filter(organization=org)}
    assert set(rows) == {"eng.standup", "eng.incidents"}
    assert rows["eng.standup"]["id"] == "eng.standup"
    assert rows["eng.standup"]["members"] == ["eng.lead", "eng.analyst"]
    # Real tables, not JSON under a key.
    assert not OrgRecord.objects.filter(organization=org).exists()


def test_a_template_is_never_opened_and_never_in_the_inventory(open_tree, org):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room every project gets.", mintFor="projects")
    open_tree(files)
    assert not Session.objects.filter(session_id="eng.room").exists()
    assert not OrgRecord.objects.filter(key__contains="eng.room").exists()
    assert not InventoryMailbox.objects.filter(mailbox_id="eng.room").exists()
    assert not InventoryMembership.objects.filter(mailbox_id="eng.room").exists()


def test_a_second_organization_gets_its_own_sessions(make_tree, org, other_org):
    roster = load_roster(make_tree())
    do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)
    outcomes = do_open_mailboxes(other_org, roster.mailboxes, user_id=OWNER)
    assert {o.outcome for o in outcomes} == {"opened"}
    assert Session.objects.filter(session_id="eng.standup").count() == 2
    assert Session.objects.get(organization=other_org, session_id="eng.standup").organization_id == "acme"
    assert InventoryMailbox.objects.filter(organization=other_org, mailbox_id="eng.standup").exists()


# --- the command ---------------------------------------------------------------------------


def test_the_command_prints_one_line_per_mailbox(make_tree, org):
    root = make_tree()
    out = StringIO()
    call_command("open_mailboxes", root=str(root), user=OWNER, stdout=out)
    assert sorted(out.getvalue().splitlines()) == ["eng.incidents: opened", "eng.standup: opened"]
    out = StringIO()
    call_command("open_mailboxes", root=str(root), user=OWNER, stdout=out)
    assert sorted(out.getvalue().splitlines()) == ["eng.incidents: already open", "eng.standup: already open"]
    assert Session.objects.get(session_id="eng.standup").user_id == OWNER


def test_the_command_names_a_template_it_does_not_open(make_tree, org):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room.", mintFor="projects")
    out = StringIO()
    call_command("open_mailboxes", root=str(make_tree(files)), user=OWNER, stdout=out)
    assert "eng.room: template for projects, not opened" in out.getvalue().splitlines()


def test_the_command_exits_1_on_tree_errors_naming_each(make_tree, org):
    root = make_tree(
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status."),
            "teams/eng/mailboxes/lounge/README.md": "no mailbox here\n",
            "teams/eng/mailboxes/Bad Name/MAILBOX.md": mailbox_md("Bad."),
        }
    )
    with pytest.raises(CommandError) as caught:
        call_command("open_mailboxes", root=str(root), user=OWNER, stdout=StringIO())
    assert "teams/eng/mailboxes/lounge" in str(caught.value)
    assert "Bad Name" in str(caught.value)
    assert not Session.objects.exists()


def test_the_command_exits_1_when_a_mailbox_is_refused_and_names_it(make_tree, org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="agent", user_id=OWNER, state={"x": 1})
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("open_mailboxes", root=str(make_tree()), user=OWNER, stdout=out)
    assert "eng.standup" in str(caught.value)
    assert out.getvalue().startswith("eng.standup: refused: ")
    assert not Session.objects.filter(session_id="eng.incidents").exists()


def test_the_command_exits_1_on_an_unreadable_root(tmp_path, org):
    with pytest.raises(CommandError):
        call_command("open_mailboxes", root=str(tmp_path / "missing"), user=OWNER, stdout=StringIO())


def test_the_command_opens_in_the_organization_it_is_given(make_tree, org):
    call_command("open_mailboxes", root=str(make_tree()), user=OWNER, org="acme", stdout=StringIO())
    assert set(Session.objects.values_list("organization_id", flat=True)) == {"acme"}


def test_a_member_posting_does_not_own_the_mailbox(open_tree, act):
    open_tree()
    line = act("eng.standup", "post", {"body": "hello"}, user_id=MEMBER).output
    assert line["principal"] == OWNER


def test_the_command_names_a_projects_yaml_template_by_its_file(make_tree, org):
    files = dict(STANDARD_TREE)
    files["org/resources/projects.yaml"] = "talk:\n  seats: [eng.lead]\n  charter: The project room.\n"
    out = StringIO()
    call_command("open_mailboxes", root=str(make_tree(files)), user=OWNER, stdout=out)
    assert "org/resources/projects.yaml: template for projects, not opened" in out.getvalue().splitlines()
