"""``manage.py check`` validates the workforce tree, so a bad tree stops the server at
start-up with every problem named at once (spec "Treat a non-empty errors as fatal")."""

from __future__ import annotations

from django.conf import settings
from django.core import checks

from seats.drains import board_problems
from seats.models import Seat
from seats.workers import read_workforce
from workforce.tree import WorkforceRootError

from .binder import mailbox_file
from .roster import TreeError, load_roster

# The board warnings ``serve`` prints after hiring (it silences these ids in its own check).
BOARD_CHECK_IDS = {
    "unknown-board-drain": "mailboxes.W001",
    "unknown-board-tools": "mailboxes.W002",
    "unattended-board": "mailboxes.W003",
}


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


@checks.register("workforce")
def check_route_model(app_configs=None, **kwargs):
    """``WORKFORCE_ROUTE_MODEL`` must be a model id an evaluation model can be made of
    (``embedded/lexical``, ``openai/<name>``, ...), or empty (no route)."""
    from workforce.llm import evaluation_model_problem

    model = settings.WORKFORCE_ROUTE_MODEL
    problem = evaluation_model_problem(model) if model else None
    if problem:
        return [checks.Error(f"WORKFORCE_ROUTE_MODEL: {problem}", id="workforce.E003")]
    return []


@checks.register("workforce")
def check_boards(app_configs=None, **kwargs):
    """The board problems hiring warns about (spec "Working the rows"), as warnings: a
    drain (or ``boardTools:``) of a board no mailbox holds, and a held board no worker
    drains. Nothing is refused; a tree that doesn't load is the other checks' errors."""
    root = settings.WORKFORCE_ROOT
    try:
        roster = load_roster(root)
        workers, _ = read_workforce(root)
    except (WorkforceRootError, TreeError):
        return []
    held = [m.board_id(b) for m in roster.mailboxes for b in m.boards]
    seats = [Seat(seat_id=w.id, scope=Seat.Scope.SHARED, kind=w.flow, config=w.config) for w in workers]
    return [checks.Warning(warning.message, id=BOARD_CHECK_IDS[warning.code]) for warning in board_problems(seats, held)]


@checks.register("workforce")
def check_routed_members(app_configs=None, **kwargs):
    """A member of a mailbox that declares ``routing:`` whose ``WORKER.md`` has no
    ``description:`` is never chosen by the route (it picks among the members'
    descriptions), silently: a warning per such member, naming both files. Says nothing
    when the tree does not load (the other checks' errors)."""
    root = settings.WORKFORCE_ROOT
    try:
        roster = load_roster(root)
        workers, _ = read_workforce(root)
    except (WorkforceRootError, TreeError):
        return []
    by_id = {w.id: w for w in workers}
    warnings = []
    for mailbox in roster.mailboxes:
        if mailbox.routing is None:
            continue
        for member in mailbox.members:
            worker = by_id.get(member)
            if worker is None or worker.description.strip():
                continue
            warnings.append(
                checks.Warning(
                    f"{mailbox_file(mailbox.id)}: {mailbox.id} routes each post to one member (routing:), but its "
                    f"member {member} has no description: in {worker.path}/WORKER.md, so the route never chooses it.",
                    hint=f"Add a description: line to {worker.path}/WORKER.md saying what {member} answers.",
                    id="mailboxes.W004",
                )
            )
    return warnings
