"""The inventory (spec "What a mailbox is": the inventory row; "Upgrading from channels":
discover and the key prefix): real tables, written when mailboxes open, membership rows
first and the mailbox row last; templates retired and never listed."""

from __future__ import annotations

import pytest

from mailboxes import inventory
from mailboxes.inventory import do_register_inventory, list_mailboxes_tool
from mailboxes.models import InventoryMailbox, InventoryMembership, InventorySeat
from mailboxes.prerename import find_pre_rename_marks
from mailboxes.roster import load_roster
from mailboxes.services import do_open_mailboxes
from seats.agent import agent_tools
from seats.workers import read_workforce
from tests.conftest import OWNER, STANDARD_TREE, hire_tree, mailbox_md
from workforce.models import OrgRecord
from workforce.refusals import Refusal
from workforce.tools import ToolContext

WORKERS = {
    "teams/eng/workers/lead/WORKER.md": "---\ndescription: Leads.\ndiscover: [mailboxes]\n---\nLead.\n",
    "teams/eng/workers/analyst/WORKER.md": "---\ndescription: Analyses.\n---\nAnalyse.\n",
}


def tree(**extra) -> dict:
    return {**STANDARD_TREE, **WORKERS, **extra}


def test_rows_are_seat_mailbox_and_membership_tables(make_tree, open_tree, org):
    hire_tree(make_tree(tree()))
    open_tree(tree())
    mailbox = InventoryMailbox.objects.get(organization=org, mailbox_id="eng.standup").as_wire()
    assert set(mailbox) == {"id", "kind", "description", "members", "openedAt"}
    assert (mailbox["id"], mailbox["kind"], mailbox["members"]) == ("eng.standup", "mailbox", ["eng.lead", "eng.analyst"])
    assert isinstance(mailbox["openedAt"], int)
    assert InventorySeat.objects.get(organization=org, seat_id="eng.lead").as_wire() == {
        "id": "eng.lead",
        "kind": "agent",
        "hired": True,
    }
    pairs = set(InventoryMembership.objects.filter(organization=org).values_list("seat_id", "mailbox_id"))
    assert pairs == {(s, m) for s in ("eng.lead", "eng.analyst") for m in ("eng.standup", "eng.incidents")}
    assert not OrgRecord.objects.filter(organization=org).exists()


def test_an_unhired_member_is_a_row_that_is_not_hired(open_tree, org):
    open_tree()
    assert InventorySeat.objects.get(organization=org, seat_id="eng.analyst").as_wire() == {
        "id": "eng.analyst",
        "kind": None,
        "hired": False,
    }


def test_opened_at_is_set_on_create_only(make_tree, org):
    root = make_tree()
    do_open_mailboxes(org, load_roster(root).mailboxes, user_id=OWNER)
    first = InventoryMailbox.objects.get(mailbox_id="eng.standup").opened_at
    InventoryMailbox.objects.filter(mailbox_id="eng.standup").update(opened_at=1)
    do_open_mailboxes(org, load_roster(root).mailboxes, user_id=OWNER)
    assert InventoryMailbox.objects.get(mailbox_id="eng.standup").opened_at == 1 != first


def test_membership_rows_are_written_before_the_mailbox_row(open_tree, org, monkeypatch):
    order = []
    real_bulk = InventoryMembership.objects.bulk_create
    real_get = InventoryMailbox.objects.get_or_create
    monkeypatch.setattr(
        InventoryMembership.objects, "bulk_create", lambda *a, **k: order.append("memberships") or real_bulk(*a, **k)
    )
    monkeypatch.setattr(InventoryMailbox.objects, "get_or_create", lambda *a, **k: order.append("mailbox") or real_get(*a, **k))
    open_tree({"teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Status.")})
    assert order == ["memberships", "mailbox"]


def test_a_template_is_never_registered_and_an_old_row_is_retired(make_tree, open_tree, org, client):
    open_tree()  # eng.standup is a mailbox, and listed
    assert InventoryMailbox.objects.get(mailbox_id="eng.standup").retired_at is None
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/standup/MAILBOX.md"] = mailbox_md("Now the room.", mintFor="projects")
    roster = open_tree(files)
    assert roster.template_ids == ["eng.standup"]
    assert InventoryMailbox.objects.get(mailbox_id="eng.standup").retired_at is not None
    listed = client.get("/api/mailboxes").json()["mailboxes"]
    assert [m["id"] for m in listed] == ["eng.incidents"]
    assert [m["id"] for m in client.get("/api/seats/eng.lead/mailboxes").json()["mailboxes"]] == ["eng.incidents"]
    bound = roster.mailbox("eng.incidents")
    with pytest.raises(Refusal) as caught:
        do_register_inventory(
            org,
            bound.__class__(**{**bound.__dict__, "id": "eng.standup"}),
            members=[],
            description="",
            opened_by=OWNER,
            template_ids=roster.template_ids,
        )
    assert caught.value.reason == "mailbox-is-a-template"


def test_get_api_mailboxes_lists_the_organizations_mailboxes_paged(open_tree, org, other_org, client):
    open_tree()
    open_tree({"teams/ops/mailboxes/chat/MAILBOX.md": mailbox_md("Ops chat.")}, in_org=other_org)
    page = client.get("/api/mailboxes?limit=1").json()
    assert [m["id"] for m in page["mailboxes"]] == ["eng.incidents"] and page["next"] == "eng.incidents"
    page = client.get(f"/api/mailboxes?limit=1&after={page['next']}").json()
    assert [m["id"] for m in page["mailboxes"]] == ["eng.standup"] and page["next"] is None
    assert page["mailboxes"][0]["members"] == ["eng.lead", "eng.analyst"]
    assert page["mailboxes"][0]["description"] == "Where the engineering team posts daily status."


def test_get_a_seats_mailboxes(open_tree, org, client):
    open_tree()
    data = client.get("/api/seats/eng.lead/mailboxes").json()
    assert data["seat"] == {"id": "eng.lead", "kind": None, "hired": False}
    assert [m["id"] for m in data["mailboxes"]] == ["eng.incidents", "eng.standup"]
    missing = client.get("/api/seats/eng.nobody/mailboxes")
    assert missing.status_code == 404 and missing.json()["error"]["reason"] == "seat-not-found"


def test_discover_mailboxes_gives_the_seat_the_list_mailboxes_tool(make_tree, open_tree, org):
    seats = {s.seat_id: s for s in hire_tree(make_tree(tree()))}
    open_tree(tree())
    assert inventory.LIST_MAILBOXES in [t.name for t in agent_tools(seats["eng.lead"])]
    assert inventory.LIST_MAILBOXES not in [t.name for t in agent_tools(seats["eng.analyst"])]
    answer = list_mailboxes_tool(ToolContext(org=org, seat_id="eng.lead"), {})
    assert answer["ok"] is True
    assert answer["mailboxes"] == [
        {
            "id": "eng.incidents",
            "description": "Where the engineering team works incidents.",
            "members": ["eng.lead", "eng.analyst"],
        },
        {
            "id": "eng.standup",
            "description": "Where the engineering team posts daily status.",
            "members": ["eng.lead", "eng.analyst"],
        },
    ]
    assert list_mailboxes_tool(ToolContext(org=org, seat_id="eng.lead"), {"x": 1}) == {
        "refused": "invalid-input: list-mailboxes takes no input."
    }


@pytest.mark.parametrize(
    "value,words",
    [
        ("[channels]", "before mailboxes were renamed"),
        ("[boards]", "the one it can is mailboxes"),
        ("mailboxes", "must be a list"),
    ],
)
def test_discover_is_checked_when_the_worker_is_read(make_tree, value, words):
    root = make_tree({"teams/eng/workers/lead/WORKER.md": f"---\ndescription: Leads.\ndiscover: {value}\n---\nLead.\n"})
    workers, (error,) = read_workforce(root)
    assert workers == [] and words in error.message and "discover:" in error.message


def test_the_old_inventory_prefix_is_still_what_find_pre_rename_marks_reports(open_tree, org):
    open_tree()  # the new inventory writes no key at all
    assert find_pre_rename_marks(org_ids=[org.pk]) == {"sessions": [], "organizations": []}
    OrgRecord.objects.create(organization=org, key="inventory/channels/eng.standup", data={})
    (found,) = find_pre_rename_marks(org_ids=[org.pk])["organizations"]
    assert "inventory/channels/" in found["reason"]
