"""What is left from before channels were renamed (spec "Upgrading from channels")."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from mailboxes.prerename import describe_pre_rename_marks, find_pre_rename_marks
from tests.conftest import OWNER
from workforce.models import Item, OrgRecord, Request, Session
from workforce.sessions import emit_item


def old_item(session: Session, component: str = "channel-post") -> Item:
    """An item a channel wrote, under a request of its own (as every old post was)."""
    request = Request.objects.create(
        organization_id=session.organization_id, session=session, action="post", user_id=OWNER, status="completed"
    )
    return emit_item(session, component, {"body": "from before"}, request=request)


def test_a_clean_store_has_no_marks(open_tree, act, org):
    open_tree()
    act("eng.standup", "post", {"body": "hi"})
    OrgRecord.objects.create(organization=org, key="inventory/mailboxes/eng.lounge", data={})
    marks = find_pre_rename_marks(mailbox_ids=["eng.standup", "eng.incidents"], org_ids=[org.id, "acme"])
    assert marks == {"sessions": [], "organizations": []}


def test_an_empty_store_has_no_marks(db):
    assert find_pre_rename_marks(mailbox_ids=["eng.standup"], org_ids=["default"]) == {"sessions": [], "organizations": []}


def test_a_session_on_the_old_channel_kind_is_found(org, other_org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="channel", user_id=OWNER)
    Session.objects.create(organization=other_org, session_id="ops.chat", flow_kind="channel", user_id=OWNER)
    marks = find_pre_rename_marks()  # every session on the old kind, listed or not
    assert sorted((s["id"], s["organization"]) for s in marks["sessions"]) == [("eng.standup", "default"), ("ops.chat", "acme")]
    assert all('"channel" kind' in s["reason"] for s in marks["sessions"])
    assert marks["organizations"] == []


def test_a_listed_mailbox_whose_recent_items_hold_channel_post_is_found(open_tree, act, org):
    open_tree()
    act("eng.standup", "post", {"body": "new"})
    old_item(Session.objects.get(session_id="eng.standup"))
    old_item(Session.objects.get(session_id="eng.incidents"), "channel-route")
    marks = find_pre_rename_marks(mailbox_ids=["eng.standup", "eng.incidents"])
    found = {s["id"]: s["reason"] for s in marks["sessions"]}
    assert set(found) == {"eng.standup", "eng.incidents"}
    assert "channel-post" in found["eng.standup"]
    assert "channel-route" in found["eng.incidents"]
    assert all(s["organization"] == "default" for s in marks["sessions"])


def test_an_unlisted_mailbox_is_not_checked(open_tree, org):
    open_tree()
    old_item(Session.objects.get(session_id="eng.standup"))
    assert find_pre_rename_marks(mailbox_ids=["eng.incidents"])["sessions"] == []


def test_old_items_outside_the_history_window_are_not_recent(open_tree, act, settings):
    settings.WORKFORCE_HISTORY_WINDOW = 3
    open_tree()
    old_item(Session.objects.get(session_id="eng.standup"))
    for n in range(3):
        act("eng.standup", "post", {"body": f"p{n}"})
    assert find_pre_rename_marks(mailbox_ids=["eng.standup"])["sessions"] == []


def test_an_org_holding_old_inventory_rows_is_found(org, other_org):
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.standup", data={})
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.incidents", data={})
    OrgRecord.objects.create(organization=other_org, key="inventory/channels/ops.chat", data={})
    marks = find_pre_rename_marks(org_ids=["default"])
    assert marks["sessions"] == []
    (found,) = marks["organizations"]
    assert found["id"] == "default"
    assert "inventory/channels/" in found["reason"] and "2" in found["reason"]
    assert sorted(o["id"] for o in find_pre_rename_marks(org_ids=["default", "acme"])["organizations"]) == ["acme", "default"]


def test_describe_names_every_mark(org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="channel", user_id=OWNER)
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.standup", data={})
    text = describe_pre_rename_marks(find_pre_rename_marks(org_ids=["default"]))
    assert "eng.standup" in text and "organization default" in text


def test_find_only_reads(org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="channel", user_id=OWNER)
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.standup", data={})
    before = (Session.objects.count(), OrgRecord.objects.count(), Request.objects.count(), Item.objects.count())
    find_pre_rename_marks(mailbox_ids=["eng.standup"], org_ids=["default"])
    assert (Session.objects.count(), OrgRecord.objects.count(), Request.objects.count(), Item.objects.count()) == before


def test_the_command_exits_0_on_a_clean_store(open_tree):
    open_tree()
    out = StringIO()
    call_command("find_pre_rename_marks", mailbox=["eng.standup"], org=["default"], stdout=out)
    assert "nothing from before the rename" in out.getvalue()


def test_the_command_exits_1_when_anything_is_found(org):
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.standup", data={})
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("find_pre_rename_marks", org=["default"], stdout=out)
    assert "Start from an empty store" in str(caught.value)
    assert out.getvalue().startswith("organization default: ")


def test_the_command_lists_each_old_session(org):
    Session.objects.create(organization=org, session_id="eng.standup", flow_kind="channel", user_id=OWNER)
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("find_pre_rename_marks", stdout=out)
    assert out.getvalue().splitlines()[0].startswith("session eng.standup (default): ")
