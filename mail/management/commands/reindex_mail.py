"""``manage.py reindex_mail``: rebuild the mail index from the vaults."""

from django.core.management.base import BaseCommand, CommandError

from mail.services import do_reindex_mail
from workforce.refusals import Refusal


class Command(BaseCommand):
    help = "Rebuild the office's index of mail from every vault (the mail lives on the vaults; the index is rebuilt)."

    def handle(self, *args, **options):
        try:
            done = do_reindex_mail()
        except Refusal as refusal:
            raise CommandError(refusal.message) from refusal
        self.stdout.write(f"reindexed {done.threads} thread(s), {done.messages} message(s) from {done.vaults} vault(s)")
