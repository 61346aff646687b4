"""The vault sweep: the vault tells the office what the office missed (spec "Where mail
lives": the mail is the issue; the office's index follows the vault).

A service writes the vault first and the index in a database transaction after it; the
vault tells the office of each commit once that transaction commits
(``mail.vault.VaultStore``). When the transaction fails after the vault was written (a
lost connection, a crash between the two), that event never comes, and the vault is
ahead of the index. This sweep, run with the mail sweep on every cluster worker
(``mail.sweeps``), reads each vault's history after the last commit it checked
(``VaultCursor``), and for every issue changed there whose index disagrees with the
vault (labels, state, texts) hands the issue to the office's one handler
(``mail.events.do_handle_store_event``), as the event would have: indexed again, and
for an issue opened with ``mail:new`` its run admitted (once per mail). Idempotent: an
issue that agrees is left alone, and running the sweep twice repairs nothing twice.

An issue whose text the index cannot keep (a NUL, a lone surrogate: ``workforce.wire``;
the office never writes one, but a hand-made commit or an older server could) is
recorded once, as a ``mail.unstorable`` ledger entry and an error in the log, and passed
over: the sweep reads the vault's other issues and moves its cursor on, so one bad
commit never blocks that vault's repair.

Commits younger than ``SETTLE_SECONDS`` are left to the next sweep: their writer may
still be telling the office itself. A backend whose server tells the office of its own
changes (a forge's webhook) has no history to read here: its sweep is
``mail.forge_repair``, which lists what changed since its last pass.
"""

from __future__ import annotations

import logging
import time

from workforce.refusals import Refusal
from workforce.runtime import Slot
from workforce.sessions import ensure_organization
from workforce.wire import check_storable

from .constants import MAIL_UNSTORABLE
from .events import do_handle_store_event
from .index import issue_agrees_with_record, state_of
from .ledger import OFFICE
from .models import LedgerEntry, Message, Thread, VaultCursor
from .store import Issue, MailStore, StoreError, StoreEvent, current_store

logger = logging.getLogger(__name__)

SETTLE_SECONDS = 30
# The action of an event this sweep re-tells for an issue opened before (an issue it
# finds opened is re-told as "opened", so its run is admitted).
SYNCED = "synced"


def index_agrees(org_id: str, vault: str, issue: Issue) -> bool:
    """True when the index holds ``issue`` as the vault does: its thread, labels and
    state, one message per text (the body and each comment), and a header and text
    that still are what the office recorded (else the office marks it edited)."""
    thread = Thread.objects.filter(organization_id=org_id, recipient=vault, number=issue.number).first()
    if thread is None or list(thread.labels) != list(issue.labels) or thread.state != state_of(issue):
        return False
    if not issue_agrees_with_record(thread, issue):
        return False
    positions = set(Message.objects.filter(thread=thread).values_list("position", flat=True))
    return positions == {0, *(c.id for c in issue.comments)}


def _passed_over_unstorable(org_id: str, vault: str, issue: Issue, commit: str) -> bool:
    """True when ``issue`` holds text the index cannot keep: recorded once per issue and
    commit (a ``mail.unstorable`` ledger entry keyed by both, and an error in the log the
    first time), so the sweep passes it over."""
    try:
        texts = {"title": issue.title, "body": issue.body, "labels": list(issue.labels)}
        check_storable({**texts, "comments": [c.body for c in issue.comments]}, label="the issue")
        return False
    except Refusal as refusal:
        problem = refusal.detail
    thread = f"{vault}:{issue.number}"
    _, created = LedgerEntry.objects.get_or_create(
        key=f"unstorable:{org_id}:{thread}:{commit}"[:300],
        defaults={
            "organization": ensure_organization(org_id),
            "event": MAIL_UNSTORABLE,
            "principal": OFFICE,
            "thread": thread,
            "data": {"commit": commit, "problem": problem},
        },
    )
    if created:
        logger.error("the vault sweep passed over %s in %s at commit %s: %s", thread, org_id, commit, problem)
    return True


def do_sweep_vaults(*, store: MailStore | None = None, now: float | None = None, unswept_only: bool = False) -> list[str]:
    """Tell the office of every issue a vault holds differently from the index (see the
    module docstring). ``now``: a Unix time (seconds; default the clock). Returns the
    threads repaired, ``<agent>:<number>``; a vault that cannot be read is logged and
    left for the next sweep, and a malformed issue (``StoreError``) is logged and
    skipped, the others read.

    ``unswept_only`` (``do_index_unswept_vaults``): only the vaults this database has no
    cursor for, read up to their newest commit (no settling time)."""
    store = store or current_store()
    changes_since = getattr(store, "changes_since", None)
    if changes_since is None:
        return []
    clock = time.time() if now is None else now
    settled_before = clock + 1 if unswept_only else clock - SETTLE_SECONDS
    repaired: list[str] = []
    for org_id, vault in store.list_vaults():
        cursor = VaultCursor.objects.filter(organization_id=org_id, vault=vault).first()
        if unswept_only and cursor is not None:
            continue
        try:
            changes = changes_since(org_id, vault, cursor.commit if cursor else None, settled_before=settled_before)
            if changes.commit is None or (cursor is not None and changes.commit == cursor.commit):
                continue
            # A vault read from its start: every issue at once, one reading of its tree
            # (an issue at a time would read the whole tree for each).
            read = {i.number: i for i in store.list_issues(org_id, vault)} if cursor is None else {}
            for number in changes.changed:
                try:
                    issue = read.get(number) or store.get_issue(org_id, vault, number)  # as the vault holds it now
                except StoreError:
                    # One malformed issue (a hand-made folder) is left; the rest are read.
                    logger.exception("the vault sweep could not read issue #%s of %s in %s", number, vault, org_id)
                    continue
                if _passed_over_unstorable(org_id, vault, issue, changes.commit):
                    continue
                if index_agrees(org_id, vault, issue):
                    continue
                action = "opened" if number in changes.opened else SYNCED
                # An issue the office did not create is logged there and not indexed.
                do_handle_store_event(StoreEvent(action=action, org_id=org_id, vault=vault, issue=issue, delivery=changes.commit))
                if issue.by_office:
                    repaired.append(f"{vault}:{number}")
        except Exception:
            # One vault that cannot be read or taken in is left for the next sweep; the
            # sweep goes on with the others.
            logger.exception("the vault sweep could not read %s in %s", vault, org_id)
            continue
        VaultCursor.objects.update_or_create(
            organization=ensure_organization(org_id), vault=vault, defaults={"commit": changes.commit}
        )
    if repaired:
        logger.warning("the vault sweep told the office of %s, which the index had missed", ", ".join(repaired))
    return repaired


def do_index_unswept_vaults(*, store: MailStore | None = None) -> list[str]:
    """Index now every vault under ``WORKFORCE_VAULT_DIR`` this database has never read
    (no ``VaultCursor``): a database started on vaults another database wrote (README:
    the second database indexes the same mail at its first start), or after the index
    was lost. Run by ``serve`` before it answers and by the web app's start
    (``workforce_project.asgi``), so a thread is there from the first request instead of
    after the periodic sweep and its settling time. Each vault's issues are told to the
    office as the sweep tells them (``do_sweep_vaults``; a ``mail:new`` one admits its
    run once); vaults already read are left to the sweep. Returns the threads indexed;
    one vault that cannot be read is logged and left for the sweep."""
    return do_sweep_vaults(store=store, unswept_only=True)


# Whether this process indexed the vaults it had never read (process state lives in the
# runtime's slots, never in a module global: workforce.runtime).
INDEXED_AT_START: Slot[bool] = Slot("mail.indexed-at-start", empty=lambda: False)


def index_unswept_vaults_once() -> list[str] | None:
    """``do_index_unswept_vaults``, once per process: ``serve`` calls it before it
    answers, and the web app's start (its ASGI lifespan) calls it again, which then does
    nothing. Returns what it indexed, or None when it had run already."""
    if INDEXED_AT_START.get():
        return None
    indexed = do_index_unswept_vaults()
    INDEXED_AT_START.set(True)
    return indexed


def do_pack_vaults(*, store: MailStore | None = None) -> dict[str, int]:
    """Pack every embedded vault that holds ``WORKFORCE_VAULT_PACK_LOOSE`` loose objects
    or more (``mail.vault.VaultStore.pack_vault``), run with the mail sweep. Returns
    ``{"<org>/<agent>": objects packed}`` for the vaults it packed; a backend with no
    loose objects (a forge) packs nothing, and a vault that cannot be packed is logged
    and left for the next sweep."""
    store = store or current_store()
    pack_vault = getattr(store, "pack_vault", None)
    if pack_vault is None:
        return {}
    packed: dict[str, int] = {}
    for org_id, vault in store.list_vaults():
        try:
            count = pack_vault(org_id, vault)
        except Exception:
            logger.exception("could not pack the vault %s in %s", vault, org_id)
            continue
        if count:
            packed[f"{org_id}/{vault}"] = count
    return packed
