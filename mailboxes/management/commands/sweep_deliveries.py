"""``manage.py sweep_deliveries``: the older name of ``manage.py sweep --only deliveries``
(hand the cluster again every delivery a crashed worker or the broker dropped)."""

from __future__ import annotations

from workforce.management.commands.sweep import Command as SweepCommand


class Command(SweepCommand):
    help = "Re-enqueue deliveries whose claim lapsed or whose task was lost (sweep --only deliveries)."
    default_only = ["deliveries"]
