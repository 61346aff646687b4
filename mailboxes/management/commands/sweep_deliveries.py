"""``manage.py sweep_deliveries``: hand the cluster again every delivery a crashed worker
or the broker dropped (the cluster's workers also do this on their own)."""
from __future__ import annotations

from django.core.management.base import BaseCommand

from mailboxes.deliveries import do_sweep_deliveries


class Command(BaseCommand):
    help = "Re-enqueue deliveries whose claim lapsed or whose task was lost."

    def handle(self, *args, **options):
        result = do_sweep_deliveries()
        self.stdout.write(f"requeued {len(result.requeued)}, abandoned {len(result.abandoned)}")
