"""A person's own roster (spec 004 "Who can be a delegate", "What it won't do"; spec 000
"Waking agent seats", "How a post finds its member").

A worker the tree declares is a *standard* worker (a shared seat): everyone reaches it
and nobody changes it while the server runs. A person can hire a worker of their own
from a ``WORKER.md`` text, fork a worker on their roster into one of their own, and fire
one of their own (``seats.services``). Each is a ``Seat`` row in scope ``own`` (the
person and the organization they act in), read from the database by every process on
its next turn: nothing is cached at boot. Which seat a person reaches for an id is the
one scope rule, ``seats.queries.reachable_seats``: their own, then their organization's,
then a standard one. Another user's worker is not on your roster; naming one gets the
same answer as an id nobody holds.

This module reads a hired ``WORKER.md`` text with the tree's own parser and checks
(``workforce.tree.split_frontmatter``, ``seats.workers.check_worker_declared``,
``seats.hiring.hire_problems``), and holds the roster's reason codes and wire shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from workforce.refusals import Refusal
from workforce.tree import FrontmatterError, is_seat_id, split_frontmatter

from .boards import BOARD_KEYS
from .constants import ALREADY_ON_ROSTER, INVALID_WORKER, NOT_ON_ROSTER, NOT_YOUR_OWN, already_on_roster, no_worker_on_roster
from .hiring import hire_problems
from .models import Seat
from .workers import CAPABILITIES_KEY, WORKER_FILE, WorkerManifest, check_worker_declared

__all__ = [
    "ALREADY_ON_ROSTER",
    "INVALID_WORKER",
    "NOT_ON_ROSTER",
    "NOT_YOUR_OWN",
    "WorkerRefused",
    "already_on_roster",
    "manifest_of",
    "no_worker_on_roster",
    "not_your_own",
    "read_worker_text",
    "without_boards",
    "worker_id_problem",
    "worker_wire",
]

# The longest WORKER.md text a hire takes, in characters.
MAX_WORKER_TEXT = 64_000
# Boards are the team's: who drains a board, and who holds its task tools, is declared in
# the tree (spec "Working the rows"), never by one person's hire.
HOLDS_NO_BOARD = "a worker of your own holds no board; drains: and boardTools: are declared in the workforce tree"
# Capabilities (mail.send) are the team's too: a person without the mail.send permission
# must not mail through a worker of their own.
HOLDS_NO_CAPABILITY = (
    "a worker of your own is granted no capability; capabilities: (mail.send) are declared in the workforce tree"
)
TEAM_KEYS = (*BOARD_KEYS, CAPABILITIES_KEY)


def without_boards(config: dict) -> dict:
    """A worker's other settings less ``drains:``, ``boardTools:`` and ``capabilities:``
    (what a fork copies)."""
    return {key: value for key, value in (config or {}).items() if key not in TEAM_KEYS}


def not_your_own(seat: Seat) -> str:
    """Why ``seat`` (a standard or the organization's worker) can't be fired."""
    whose = "a standard worker" if seat.scope == Seat.Scope.SHARED else "your organization's worker"
    return f'"{seat.seat_id}" is {whose}, which you can\'t fire. Fork it to get a worker of your own.'


class WorkerRefused(Refusal):
    """A hire's ``WORKER.md`` text (or its id) was refused: every problem at once.

    ``problems`` is a list of sentences; the error body carries them as ``problems``
    beside ``reason`` (``invalid-worker``, 400) and ``message``."""

    def __init__(self, worker_id: str, problems: list[str]):
        self.problems = list(problems)
        count = len(self.problems)
        listed = "; ".join(self.problems)
        super().__init__(
            INVALID_WORKER,
            f'worker "{worker_id}" can\'t be hired: {count} problem{"" if count == 1 else "s"}: {listed}. Nothing was written.',
        )

    def as_error(self) -> dict:
        return {**super().as_error(), "problems": list(self.problems)}


def worker_id_problem(worker_id: object) -> str | None:
    """Why ``worker_id`` can't name a worker (the tree's rule: ``<name>`` or
    ``<team>.<name>``, each part lowercase letters, digits and single hyphens, at most
    64 characters), or None."""
    if is_seat_id(worker_id):
        return None
    shown = worker_id if isinstance(worker_id, str) else repr(worker_id)
    return (
        f'id: "{str(shown)[:80]}" is not a worker id; an id is <name> or <team>.<name>, each part lowercase '
        "letters, digits and single hyphens, at most 64 characters"
    )


def read_worker_text(worker_id: str, text: str, *, alongside: Iterable[WorkerManifest] = ()) -> WorkerManifest:
    """Read a hired worker's ``WORKER.md`` text the way the tree reads one, and check
    it the way hiring does; every problem is reported at once.

    The frontmatter is read with the tree's strict parser; the keys are checked with
    ``check_worker_declared`` (the closed key list and each key's shape; ``drains:`` and
    ``boardTools:`` are refused: a worker of one's own holds no board), and what is
    well shaped with ``hire_problems`` (its flow is a worker kind, its tools, model and
    boards, and its kind's own checks, e.g. a coordinator's ``delegates:``, which may
    name the workers ``alongside``: the person's roster).

    Args:
        worker_id: the id to hire it under (``<name>`` or ``<team>.<name>``).
        text: the whole file, frontmatter and body.

    Returns:
        The manifest (``path`` empty: it sits in no tree).

    Raises:
        WorkerRefused: ``invalid-worker`` (400) naming every problem.
    """
    problems: list[str] = []
    id_problem = worker_id_problem(worker_id)
    if id_problem:
        problems.append(id_problem)
    if not isinstance(text, str):
        raise WorkerRefused(str(worker_id), [*problems, "workerMd: must be the text of a WORKER.md file"])
    if len(text) > MAX_WORKER_TEXT:
        raise WorkerRefused(str(worker_id), [*problems, f"workerMd: is longer than {MAX_WORKER_TEXT} characters"])
    try:
        declared, body = split_frontmatter(text, WORKER_FILE)
    except FrontmatterError as exc:
        raise WorkerRefused(str(worker_id), [*problems, str(exc)]) from None
    problems.extend(e.message for e in check_worker_declared(declared, body, "", WORKER_FILE))
    for key in BOARD_KEYS:
        if key in declared:
            problems.append(f"{key}: {HOLDS_NO_BOARD}")
    if CAPABILITIES_KEY in declared:
        problems.append(f"{CAPABILITIES_KEY}: {HOLDS_NO_CAPABILITY}")
    # Hiring's checks see only the keys that passed the reader's, so one hire is told
    # every problem at once (a bad key does not hide a bad model).
    well_shaped = {
        key: value
        for key, value in declared.items()
        if key not in TEAM_KEYS
        and not check_worker_declared({key: value}, body if key == "instructions" else "", "", WORKER_FILE)
    }
    manifest = WorkerManifest(id=str(worker_id), declared=well_shaped, body=body)
    others = [w for w in alongside if w.id != worker_id]
    problems.extend(message for _, message in hire_problems([manifest], alongside=others))
    if problems:
        raise WorkerRefused(str(worker_id), problems)
    return WorkerManifest(id=worker_id, declared=declared, body=body)


def manifest_of(seat: Seat) -> WorkerManifest:
    """A hired seat as a manifest (what a coordinator's ``delegates:`` check reads)."""
    declared = {"description": seat.description, "flow": seat.kind, **(seat.config or {})}
    return WorkerManifest(id=seat.seat_id, declared=declared, body=seat.instructions, path=seat.source)


def worker_wire(seat: Seat) -> dict:
    """A roster entry over HTTP: ``{id, flow, scope, standard, description, model,
    tools, instructions, settings, forkedFrom, hiredAt}``. ``scope`` is ``own``,
    ``org`` or ``shared``; ``standard`` is true for a worker the tree declares;
    ``settings`` holds the other keys its file declared (a coordinator's ``delegates``,
    ``routing``, ...)."""
    return {
        "id": seat.seat_id,
        "flow": seat.kind,
        "scope": seat.scope,
        "standard": seat.scope == Seat.Scope.SHARED,
        "description": seat.description or None,
        "model": seat.model or None,
        "tools": list(seat.tools or []),
        "instructions": seat.instructions,
        "settings": dict(seat.config or {}),
        "forkedFrom": seat.forked_from or None,
        "hiredAt": seat.hired_at.isoformat() if seat.hired_at else None,
    }
