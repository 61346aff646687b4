"""``manage.py find_pre_rename_marks [--mailbox ID …] [--org ID …]``: print what is left
from before channels were renamed; exit 1 when anything is found."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from mailboxes.prerename import describe_pre_rename_marks, find_pre_rename_marks
from workforce.wire import check_arguments


class Command(BaseCommand):
    help = "List sessions, transcripts and inventories left from before channels were renamed to mailboxes."

    def add_arguments(self, parser):
        parser.add_argument("--mailbox", action="append", default=[], help="A mailbox id whose transcript is checked.")
        parser.add_argument("--org", action="append", default=[], help="An organization whose inventory is checked.")

    def handle(self, *args, mailbox=(), org=(), **options):
        check_arguments(mailbox=mailbox, org=org)
        marks = find_pre_rename_marks(mailbox_ids=mailbox, org_ids=org)
        for session in marks["sessions"]:
            self.stdout.write(f"session {session['id']} ({session['organization']}): {session['reason']}")
        for organization in marks["organizations"]:
            self.stdout.write(f"organization {organization['id']}: {organization['reason']}")
        if marks["sessions"] or marks["organizations"]:
            raise CommandError(f"This store was {describe_pre_rename_marks(marks)}. Start from an empty store.")
        self.stdout.write("nothing from before the rename")
