"""``manage.py open_mailboxes [--root PATH] [--user ID] [--org ID] [--apply]``: open every
mailbox in the tree; one line per mailbox; exit 1 when the tree has errors or one is
refused. ``--apply`` gives an open mailbox whose file changed the file's members, charter
and description (docs/mailboxes.md "Changing an open mailbox")."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mailboxes.roster import TreeError, load_roster, set_current_roster
from mailboxes.services import APPLIED, OpenRefused, do_open_mailboxes
from workforce.models import DEFAULT_ORG_ID
from workforce.sessions import ensure_organization
from workforce.tree import WorkforceRootError
from workforce.wire import check_arguments


class Command(BaseCommand):
    help = "Open every mailbox declared in the workforce tree (idempotent)."

    def add_arguments(self, parser):
        parser.add_argument("--root", default=None, help="The workforce tree (default: WORKFORCE_ROOT).")
        parser.add_argument("--user", default=None, help="The owner of the sessions (default: WORKFORCE_OPEN_USER).")
        parser.add_argument("--org", default=DEFAULT_ORG_ID, help="The organization to open them in.")
        parser.add_argument(
            "--apply",
            action="store_true",
            help="Give an open mailbox whose MAILBOX.md changed the file's members, charter and description "
            "(its lines are kept; the change is recorded as a mailbox-applied item).",
        )

    def handle(self, *args, root=None, user=None, org=DEFAULT_ORG_ID, apply=False, **options):
        check_arguments(user=user, org=org)
        root = root or settings.WORKFORCE_ROOT
        user = user or settings.WORKFORCE_OPEN_USER
        try:
            roster = load_roster(root)
        except (TreeError, WorkforceRootError) as exc:
            raise CommandError(str(exc)) from None
        try:
            outcomes = do_open_mailboxes(
                ensure_organization(org), roster.mailboxes, user_id=user, template_ids=roster.template_ids, apply=apply
            )
        except OpenRefused as exc:
            for mailbox in roster.mailboxes:
                if mailbox.id == exc.mailbox_id:
                    self.stdout.write(f"{mailbox.id}: refused: {exc.occupant}")
            raise CommandError(f"refused to open {exc.mailbox_id}; nothing was opened") from None
        set_current_roster(roster)
        for outcome in outcomes:
            if outcome.outcome == APPLIED:
                self.stdout.write(f"{outcome.mailbox_id}: applied the file's {', '.join(outcome.drift)}")
                continue
            self.stdout.write(f"{outcome.mailbox_id}: {outcome.outcome}")
            if outcome.drift_warning:  # its file changed after it was opened
                self.stdout.write(f"warning: {outcome.drift_warning}")
        for template in roster.templates:
            self.stdout.write(f"{template.id or template.site}: template for {template.collection}, not opened")
