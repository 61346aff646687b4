"""The room template (spec "A room per project"): declared in ``org/resources/projects.yaml``
or a ``MAILBOX.md`` marked ``mintFor: projects``, refused at bind with the mailboxes, all
problems at once, each naming its site; never opened."""

from __future__ import annotations

import pytest
from django.core import checks
from django.core.management import call_command

from mailboxes.binder import MailboxKindSpec, RosterRefused, bind_roster
from mailboxes.roster import TreeError, load_roster
from mailboxes.templates import PROJECTS_FILE, ResourceDeclaration, read_org_resources
from tests.conftest import STANDARD_TREE, mailbox_md, write_tree
from tests.mailboxes.test_binder import BUILTIN, record

PLAIN = {"mailbox": MailboxKindSpec("mailbox", builtin=True, wakes_seats=False)}


def resource(declared) -> ResourceDeclaration:
    return ResourceDeclaration(PROJECTS_FILE, "projects", declared)


def refusal(*records, resources=(), kinds=None) -> RosterRefused:
    with pytest.raises(RosterRefused) as caught:
        bind_roster(list(records), BUILTIN if kinds is None else kinds, list(resources))
    return caught.value


def test_the_org_file_is_read_with_the_strict_loader(tmp_path):
    write_tree(tmp_path, {PROJECTS_FILE: "talk:\n  seats: [eng.lead, chief-of-staff]\n  charter: no\n"})
    (found,), errors = read_org_resources(tmp_path)
    assert errors == []
    assert found.declared == {"talk": {"seats": ["eng.lead", "chief-of-staff"], "charter": "no"}}  # "no" stays text


def test_a_duplicate_key_in_the_org_file_is_a_load_error_naming_the_file(tmp_path):
    write_tree(tmp_path, {PROJECTS_FILE: "talk:\n  seats: []\n  seats: [eng.lead]\n"})
    found, (error,) = read_org_resources(tmp_path)
    assert found == []
    assert error.path == PROJECTS_FILE and "duplicate key" in error.message and PROJECTS_FILE in error.message


def test_no_org_file_is_no_template_and_no_error(tmp_path):
    assert read_org_resources(tmp_path) == ([], [])


def test_the_org_file_binds_as_the_projects_template():
    roster = bind_roster(
        [record()], BUILTIN, [resource({"talk": {"seats": ["eng.lead", "chief-of-staff"], "charter": "Plan the work."}})]
    )
    template = roster.room_template()
    assert (template.seats, template.charter, template.site) == (["eng.lead", "chief-of-staff"], "Plan the work.", PROJECTS_FILE)
    assert [m.id for m in roster.mailboxes] == ["eng.standup"]


@pytest.mark.parametrize("seat", ["a.b.c", "Chief Of Staff", "eng.", ".lead", "eng.Lead"])
def test_a_seat_that_is_not_a_seat_id_is_refused_naming_it(seat):
    exc = refusal(record("eng.room", mintFor="projects", members=["eng.lead", seat]))
    ((site, message),) = exc.problems
    assert site == "eng.room"
    assert repr(seat) in message and "is not a seat id" in message
    exc = refusal(resources=[resource({"talk": {"seats": [seat], "charter": "x"}})])
    ((site, message),) = exc.problems
    assert site == PROJECTS_FILE and repr(seat) in message and "talk: seats:" in message


def test_an_org_seats_own_name_and_a_full_id_bind():
    roster = bind_roster([record("eng.room", mintFor="projects", members=["chief-of-staff", "ops.lead"])], BUILTIN)
    assert roster.room_template().seats == ["chief-of-staff", "ops.lead"]


def test_a_seat_listed_twice_in_the_org_file_is_refused():
    exc = refusal(resources=[resource({"talk": {"seats": ["eng.lead", "eng.lead"], "charter": "x"}})])
    ((site, message),) = exc.problems
    assert site == PROJECTS_FILE and '"eng.lead" is listed twice' in message


@pytest.mark.parametrize("value", [["projects"], "Big Projects", 3])
def test_mint_for_that_is_not_a_collection_name_is_refused(value):
    ((site, message),) = refusal(record("eng.room", mintFor=value)).problems
    assert site == "eng.room" and message.startswith("mintFor:") and "not a collection name" in message


def test_mint_for_naming_another_collection_is_refused():
    ((_, message),) = refusal(record("eng.room", mintFor="teams")).problems
    assert "'teams'" in message and "projects" in message


@pytest.mark.parametrize("key", ["flow", "boards", "routing", "boardActions"])
def test_the_org_file_declaring_a_forbidden_key_is_refused(key):
    ((site, message),) = refusal(resources=[resource({"talk": {"seats": [], "charter": "x", key: "y"}})]).problems
    assert site == PROJECTS_FILE and f"{key}:" in message and "holds no board" in message


def test_seats_on_a_kind_that_cannot_wake_them_are_refused_in_both_homes():
    exc = refusal(
        record("eng.room", mintFor="projects"),
        kinds=PLAIN,
    )
    ((_, message),) = exc.problems
    assert "cannot wake them" in message
    exc = refusal(resources=[resource({"talk": {"seats": ["eng.lead"], "charter": "x"}})], kinds=PLAIN)
    assert "cannot wake them" in exc.problems[0][1]
    # A template with no seats needs no wake.
    assert bind_roster([], PLAIN, [resource({"talk": {"seats": [], "charter": "x"}})]).room_template().seats == []


def test_the_org_file_and_a_mailbox_md_are_two_templates_naming_both_sites():
    exc = refusal(
        record("eng.room", mintFor="projects"),
        resources=[resource({"talk": {"seats": ["eng.lead"], "charter": "x"}})],
    )
    ((site, message),) = exc.problems
    assert site == "eng.room"
    assert PROJECTS_FILE in message and "teams/eng/mailboxes/room/MAILBOX.md" in message and "second template" in message


def test_every_problem_is_reported_at_once_as_declarations():
    exc = refusal(
        record("eng.standup"),
        record("eng.room", mintFor="projects", members=["a.b.c"], boards=["x"]),
        record("ops.bad", member=["x"]),
        resources=[resource({"talk": {"seats": ["Chief Of Staff"], "charter": 1}})],
    )
    text = str(exc)
    assert text.startswith("refused 3 of 4 declarations\n")
    assert f"  {PROJECTS_FILE}: " in text
    assert (
        "  teams/eng/mailboxes/room/MAILBOX.md: eng.room: " in text and "  teams/ops/mailboxes/bad/MAILBOX.md: ops.bad: " in text
    )
    assert "'a.b.c'" in text and "boards:" in text and "'Chief Of Staff'" in text and "charter:" in text


def test_manage_py_check_reports_template_problems_like_every_tree_problem(tmp_path, settings, db):
    files = dict(STANDARD_TREE)
    files["teams/eng/mailboxes/room/MAILBOX.md"] = mailbox_md("The room.", members=("eng.lead", "eng.lead"), mintFor="projects")
    files[PROJECTS_FILE] = "talk:\n  seats: [a.b.c]\n  charter: Plan.\n"
    settings.WORKFORCE_ROOT = str(write_tree(tmp_path, files))
    errors = [e for e in checks.run_checks(tags=["workforce"]) if e.level >= checks.ERROR]
    (error,) = [e for e in errors if e.id == "workforce.E002"]
    assert "refused 2 of 4 declarations" in error.msg
    assert "'a.b.c' is not a seat id" in error.msg and '"eng.lead" is listed twice' in error.msg
    with pytest.raises(Exception) as caught:
        call_command("check")
    assert "a.b.c" in str(caught.value)


def test_a_bad_org_file_stops_the_tree_with_its_load_error(tmp_path):
    root = write_tree(tmp_path, {PROJECTS_FILE: "talk: [\n"})
    with pytest.raises(TreeError) as caught:
        load_roster(root)
    assert PROJECTS_FILE in str(caught.value)
