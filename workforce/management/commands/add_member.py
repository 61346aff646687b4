"""``manage.py add_member <user> --org ID [--create] [--move]``: let a user act in an
organization under ``WORKFORCE_AUTH=token``, with no admin form; exit 1 when refused."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from workforce.models import DEFAULT_ORG_ID
from workforce.services import MembershipRefused, do_add_member
from workforce.wire import check_arguments


class Command(BaseCommand):
    help = "Make a user a member of an organization (token authentication needs one)."

    def add_arguments(self, parser):
        parser.add_argument("user", help="The Django username.")
        parser.add_argument("--org", default=DEFAULT_ORG_ID, help=f"The organization's id (default: {DEFAULT_ORG_ID}).")
        parser.add_argument("--create", action="store_true", help="Create the user when there is none by that name.")
        parser.add_argument("--move", action="store_true", help="Move a user who is a member of another organization.")

    def handle(self, *args, user, org=DEFAULT_ORG_ID, create=False, move=False, **options):
        check_arguments(user=user, org=org)
        try:
            outcome = do_add_member(user, org, create_user=create, move=move)
        except MembershipRefused as exc:
            raise CommandError(str(exc)) from None
        if outcome.created_user:
            self.stdout.write(f"{outcome.username}: user created")
        if outcome.outcome == "added":
            self.stdout.write(f"{outcome.username}: added to {outcome.org_id}")
        elif outcome.outcome == "moved":
            self.stdout.write(f"{outcome.username}: moved from {outcome.previous_org} to {outcome.org_id}")
        else:
            self.stdout.write(f"{outcome.username}: already a member of {outcome.org_id}")
