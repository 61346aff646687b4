"""Binding the roster: the closed list of keys and every refusal the spec names
(spec "Declaring a mailbox", "Holding a board", "Registering a kind of your own",
"A room per project", "Routing a mailbox")."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from mailboxes.binder import DECLARABLE_KEYS, MailboxKindSpec, RosterRefused, bind_roster
from mailboxes.reader import MailboxManifest
from mailboxes.roster import TreeError, load_roster, mailbox_kind_specs
from tests.conftest import mailbox_md
from workforce.models import Session

BUILTIN = {"mailbox": MailboxKindSpec("mailbox", builtin=True)}


def record(mailbox_id: str = "eng.standup", body: str = "The charter.", **declared) -> MailboxManifest:
    """A record as the loader hands it over; ``description`` and ``members`` filled in
    unless given (pass ``None`` to leave a key out)."""
    declared.setdefault("description", "A mailbox.")
    declared.setdefault("members", ["eng.lead", "eng.analyst"])
    return MailboxManifest(id=mailbox_id, declared={k: v for k, v in declared.items() if v is not None}, body=body)


def refused(*records: MailboxManifest, kinds=None) -> RosterRefused:
    with pytest.raises(RosterRefused) as caught:
        bind_roster(list(records), BUILTIN if kinds is None else kinds)
    return caught.value


def messages(exc: RosterRefused) -> list[str]:
    return [message for _, message in exc.problems]


# --- the closed list ---------------------------------------------------------------------


def test_the_eight_declarable_keys_are_the_closed_list():
    assert sorted(DECLARABLE_KEYS) == sorted(
        ["flow", "description", "members", "boards", "instructions", "routing", "boardActions", "mintFor"]
    )


def test_a_record_with_only_description_and_members_binds_on_the_builtin():
    roster = bind_roster([record()], BUILTIN)
    (mailbox,) = roster.mailboxes
    assert mailbox.id == "eng.standup"
    assert mailbox.kind == "mailbox"
    assert mailbox.members == ["eng.lead", "eng.analyst"]
    assert mailbox.charter == "The charter."
    assert mailbox.description == "A mailbox."
    assert mailbox.boards == []


def test_an_undeclared_key_is_refused_by_name():
    exc = refused(record(members=None, member=["eng.lead"]))
    (message,) = messages(exc)
    assert '"member"' in message
    assert "members" in message  # the declarable keys are listed, so the typo is visible
    assert exc.problems[0][0] == "eng.standup"


def test_member_instead_of_members_in_a_file_reads_and_is_refused_at_bind(make_tree):
    root = make_tree(
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": "---\ndescription: Daily status.\nmember: [eng.lead]\n---\n\nPost.\n",
        }
    )
    with pytest.raises(TreeError) as caught:
        load_roster(root)
    assert caught.value.load_errors == []  # the file itself read without complaint
    assert caught.value.refused is not None
    assert '"member"' in str(caught.value)
    assert "eng.standup" in str(caught.value)


def test_id_is_refused():
    (message,) = messages(refused(record(id="eng.other")))
    assert message.startswith("id:")


def test_system_is_refused():
    (message,) = messages(refused(record(system="You are a bot.")))
    assert message.startswith("system:")


def test_a_body_alongside_instructions_is_refused():
    (message,) = messages(refused(record(instructions="Be brief.", body="Post here.")))
    assert "instructions:" in message and "body" in message


def test_instructions_without_a_body_is_the_charter():
    (mailbox,) = bind_roster([record(instructions="Be brief.", body="\n")], BUILTIN).mailboxes
    assert mailbox.charter == "Be brief."


@pytest.mark.parametrize(
    "members",
    ["eng.lead", [42], [["eng.lead"]], [{"name": "eng.lead"}], ["Eng Lead"], ["a.b.c"], [None]],
    ids=["text", "number", "nested-list", "mapping", "not-a-name", "three-parts", "null"],
)
def test_members_not_a_list_of_names_is_refused(members):
    (message,) = messages(refused(record(members=members)))
    assert message.startswith("members:")
    assert "list of names" in message


@pytest.mark.parametrize("description", [42, ["a"], {"a": 1}, True])
def test_description_not_text_is_refused(description):
    (message,) = messages(refused(record(description=description)))
    assert message.startswith("description:")
    assert "text" in message


@pytest.mark.parametrize("flow", [42, "My Kind", "", ["mailbox"], "a.b"])
def test_flow_not_a_kind_name_is_refused(flow):
    (message,) = messages(refused(record(flow=flow)))
    assert message.startswith("flow:")
    assert "kind name" in message


def test_flow_naming_a_kind_not_registered_is_refused_by_name_never_falling_back():
    exc = refused(record(flow="my-mailbox"))
    (message,) = messages(exc)
    assert '"my-mailbox"' in message
    assert "not registered" in message


def test_flow_naming_a_registered_kind_runs_there():
    kinds = {**BUILTIN, "my-mailbox": MailboxKindSpec("my-mailbox")}
    (mailbox,) = bind_roster([record(flow="my-mailbox")], kinds).mailboxes
    assert mailbox.kind == "my-mailbox"


def test_the_registry_offers_the_builtin_kind(settings):
    settings.WORKFORCE_ROUTE_MODEL = ""
    specs = mailbox_kind_specs()
    assert specs["mailbox"].builtin is True
    assert specs["mailbox"].has_route is False


def test_the_builtin_kind_is_built_with_a_route_when_a_route_model_is_set(settings):
    # Every process serving it boots with route_by_purpose (workforce_project.boot).
    settings.WORKFORCE_ROUTE_MODEL = "embedded/lexical"
    assert mailbox_kind_specs()["mailbox"].has_route is True


def test_a_mailbox_id_declared_twice_is_refused():
    exc = refused(record("eng.standup"), record("eng.standup"))
    assert any("declared twice" in m and "eng.standup" in m for m in messages(exc))
    assert str(exc).startswith("refused 1 of 2 declarations")


# --- boards --------------------------------------------------------------------------------


def test_boards_bind_as_plain_local_names():
    (mailbox,) = bind_roster([record(boards=["followups", "b-2", "Triage_x"])], BUILTIN).mailboxes
    assert mailbox.boards == ["followups", "b-2", "Triage_x"]
    assert mailbox.board_id("followups") == "eng.standup.followups"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "two words",
        "tab\tname",
        "line\nbreak",
        "feature.triage",
        "a/b",
        "a*",
        "a[0]",
        "x]",
        "lock",
        "LOCK",
        "Lock",
        "__proto__",
        "prototype",
        "constructor",
        42,
        None,
    ],
)
def test_a_board_name_breaking_the_rule_is_refused(name):
    (message,) = messages(refused(record(boards=[name])))
    assert message.startswith("boards:")


def test_board_rule_messages_say_what_is_wrong():
    exc = refused(record(boards=["", "a b", "feature.triage", "lock", "__proto__"]))
    found = messages(exc)
    assert len(found) == 5
    assert "empty" in found[0]
    assert ". / * [ ]" in found[1] and ". / * [ ]" in found[2]
    assert '"lock"' in found[3]
    assert "__proto__" in found[4]


def test_a_board_declared_twice_is_refused():
    (message,) = messages(refused(record(boards=["followups", "followups"])))
    assert '"followups" is declared twice' in message


@pytest.mark.parametrize("boards", ["followups", {"followups": True}, 3])
def test_boards_not_a_list_is_refused(boards):
    (message,) = messages(refused(record(boards=boards)))
    assert message.startswith("boards:")
    assert "list of names" in message


def test_boards_on_a_kind_of_your_own_is_refused_by_name():
    kinds = {**BUILTIN, "my-mailbox": MailboxKindSpec("my-mailbox")}
    (message,) = messages(refused(record(flow="my-mailbox", boards=["followups"]), kinds=kinds))
    assert '"my-mailbox"' in message
    assert "cannot hold a board" in message


def test_board_actions_tool_name_clash_names_both_boards():
    # eng.feature-a's "work" and eng.feature's "a_work" both give eng_feature_a_work.
    exc = refused(record("eng.feature-a", boards=["work"], boardActions=True), record("eng.feature", boards=["a_work"]))
    (message,) = messages(exc)
    assert "eng.feature-a.work" in message and "eng.feature.a_work" in message
    assert "eng_feature_a_work" in message


def test_the_same_tool_names_without_board_actions_bind():
    roster = bind_roster([record("eng.feature-a", boards=["work"]), record("eng.feature", boards=["a_work"])], BUILTIN)
    assert len(roster.mailboxes) == 2


# --- routing ---------------------------------------------------------------------------


def test_routing_on_a_kind_built_without_a_route_is_refused_naming_the_kind():
    exc = refused(record(routing={"fallback": "eng.lead"}))
    (message,) = messages(exc)
    assert message.startswith("routing:")
    assert '"mailbox"' in message
    assert exc.problems[0][0] == "eng.standup"


def test_routing_on_a_kind_built_with_a_route_binds():
    kinds = {"mailbox": MailboxKindSpec("mailbox", builtin=True, has_route=True)}
    (mailbox,) = bind_roster([record(routing={"fallback": "eng.lead"})], kinds).mailboxes
    assert mailbox.routing == {"fallback": "eng.lead"}


# --- templates -----------------------------------------------------------------------------


def test_a_template_is_bound_as_a_template_and_never_as_a_mailbox():
    roster = bind_roster([record("eng.room", mintFor="projects", body="Plan the work."), record("eng.standup")], BUILTIN)
    assert [m.id for m in roster.mailboxes] == ["eng.standup"]
    (template,) = roster.templates
    assert template.id == "eng.room"
    assert template.collection == "projects"
    assert template.seats == ["eng.lead", "eng.analyst"]
    assert template.charter == "Plan the work."
    assert roster.mailbox("eng.room") is None


@pytest.mark.parametrize(
    "key,value", [("flow", "mailbox"), ("boards", ["followups"]), ("routing", {"fallback": "eng.lead"}), ("boardActions", True)]
)
def test_a_template_declaring_a_forbidden_key_is_refused(key, value):
    (message,) = messages(refused(record("eng.room", mintFor="projects", **{key: value})))
    assert message.startswith(f"{key}:")


def test_a_template_for_a_collection_other_than_projects_is_refused():
    (message,) = messages(refused(record("eng.room", mintFor="teams")))
    assert message.startswith("mintFor:")
    assert "projects" in message


def test_a_template_seat_listed_twice_is_refused():
    (message,) = messages(refused(record("eng.room", mintFor="projects", members=["eng.lead", "eng.lead"])))
    assert "twice" in message


def test_a_second_template_for_the_same_collection_is_refused():
    exc = refused(
        record("eng.room", mintFor="projects"),
        record("ops.room", mintFor="projects"),
    )
    (message,) = messages(exc)
    assert exc.problems[0][0] == "ops.room"
    assert "eng.room" in message and "projects" in message


# --- every problem at once -----------------------------------------------------------------


def test_every_problem_is_reported_at_once():
    exc = refused(
        record("eng.standup"),
        record("eng.bad", member=["eng.lead"], system="x"),
        record("eng.worse", description=42, boards=["a.b"]),
        record("eng.fine"),
    )
    text = str(exc)
    assert text.startswith("refused 2 of 4 declarations\n")
    assert {mailbox_id for mailbox_id, _ in exc.problems} == {"eng.bad", "eng.worse"}
    assert len(exc.problems) == 4
    assert '"member"' in text and "system:" in text and "description:" in text and "boards:" in text
    assert exc.total == 4


def test_nothing_is_opened_when_any_record_is_refused(make_tree, org):
    root = make_tree(
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status."),
            "teams/eng/mailboxes/bad/MAILBOX.md": mailbox_md("Bad.", boards="[lock]"),
            "teams/ops/mailboxes/oncall/MAILBOX.md": mailbox_md("On call.", member="[eng.lead]"),
        }
    )
    with pytest.raises(CommandError) as caught:
        call_command("open_mailboxes", root=str(root), user="u_owner")
    assert "refused 2 of 3 declarations" in str(caught.value)
    assert "eng.bad" in str(caught.value) and "ops.oncall" in str(caught.value)
    assert not Session.objects.exists()
