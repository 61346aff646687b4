"""``manage.py sweep``: run every registered sweep once, by hand (the task cluster's
workers run them on their own every ``WORKFORCE_SWEEP_SECONDS``; ``workforce.sweepers``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from workforce.runtime import ensure_booted
from workforce.sweepers import registered_sweeps, run_sweep


def describe(result: Any) -> str:
    """One line for what a sweep returned: ``nothing to do``, ``requeued [3], abandoned []``
    for a dataclass or a dict of lists, ``2: [4, 7]`` for a list."""
    if not result:
        return "nothing to do"
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    if isinstance(result, dict):
        return ", ".join(f"{key} {value}" for key, value in result.items())
    if isinstance(result, (list, tuple)):
        return f"{len(result)}: {list(result)}"
    return str(result)


class Command(BaseCommand):
    help = "Run every registered sweep once: re-enqueue the work a crashed worker or the broker dropped."

    #: The sweeps to run when ``--only`` is not given (None: every registered one).
    default_only: list[str] | None = None

    def add_arguments(self, parser):
        parser.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help="run only this sweep (repeatable); the names are listed by --list",
        )
        parser.add_argument("--list", action="store_true", help="print the registered sweeps' names and exit")

    def handle(self, *args, **options):
        sweeps = list(registered_sweeps())
        if options["list"]:
            for name in sweeps:
                self.stdout.write(name)
            return
        only = options["only"] or self.default_only
        unknown = [name for name in only or () if name not in sweeps]
        if unknown:
            raise CommandError(f"no sweep named {', '.join(unknown)}; the sweeps are: {', '.join(sweeps)}")
        # The process is booted the way a cluster worker is: some sweeps read what boot
        # configures (the hired seats' board drains).
        try:
            ensure_booted()
        except DatabaseError:
            raise  # manage.py says in one line what is wrong with the database
        except Exception as exc:
            raise CommandError(f"booting failed: {exc}") from exc
        failed = []
        for name in [name for name in sweeps if not only or name in only]:
            try:
                result = run_sweep(name)
            except Exception as exc:
                failed.append(name)
                self.stderr.write(f"{name}: failed: {exc.__class__.__name__}: {exc}")
                continue
            self.stdout.write(f"{name}: {describe(result)}")
        if failed:
            raise CommandError(f"{len(failed)} sweep(s) failed: {', '.join(failed)}")
