"""``manage.py check`` validates the workforce tree, so a bad tree stops the server at
start-up with every problem named at once (design.md §5)."""
from __future__ import annotations

from django.conf import settings
from django.core import checks

from workforce.loader import WorkforceRootError

from .roster import TreeError, load_roster


@checks.register("workforce")
def check_workforce_tree(app_configs=None, **kwargs):
    root = settings.WORKFORCE_ROOT
    try:
        load_roster(root)
    except WorkforceRootError as exc:
        return [checks.Error(f"WORKFORCE_ROOT {root} cannot be read: {exc}", id="workforce.E001")]
    except TreeError as exc:
        return [checks.Error(str(exc), hint="Fix the files named above; nothing was opened.", id="workforce.E002")]
    return []
