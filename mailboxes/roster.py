"""The bound tree this process serves: read once at start-up (spec "What mailboxes do
not do yet": no watching), and the registered mailbox kinds the binder checks against."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from workforce.facets import MAILBOX, NOTIFY, ROUTE
from workforce.flows import registry
from workforce.runtime import Slot
from workforce.tree import LoadError

from .binder import BUILTIN_KIND, MailboxKindSpec, Roster, RosterRefused, bind_roster
from .notify import WakeMemberSeats
from .reader import read_mailboxes_directory
from .templates import read_org_resources


class TreeError(Exception):
    """The workforce tree did not load or bind; the message names every problem."""

    def __init__(self, root: str, load_errors: list[LoadError], refused: RosterRefused | None = None):
        self.root = root
        self.load_errors = load_errors
        self.refused = refused
        lines = []
        if load_errors:
            lines.append(f"mailboxes: {len(load_errors)} mailbox(es) failed to load")
            lines.extend(f"  {e.path}: [{e.kind}] {e.message}" for e in load_errors)
        if refused is not None:
            lines.append(str(refused))
        super().__init__(f"workforce tree {root}:\n" + "\n".join(lines))


def mailbox_kind_specs() -> dict[str, MailboxKindSpec]:
    """Every registered kind that runs mailboxes (facet ``mailbox``), by name.

    A kind is built with a route when its ``route`` facet holds one (the composition
    root puts ``route_by_purpose(seats, ...)`` there at boot, and the binder then checks
    each fallback against those seats). The built-in kind also counts as built with a
    route whenever ``WORKFORCE_ROUTE_MODEL`` is set, because every process that serves
    it boots with one: that lets ``manage.py check`` and ``open_mailboxes``, which run
    before boot, bind a tree that declares ``routing:``. With ``WORKFORCE_ROUTE_MODEL``
    empty, ``routing:`` on the built-in kind is refused.
    """
    specs = {}
    for name in registry.kinds():
        flow = registry.get(name)
        if MAILBOX.get(flow):
            route = ROUTE.get(flow)
            planned = name == BUILTIN_KIND and bool(settings.WORKFORCE_ROUTE_MODEL)
            notify = NOTIFY.get(flow)
            specs[name] = MailboxKindSpec(
                kind=name,
                builtin=name == BUILTIN_KIND,
                has_route=route is not None or planned,
                fallback_problem=getattr(route, "fallback_problem", None),
                wakes_seats=isinstance(notify, WakeMemberSeats) or (notify is None and name == BUILTIN_KIND),
            )
    return specs


def load_roster(root: str | Path) -> Roster:
    """Read and bind the tree at ``root``.

    Raises:
        TreeError: any folder failed to load or any record was refused (all named).
        workforce.tree.WorkforceRootError: the root itself is unreadable or a symlink.
    """
    mailboxes, errors = read_mailboxes_directory(root)
    resources, resource_errors = read_org_resources(root)
    errors = sorted(errors + resource_errors, key=lambda error: (error.path, error.kind))
    try:
        roster = bind_roster(mailboxes, mailbox_kind_specs(), resources)
    except RosterRefused as refused:
        raise TreeError(str(root), errors, refused) from None
    if errors:
        raise TreeError(str(root), errors)
    return roster


def _load_current() -> Roster:
    return load_roster(settings.WORKFORCE_ROOT)


# The roster this process serves. Not a boot-filled slot: ``check`` and
# ``open_mailboxes`` bind the tree before (and without) booting.
ROSTER: Slot[Roster] = Slot("mailboxes.roster", load=_load_current)


def current_roster() -> Roster:
    """The roster this process serves, bound from ``WORKFORCE_ROOT`` on first use.

    Raises:
        TreeError: on that first use, the tree did not load or bind.
    """
    return ROSTER.get()


def set_current_roster(roster: Roster | None) -> None:
    """Replace the served roster (``serve`` after binding; tests). ``None`` re-reads
    ``WORKFORCE_ROOT`` on next use."""
    if roster is None:
        ROSTER.clear()
    else:
        ROSTER.set(roster)
