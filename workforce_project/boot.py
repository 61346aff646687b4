"""The composition root: what ``serve`` (and the cluster it starts) does before it takes
requests. Only this project package imports every app; the apps reach each other at run
time through the flow registry (design.md §2)."""
from __future__ import annotations

from pathlib import Path

from django.conf import settings

from mailboxes.binder import Roster
from mailboxes.roster import load_roster, set_current_roster
from mailboxes.services import OpenOutcome, do_open_mailboxes
from workforce.models import DEFAULT_ORG_ID
from workforce.sessions import ensure_organization


def boot(root: str | Path | None = None) -> Roster:
    """Read and bind the workforce tree at ``root`` (default ``WORKFORCE_ROOT``) and make
    it the roster this process serves. Opens nothing.

    Raises:
        mailboxes.roster.TreeError: the tree has errors or a record was refused.
        workforce.loader.WorkforceRootError: the root is unreadable or a symlink.
    """
    roster = load_roster(root or settings.WORKFORCE_ROOT)
    set_current_roster(roster)
    return roster


def open_roster(roster: Roster, *, org_id: str = DEFAULT_ORG_ID, user_id: str | None = None) -> list[OpenOutcome]:
    """Open the roster's mailboxes in ``org_id`` as ``user_id`` (default
    ``WORKFORCE_OPEN_USER``). Raises ``mailboxes.services.OpenRefused``."""
    return do_open_mailboxes(
        ensure_organization(org_id), roster.mailboxes, user_id=user_id or settings.WORKFORCE_OPEN_USER
    )
