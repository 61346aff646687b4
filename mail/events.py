"""The vault tells the office (spec "How mail becomes work": "The vault's issue webhook
tells the office, which queues a mail run"): the one handler of every change a mail
backend reports, the embedded vault's and a forge webhook's alike."""

from __future__ import annotations

import logging

from django.db import transaction

from workforce.sessions import ensure_organization

from .constants import LABEL_NEW
from .index import UNKNOWN_SENDER, index_issue
from .models import Message, Thread
from .runs import admit_mail_run
from .store import StoreEvent

logger = logging.getLogger(__name__)


def do_handle_store_event(event: StoreEvent) -> None:
    """Index the issue the event carries and, for an issue opened with ``mail:new`` (in
    its labels now or in ``extra["openedLabels"]``, those a forge's hook says it was
    opened with),
    admit its run (``mail.runs.admit_mail_run``: once per mail, so an event told twice
    starts one run). A mail opened without ``mail:new`` (past the loop guard) is indexed
    and starts nothing.

    An issue the backend says the office did not create (``Issue.by_office`` False: a
    hand-made commit on a vault) is no mail (spec "Where mail lives": a mail is an issue
    "created by the office", whose header "the sender can't" spoof): it is logged and
    neither indexed nor run, so its header names no sender. The spec names no ledger
    event for it, so none is written. When the index already holds that issue (a mail
    the office sent, whose body a hand-made commit changed since), its thread is marked
    ``edited``.

    A mail whose sender the office has no record of (``mail.index``: no row, no ledger
    entry and no valid seal, so its sender is ``unknown``) is indexed and starts no run:
    its header is trusted for nothing."""
    if not event.issue.by_office:
        logger.warning(
            "%s:%s was not created by the office: it is not mail, and is neither indexed nor run",
            event.vault,
            event.issue.number,
        )
        with transaction.atomic():
            threads = Thread.objects.filter(organization_id=event.org_id, recipient=event.vault, number=event.issue.number)
            if threads.filter(edited=False).update(edited=True):
                Message.objects.filter(thread__in=threads, position=0).update(edited=True)
        return
    org = ensure_organization(event.org_id)
    with transaction.atomic():
        thread = index_issue(org, event.vault, event.issue)
        opened_with = {*event.issue.labels, *event.extra.get("openedLabels", ())}
        if event.action == "opened" and LABEL_NEW in opened_with:
            if thread.sender == UNKNOWN_SENDER:
                logger.warning("%s names no sender the office recorded: it starts no run", thread.thread_id)
                return
            admit_mail_run(thread)


def tell_office_safely(event: StoreEvent) -> None:
    """``do_handle_store_event``, logging what fails instead of raising: it runs after
    the writer's commit, and the mail sweep admits what it missed."""
    try:
        do_handle_store_event(event)
    except Exception:
        logger.exception("the office could not take in %s on %s:%s", event.action, event.vault, event.issue.number)
