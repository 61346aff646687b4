"""An open mailbox keeps the members, charter and description it was opened with (spec
"Opening it"); when its MAILBOX.md has changed since, ``open_mailboxes`` (and ``serve``)
say so: a warning naming each difference and how to open a fresh mailbox."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from mailboxes.roster import load_roster
from mailboxes.services import do_open_mailboxes
from tests.conftest import OWNER, STANDARD_TREE, mailbox_md
from workforce.models import Session

ADVICE = (
    "An open mailbox keeps the members, charter and description it was opened with. To serve the file's, "
    "run `python manage.py open_mailboxes --apply` (its lines are kept; the change is recorded on it as a "
    "mailbox-applied item), or open a fresh mailbox: give it a new id (rename its folder; the old transcript "
    "stays under the old id)."
)


def edited(**kw) -> dict[str, str]:
    files = dict(STANDARD_TREE)
    keys = {
        "description": "Where the engineering team posts daily status.",
        "members": ("eng.lead", "eng.analyst"),
        "body": "Post what you finished.",
        **kw,
    }
    files["teams/eng/mailboxes/standup/MAILBOX.md"] = mailbox_md(keys["description"], members=keys["members"], body=keys["body"])
    return files


def test_an_unchanged_file_has_no_drift(make_tree, org):
    root = make_tree()
    do_open_mailboxes(org, load_roster(root).mailboxes, user_id=OWNER)
    again = do_open_mailboxes(org, load_roster(root).mailboxes, user_id=OWNER)
    assert sorted((o.mailbox_id, o.outcome, o.drift, o.drift_warning) for o in again) == [
        ("eng.incidents", "already open", (), None),
        ("eng.standup", "already open", (), None),
    ]


def test_each_difference_is_named_and_nothing_is_changed(make_tree, org):
    do_open_mailboxes(org, load_roster(make_tree()).mailboxes, user_id=OWNER)
    before = Session.objects.get(session_id="eng.standup").state
    roster = load_roster(
        make_tree(edited(description="A new description.", members=("eng.newcomer", "eng.lead"), body="A new charter."))
    )
    outcomes = {o.mailbox_id: o for o in do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)}
    assert outcomes["eng.standup"].drift == (
        "members (the file adds eng.newcomer; drops eng.analyst)",
        "charter (the file's body was rewritten)",
        'description (opened as "Where the engineering team posts daily status.", the file says "A new description.")',
    )
    assert outcomes["eng.incidents"].drift == ()
    assert Session.objects.get(session_id="eng.standup").state == before


def test_a_reordered_members_list_is_no_drift(make_tree, org):
    do_open_mailboxes(org, load_roster(make_tree()).mailboxes, user_id=OWNER)
    roster = load_roster(make_tree(edited(members=("eng.analyst", "eng.lead"))))
    assert {o.mailbox_id: o.drift for o in do_open_mailboxes(org, roster.mailboxes, user_id=OWNER)}["eng.standup"] == ()


def test_the_command_prints_a_warning_after_the_drifted_mailbox(make_tree, org):
    call_command("open_mailboxes", root=str(make_tree()), user=OWNER, stdout=StringIO())
    out = StringIO()
    call_command("open_mailboxes", root=str(make_tree(edited(members=("eng.lead",)))), user=OWNER, stdout=out)
    assert out.getvalue().splitlines() == [
        "eng.incidents: already open",
        "eng.standup: already open",
        f"warning: mailbox eng.standup's MAILBOX.md differs from what it was opened with: members (drops eng.analyst). {ADVICE}",
    ]
