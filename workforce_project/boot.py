"""The composition root: what ``serve`` (and the cluster it starts) does before it takes
requests. Only this project package imports every app; the apps reach each other at run
time through the flow registry (docs/architecture.md "Layers")."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from coordinators.config import configure_from_settings as configure_coordinator_from_settings
from coordinators.services import ensure_sweep_schedule as ensure_coordinator_sweep
from mailboxes.binder import Roster
from mailboxes.notify import configure_notify, wake_member_seats
from mailboxes.roster import load_roster, set_current_roster
from mailboxes.routing import configure_route, route_by_purpose
from mailboxes.services import OpenOutcome, do_open_mailboxes
from seats.drains import configure_board_drains
from seats.hiring import do_hire_tree_workers, seats_to_wake
from workforce.models import DEFAULT_ORG_ID
from workforce.runtime import mark_booted
from workforce.sessions import ensure_organization

MAILBOX_KIND = "mailbox"


def boot(root: str | Path | None = None, *, log_board_warnings: bool = True) -> Roster:
    """Read the workforce tree at ``root`` (default ``WORKFORCE_ROOT``), hire its workers,
    give the built-in mailbox kind a notify block that wakes them and a route
    (``route_by_purpose`` with ``WORKFORCE_ROUTE_MODEL``; none when that is empty), then
    bind the mailboxes and make them the roster this process serves. Opens no mailbox.

    Hiring comes first and the notify block is in place before the roster is bound
    (spec "Waking agent seats": "hire first: the wake reaches these seats"). Hiring is
    idempotent, so every process (``serve`` and each cluster worker) boots the same way.
    Needs a migrated database. ``log_board_warnings=False`` keeps the board warnings
    (``seats.drains.board_warnings()``) without logging them.

    Raises:
        seats.hiring.WorkerTreeError: a worker failed to load or cannot be hired.
        mailboxes.roster.TreeError: the mailboxes have errors or a record was refused.
        workforce.tree.WorkforceRootError: the root is unreadable or a symlink.
    """
    root = root or settings.WORKFORCE_ROOT
    seats = seats_to_wake(do_hire_tree_workers(root))
    configure_notify(MAILBOX_KIND, wake_member_seats(seats))
    # The route (spec "Routing a mailbox"): built with the same seats, before binding,
    # so the binder accepts routing: and checks each fallback against those seats.
    route_model = settings.WORKFORCE_ROUTE_MODEL
    configure_route(MAILBOX_KIND, route_by_purpose(seats, model=route_model) if route_model else None)
    roster = load_roster(root)
    set_current_roster(roster)
    # Boards drained by seats (spec "Working the rows"): who drains what, a drain woken
    # per filed row, and the hire-time board warnings (logged; serve prints them).
    held_boards = [m.board_id(b) for m in roster.mailboxes for b in m.boards]
    configure_board_drains(MAILBOX_KIND, seats, held_boards, log=log_board_warnings)
    # Coordinators (spec 004 "Setting one up"): the flow's options from the settings
    # (delegate flows, route model, round deadline), and the sweep that recovers
    # dropped deliveries and deadlines (a django-q2 schedule, every minute).
    configure_coordinator_from_settings()
    ensure_coordinator_sweep()
    mark_booted()
    return roster


def boot_process() -> None:
    """``WORKFORCE_BOOT``: how a task-cluster worker boots itself on spawn (or on its
    first task), the same way ``serve`` booted the web process. Its board warnings are
    not logged again: ``serve`` and ``manage.py check`` report them."""
    boot(settings.WORKFORCE_ROOT, log_board_warnings=False)


def open_roster(roster: Roster, *, org_id: str = DEFAULT_ORG_ID, user_id: str | None = None) -> list[OpenOutcome]:
    """Open the roster's mailboxes in ``org_id`` as ``user_id`` (default
    ``WORKFORCE_OPEN_USER``). Raises ``mailboxes.services.OpenRefused``."""
    return do_open_mailboxes(
        ensure_organization(org_id),
        roster.mailboxes,
        user_id=user_id or settings.WORKFORCE_OPEN_USER,
        template_ids=roster.template_ids,
    )
