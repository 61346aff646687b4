"""``manage.py mcp [--token TOKEN | --user ID]``: the MCP server over stdio."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mail.mcp_server import build_server
from workforce.refusals import Refusal
from workforce.runtime import ensure_booted
from workforce.wire import check_arguments


class Command(BaseCommand):
    help = "Serve mail_send and the mailbox basics (post, read, fileTask, readBoard) as an MCP server over stdio."

    def add_arguments(self, parser):
        parser.add_argument(
            "--token", default=None, help="With WORKFORCE_AUTH=token: the user's API token (default WORKFORCE_MCP_TOKEN)."
        )
        parser.add_argument("--user", default=None, help="In development (WORKFORCE_AUTH=none): the user id to act as.")

    def handle(self, *args, **options):
        check_arguments(user=options["user"], token=options["token"])
        if options["token"] and settings.WORKFORCE_AUTH != "token":
            # In development a token would be ignored and the caller asked for a userId:
            # say what is wrong instead.
            raise CommandError("--token needs WORKFORCE_AUTH=token; in development (WORKFORCE_AUTH=none) use --user ID.")
        ensure_booted()
        try:
            server = build_server(token=options["token"] or settings.WORKFORCE_MCP_TOKEN, user_id=options["user"])
        except Refusal as refusal:
            raise CommandError(refusal.message) from refusal
        server.run("stdio")
