"""Binding the roster (spec "Declaring a mailbox", "Holding a board", "Registering a
kind of your own", "A room per project"): the tree's records checked against the closed
list of keys and the registered mailbox kinds, every problem reported at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from boards.naming import RESERVED_BOARD_NAMES, board_id_for, board_name_problem, tool_suffix  # noqa: F401
from workforce.tree import NAME_RULE, did_you_mean, is_seat_id, name_problem

from .reader import MailboxManifest
from .templates import ResourceDeclaration

BUILTIN_KIND = "mailbox"
DECLARABLE_KEYS = ("flow", "description", "members", "boards", "instructions", "routing", "boardActions", "mintFor")
TEMPLATE_COLLECTIONS = ("projects",)
TEMPLATE_FORBIDDEN_KEYS = ("flow", "boards", "routing", "boardActions")


@dataclass(frozen=True)
class MailboxKindSpec:
    """What the binder needs to know of a registered mailbox kind."""

    kind: str
    builtin: bool = False
    has_route: bool = False
    # What the kind's route knows of the hired seats: why a member can't be a routed
    # mailbox's fallback (its seat can't hear a post), or None. Absent: not checked.
    fallback_problem: Callable[[str], str | None] | None = field(default=None, compare=False)
    # Whether a post can wake seats (a wake_member_seats notify block): a room template
    # naming seats needs it (spec "A room per project"). None: not checked.
    wakes_seats: bool | None = None


@dataclass
class BoundMailbox:
    """One mailbox record, bound: what ``open_mailboxes`` writes and the kind serves."""

    id: str
    kind: str
    description: str
    members: list[str]
    charter: str
    boards: list[str] = field(default_factory=list)
    board_actions: bool = False
    routing: dict | None = None
    declared: dict = field(default_factory=dict)

    def board_id(self, board: str) -> str:
        """The ledger id a board of this mailbox is minted under: ``<mailbox id>.<board>``."""
        return board_id_for(self.id, board)


@dataclass
class BoundTemplate:
    """A room template, never opened (spec "A room per project"): a ``mintFor:`` record
    (``id`` its mailbox id, ``site`` its ``MAILBOX.md``) or ``org/resources/projects.yaml``
    (``id`` empty, ``site`` the file). ``seats`` are who a post wakes, ``charter`` what
    they work under."""

    id: str
    collection: str
    seats: list[str]
    charter: str
    description: str
    site: str = ""


@dataclass
class Roster:
    """A bound tree: mailboxes to open and templates to build rooms from."""

    mailboxes: list[BoundMailbox] = field(default_factory=list)
    templates: list[BoundTemplate] = field(default_factory=list)

    def mailbox(self, mailbox_id: str) -> BoundMailbox | None:
        return next((m for m in self.mailboxes if m.id == mailbox_id), None)

    def template(self, template_id: str) -> BoundTemplate | None:
        """The ``mintFor:`` record at mailbox id ``template_id``, or None."""
        return next((t for t in self.templates if t.id and t.id == template_id), None)

    @property
    def template_ids(self) -> list[str]:
        """The mailbox ids of the ``mintFor:`` records (never opened, never listed)."""
        return [t.id for t in self.templates if t.id]

    def room_template(self, collection: str = "projects") -> BoundTemplate | None:
        """The template every room of ``collection`` is built from, or None."""
        return next((t for t in self.templates if t.collection == collection), None)


def mailbox_file(mailbox_id: str) -> str:
    """The file a mailbox id is declared in, relative to the tree's root:
    ``"eng.standup"`` -> ``"teams/eng/mailboxes/standup/MAILBOX.md"``."""
    team, _, name = mailbox_id.partition(".")
    return f"teams/{team}/mailboxes/{name}/MAILBOX.md"


class RosterRefused(Exception):
    """The roster was refused; ``problems`` lists ``(site, sentence)`` for every problem
    found, the site being a mailbox id or a resource file's path. The message reads
    ``refused N of M declarations`` and then one line per problem, naming its file
    (``  teams/eng/mailboxes/standup/MAILBOX.md: eng.standup: <sentence>``)."""

    def __init__(self, problems: list[tuple[str, str]], total: int):
        self.problems = problems
        self.total = total
        refused = len({mailbox_id for mailbox_id, _ in problems})
        lines = [f"  {_where(site)}: {message}" for site, message in problems]
        super().__init__(f"refused {refused} of {total} declarations\n" + "\n".join(lines))


def _where(site: str) -> str:
    """A problem's site as its line names it: a file's path as it is, a mailbox id with
    the file that declares it."""
    return site if "/" in site else f"{mailbox_file(site)}: {site}"


def bind_roster(
    mailboxes: Iterable[MailboxManifest],
    kinds: dict[str, MailboxKindSpec],
    resources: Iterable[ResourceDeclaration] = (),
) -> Roster:
    """Bind every record against the closed key list and the registered kinds, and the
    room template (spec "A room per project") from a ``mintFor:`` record or the
    organization's resource file.

    Args:
        mailboxes: records from ``read_mailboxes_directory``.
        kinds: the registered mailbox kinds by name (``"mailbox"`` is the built-in).
        resources: ``mailboxes.templates.read_org_resources`` (``org/resources/projects.yaml``).

    Returns:
        Roster with the mailboxes to open and the room templates.

    Raises:
        RosterRefused: any record was refused; nothing may be opened then.
    """
    records = list(mailboxes)
    resources = list(resources)
    problems: list[tuple[str, str]] = []
    roster = Roster()
    seen: set[str] = set()
    for resource in resources:
        found = _resource_problems(resource, kinds.get(BUILTIN_KIND))
        # (_resource_problems finds none only for a mapping with a talk: mapping.)
        if not found and isinstance(resource.declared, dict) and isinstance(talk := resource.declared.get("talk"), dict):
            roster.templates.append(
                BoundTemplate("", resource.collection, list(talk.get("seats", [])), talk.get("charter", ""), "", resource.site)
            )
        problems.extend((resource.site, message) for message in found)
    for record in records:
        found = []
        if record.id in seen:
            found.append(f'the mailbox id "{record.id}" is declared twice')
        seen.add(record.id)
        declared = record.declared
        for key in declared:
            if key == "id":
                found.append("id: is not declarable: a mailbox's id comes from its team and folder names")
            elif key == "system":
                found.append("system: is not declarable: the charter is the file's body (or instructions:)")
            elif key not in DECLARABLE_KEYS:
                found.append(
                    f'"{key}" is not a mailbox key{did_you_mean(key, DECLARABLE_KEYS)}; '
                    f"the declarable keys are {', '.join(DECLARABLE_KEYS)}"
                )
        description = declared.get("description")
        if not isinstance(description, str) or not description.strip():
            found.append("description: must be text")
            description = ""  # (nothing is bound: found holds a problem)
        instructions = declared.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            found.append("instructions: must be text")
        if "instructions" in declared and record.body.strip():
            found.append("a body and instructions: are both given; the charter is one or the other")
        members = declared.get("members", [])
        charter = instructions if isinstance(instructions, str) else record.body
        if "mintFor" in declared:
            template = declared["mintFor"]
            found.extend(_template_problems(declared, template))
            found.extend(_seat_problems("members:", members, kinds.get(BUILTIN_KIND)))
            first = next((t for t in roster.templates if t.collection == template), None)
            if first is not None:
                found.append(
                    f"mintFor: a second template for {template}: {_site(first)} already declares it, and so does "
                    f"{record.id} (teams/{record.id.replace('.', '/mailboxes/', 1)}/MAILBOX.md); a collection has one template"
                )
            if not found:
                roster.templates.append(
                    BoundTemplate(
                        record.id,
                        template,
                        list(members),
                        charter.strip(),  # the body, without the blank lines around it
                        description,
                        f"teams/{record.id.replace('.', '/mailboxes/', 1)}/MAILBOX.md",
                    )
                )
            problems.extend((record.id, message) for message in found)
            continue
        if not isinstance(members, list) or not all(isinstance(m, str) and is_seat_id(m) for m in members):
            found.append("members: must be a list of names (seat ids such as team.name)")
            members = []
        elif len(set(members)) != len(members):
            found.append("members: names a member twice")
        kind_name = declared.get("flow", BUILTIN_KIND)
        kind = None
        if not isinstance(kind_name, str) or name_problem(kind_name):
            found.append(f"flow: must be a kind name, and {kind_name!r} is not one")
        else:
            kind = kinds.get(kind_name)
            if kind is None:
                found.append(f'flow: names the kind "{kind_name}", which was not registered')
        boards = _bind_boards(declared, kind, found)
        board_actions = declared.get("boardActions", False)
        if not isinstance(board_actions, bool):
            found.append("boardActions: must be true or false")
            board_actions = False
        routing = _bind_routing(declared, members, kind, found)
        if not found and kind is not None:
            roster.mailboxes.append(
                BoundMailbox(
                    id=record.id,
                    kind=kind.kind,
                    description=description,
                    members=list(members),
                    charter=charter,
                    boards=boards,
                    board_actions=board_actions,
                    routing=routing,
                    declared=dict(declared),
                )
            )
        problems.extend((record.id, message) for message in found)
    problems.extend(_tool_name_clashes(roster.mailboxes))
    if problems:
        raise RosterRefused(problems, len(records) + len(resources))
    return roster


ROUTING_KEYS = ("fallback",)
ROUTING_RULE = "the fallback has to be a member whose hired seat can hear a post"


def _bind_routing(declared: dict, members: list, kind: MailboxKindSpec | None, found: list[str]) -> dict | None:
    """``routing:`` checked (spec "Routing a mailbox"): a mapping whose only key is
    ``fallback:``, naming a member whose hired seat can hear a post, on a kind built
    with a route. Appends every problem to ``found``; returns the bound routing."""
    if "routing" not in declared:
        return None
    routing = declared["routing"]
    if kind is not None and not kind.has_route:
        found.append(f'routing: needs a kind built with a route, and "{kind.kind}" has none')
    if not isinstance(routing, dict):
        found.append(
            f"routing: must be a mapping with fallback:, the member who takes a post the route can't place, not {routing!r}"
        )
        return None
    problems = len(found)
    for key in routing:
        if key not in ROUTING_KEYS:
            found.append(f'routing: "{key}" is not a routing key; the only key is fallback')
    fallback = routing.get("fallback")
    if "fallback" not in routing:
        found.append("routing: names no fallback:, the member who takes a post the route can't place")
    elif not isinstance(fallback, str) or not fallback.strip():
        found.append(f"routing: fallback: must name a member, not {fallback!r}")
    elif fallback not in members:
        found.append(f'routing: fallback "{fallback}" is not a member of this mailbox; {ROUTING_RULE}')
    elif kind is not None and kind.has_route and kind.fallback_problem is not None:
        problem = kind.fallback_problem(fallback)
        if problem:
            found.append(f"routing: {problem}")
    return {"fallback": fallback} if len(found) == problems else None


def _bind_boards(declared: dict, kind: MailboxKindSpec | None, found: list[str]) -> list[str]:
    if "boards" not in declared:
        return []
    boards = declared["boards"]
    if not isinstance(boards, list):
        found.append("boards: must be a list of names")
        return []
    if kind is not None and not kind.builtin:
        found.append(f'boards: a kind of your own ("{kind.kind}") cannot hold a board')
    names: list[str] = []
    for name in boards:
        problem = board_name_problem(name)
        if problem:
            found.append(f"boards: {problem}")
        elif name in names:
            found.append(f'boards: "{name}" is declared twice')
        else:
            names.append(name)
    return names


SEAT_ID_RULE = f"a seat is named by its full id, team.name, or by an organization-level seat's own name, each part {NAME_RULE}"


def _site(template: BoundTemplate) -> str:
    """Where a template is declared, for a message: ``eng.room (teams/eng/mailboxes/room/MAILBOX.md)``
    or ``org/resources/projects.yaml``."""
    return f"{template.id} ({template.site})" if template.id else template.site


def _seat_problems(label: str, seats: Any, kind: MailboxKindSpec | None) -> list[str]:
    """A template's seats checked (spec "A room per project"): a list of seat ids, none
    listed twice, and a kind that can wake them when there are any."""
    if not isinstance(seats, list):
        return [f"{label} must be a list of seat ids, not {seats!r}; {SEAT_ID_RULE}"]
    found = []
    for seat in seats:
        if not is_seat_id(seat):
            found.append(f"{label} {seat!r} is not a seat id; {SEAT_ID_RULE}")
    twice = sorted({s for s in seats if isinstance(s, str) and seats.count(s) > 1})
    for seat in twice:
        found.append(f'{label} "{seat}" is listed twice; a seat is woken once per post')
    if seats and kind is not None and kind.wakes_seats is False:
        found.append(
            f"{label} names seats, and the {kind.kind} kind cannot wake them: give it a notify block that wakes "
            "member seats (wake_member_seats), or no post would wake them"
        )
    return found


RESOURCE_KEYS = ("talk",)
TALK_KEYS = ("seats", "charter")


def _resource_problems(resource: ResourceDeclaration, kind: MailboxKindSpec | None) -> list[str]:
    """``org/resources/projects.yaml`` checked: ``{talk: {seats: [...], charter: "..."}}``."""
    declared = resource.declared
    if not isinstance(declared, dict):
        return [f"the file must be a mapping with talk: {{seats, charter}}, not {declared!r}"]
    found = [f'"{key}" is not a key of the projects collection; its one key is talk' for key in declared if key != "talk"]
    if "talk" not in declared:
        return found + ["talk: is missing: the room template, {seats, charter}"]
    talk = declared["talk"]
    if not isinstance(talk, dict):
        return found + [f"talk: must be a mapping with seats: and charter:, not {talk!r}"]
    for key in talk:
        if key in TEMPLATE_FORBIDDEN_KEYS:
            found.append(f"talk: {key}: a room template holds no board, routes no post and picks no kind")
        elif key not in TALK_KEYS:
            found.append(f'talk: "{key}" is not a template key; the keys are seats and charter')
    found.extend(_seat_problems("talk: seats:", talk.get("seats", []), kind))
    charter = talk.get("charter", "")
    if not isinstance(charter, str):
        found.append(f"talk: charter: must be text, not {charter!r}")
    return found


def _template_problems(declared: dict, collection: Any) -> list[str]:
    found = []
    if not isinstance(collection, str) or name_problem(collection):
        found.append(f"mintFor: must name a collection, such as projects, and {collection!r} is not a collection name")
    elif collection not in TEMPLATE_COLLECTIONS:
        found.append(f"mintFor: names {collection!r}, and the only collection a room template serves is projects")
    for key in TEMPLATE_FORBIDDEN_KEYS:
        if key in declared:
            found.append(f"{key}: a room template holds no board, routes no post and picks no kind")
    return found


def _tool_name_clashes(mailboxes: list[BoundMailbox]) -> list[tuple[str, str]]:
    by_suffix: dict[str, list[tuple[BoundMailbox, str]]] = {}
    for mailbox in mailboxes:
        for board in mailbox.boards:
            by_suffix.setdefault(tool_suffix(mailbox.board_id(board)), []).append((mailbox, board))
    problems = []
    for suffix, holders in by_suffix.items():
        if len(holders) > 1 and any(m.board_actions for m, _ in holders):
            names = " and ".join(m.board_id(b) for m, b in holders)
            problems.append((holders[0][0].id, f'boards {names} both give tool names ending "{suffix}"; rename one'))
    return problems
