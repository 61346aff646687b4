"""``open_mailboxes --apply`` (issue 25 item 14): an edit to an open mailbox's file is
drift, shown and ignored, until the person applies it on purpose; then the mailbox gets
the file's members, charter and description, keeps its lines, and records the change as
one ``mailbox-applied`` item (never a line)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from mailboxes.models import InventoryMailbox, InventoryMembership, Line
from mailboxes.services import APPLIED_ITEM
from tests.conftest import MEMBER, OWNER, STANDARD_TREE, mailbox_md
from workforce.models import Item, Session

EDITED = {
    **STANDARD_TREE,
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
        "Where the team posts status, briefly.", members=("eng.newcomer", "eng.lead"), body="Three lines at most."
    ),
}
CHANGED = [
    "members (the file adds eng.newcomer; drops eng.analyst)",
    "charter (the file's body was rewritten)",
    'description (opened as "Where the engineering team posts daily status.", '
    'the file says "Where the team posts status, briefly.")',
]


def open_mailboxes(root, *extra: str) -> list[str]:
    out = StringIO()
    call_command("open_mailboxes", *extra, root=str(root), user=OWNER, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def standup_with_lines(make_tree, org, act):
    """The standard tree opened, and two lines on eng.standup (one by a member)."""
    open_mailboxes(make_tree())
    act("eng.standup", "post", {"body": "first"})
    act("eng.standup", "post", {"body": "second", "author": "eng.analyst"})
    return Session.objects.get(organization=org, session_id="eng.standup")


def lines(session) -> list[tuple[int, str, str | None]]:
    return list(Line.objects.filter(session=session).order_by("seq").values_list("seq", "body", "author"))


def test_without_apply_the_edit_is_shown_and_ignored(standup_with_lines, make_tree):
    before = Session.objects.get(pk=standup_with_lines.pk).state
    out = open_mailboxes(make_tree(EDITED))
    assert out[:2] == ["eng.incidents: already open", "eng.standup: already open"]
    assert out[2].startswith(
        f"warning: mailbox eng.standup's MAILBOX.md differs from what it was opened with: {', '.join(CHANGED)}."
    )
    assert "run `python manage.py open_mailboxes --apply`" in out[2]
    assert Session.objects.get(pk=standup_with_lines.pk).state == before
    assert not Item.objects.filter(component=APPLIED_ITEM).exists()


def test_apply_rewrites_members_charter_and_description_and_keeps_the_lines(standup_with_lines, make_tree, org, act):
    session = standup_with_lines
    kept = lines(session)
    assert [body for _, body, _ in kept] == ["first", "second"]
    route_ledger = {"mailboxRouteLedger": {"lines": []}}
    Session.objects.filter(pk=session.pk).update(state={**session.state, **route_ledger})  # other state is kept

    out = open_mailboxes(make_tree(EDITED), "--apply")

    assert out == ["eng.incidents: already open", f"eng.standup: applied the file's {', '.join(CHANGED)}"]
    session.refresh_from_db()
    assert session.state == {
        "members": ["eng.newcomer", "eng.lead"],
        "charter": "\nThree lines at most.\n",
        "description": "Where the team posts status, briefly.",
        **route_ledger,
    }
    assert lines(session) == kept  # every line kept, numbers and all
    (item,) = Item.objects.filter(session=session, component=APPLIED_ITEM)
    assert item.type == "component" and item.request is None
    assert item.data == {
        "changed": CHANGED,
        "before": {
            "members": ["eng.lead", "eng.analyst"],
            "charter": "\nPost what you finished.\n",
            "description": "Where the engineering team posts daily status.",
        },
        "after": {
            "members": ["eng.newcomer", "eng.lead"],
            "charter": "\nThree lines at most.\n",
            "description": "Where the team posts status, briefly.",
        },
        "appliedBy": OWNER,
        "appliedAt": item.data["appliedAt"],
    }
    assert isinstance(item.data["appliedAt"], int) and item.data["appliedAt"] > 0
    # The inventory follows: the dropped member's row goes, the new member's comes.
    assert set(
        InventoryMembership.objects.filter(organization=org, mailbox_id="eng.standup").values_list("seat_id", flat=True)
    ) == {
        "eng.newcomer",
        "eng.lead",
    }
    row = InventoryMailbox.objects.get(organization=org, mailbox_id="eng.standup")
    assert (row.members, row.description) == (["eng.newcomer", "eng.lead"], "Where the team posts status, briefly.")

    # The roster is the file's now: the new member may post, the dropped one may not.
    assert act("eng.standup", "post", {"body": "hello", "author": "eng.newcomer"}).status == "completed"
    refused = act("eng.standup", "post", {"body": "still here?", "author": "eng.analyst"}, user_id=MEMBER)
    assert (refused.status, refused.error["reason"]) == ("failed", "author-not-a-member")
    assert [body for _, body, _ in lines(session)] == ["first", "second", "hello"]


def test_apply_again_changes_nothing_and_records_nothing(standup_with_lines, make_tree):
    root = make_tree(EDITED)
    open_mailboxes(root, "--apply")
    state = Session.objects.get(pk=standup_with_lines.pk).state
    assert open_mailboxes(root, "--apply") == ["eng.incidents: already open", "eng.standup: already open"]
    assert Session.objects.get(pk=standup_with_lines.pk).state == state
    assert Item.objects.filter(component=APPLIED_ITEM).count() == 1


def test_apply_on_a_tree_that_opens_fresh_mailboxes_just_opens_them(make_tree, org):
    assert open_mailboxes(make_tree(), "--apply") == ["eng.incidents: opened", "eng.standup: opened"]
    assert not Item.objects.filter(component=APPLIED_ITEM).exists()
