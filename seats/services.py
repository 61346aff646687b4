"""Write side of a person's own roster (``seats.roster``): hire, fork and fire a worker
of one's own. One transaction per call; the database's unique constraint on a person's
own seat ids (``seat_unique_per_owner``) decides two hires of one id at once.

Each write is one ``Seat`` row in scope ``own`` for ``(organization, user)``, so every
process (the web server and each cluster worker) sees it on its next read: a coordinator
checks its delegates, a talk session finds its worker and a turn reads its seat from
the database, never from what was hired at boot (docs/architecture.md "Apps", seats).
"""

from __future__ import annotations

from django.conf import settings
from django.db import IntegrityError, transaction

from workforce.models import Organization
from workforce.refusals import Refusal

from .constants import OFFICE_HAS_NO_ROSTER, office_has_no_roster
from .models import Seat
from .queries import access_worker, list_roster, own_worker
from .roster import (
    ALREADY_ON_ROSTER,
    NOT_ON_ROSTER,
    NOT_YOUR_OWN,
    WorkerRefused,
    already_on_roster,
    manifest_of,
    no_worker_on_roster,
    not_your_own,
    read_worker_text,
    without_boards,
    worker_id_problem,
)


def _create_own(org: Organization, user_id: str, worker_id: str, **fields) -> Seat:
    if user_id == settings.WORKFORCE_OPEN_USER:
        raise Refusal(OFFICE_HAS_NO_ROSTER, office_has_no_roster(user_id))
    if own_worker(org, user_id, worker_id) is not None:
        raise Refusal(ALREADY_ON_ROSTER, already_on_roster(worker_id))
    try:
        with transaction.atomic():
            return Seat.objects.create(seat_id=worker_id, scope=Seat.Scope.OWN, organization=org, owner_user_id=user_id, **fields)
    except IntegrityError:  # another hire of the same id committed first
        raise Refusal(ALREADY_ON_ROSTER, already_on_roster(worker_id)) from None


@transaction.atomic
def do_hire_worker(org: Organization, user_id: str, worker_id: str, text: str) -> Seat:
    """Hire a worker of ``user_id``'s own in ``org`` from a ``WORKER.md`` text.

    The text is read and checked as a tree worker's is (``seats.roster.read_worker_text``),
    every problem at once. The id may be a standard worker's: the person's own then wins
    for them (the scope rule, ``seats.queries.reachable_seats``), and nobody else sees it.

    Args:
        worker_id: ``<name>`` or ``<team>.<name>``.
        text: the whole ``WORKER.md`` (frontmatter and body).

    Returns:
        The new seat (scope ``own``).

    Raises:
        WorkerRefused: ``invalid-worker`` (400), every problem named; nothing written.
        Refusal("worker-already-on-roster"): 409, the person already has a worker of
            their own with that id (also when another hire of it won the race).
    """
    roster = [manifest_of(seat) for seat in list_roster(org, user_id)]
    manifest = read_worker_text(worker_id, text, alongside=roster)
    return _create_own(
        org,
        user_id,
        worker_id,
        kind=manifest.flow,
        description=manifest.description,
        model=manifest.model,
        tools=manifest.tools,
        instructions=manifest.instructions,
        config=manifest.config,
    )


@transaction.atomic
def do_fork_worker(org: Organization, user_id: str, source_id: str, new_id: str | None = None) -> Seat:
    """Fork the worker ``source_id`` on ``user_id``'s roster (a standard one, the
    organization's, or one of their own) into a worker of their own called ``new_id``
    (default: the same id, which then wins over the standard one for them).

    The fork copies what the worker runs with (flow, description, model, tools,
    instructions and its other settings, less ``drains:`` and ``boardTools:``: a worker
    of one's own holds no board) and records ``forked_from``; it does not follow
    later changes to the file, and the worker it forks from does not change.

    Raises:
        Refusal("worker-not-on-roster"): 404, ``No worker "<id>" on your roster.``
        WorkerRefused: ``invalid-worker`` (400), ``new_id`` is not a worker id.
        Refusal("worker-already-on-roster"): 409, the person already has their own
            ``new_id``.
    """
    source = access_worker(org, user_id, source_id)
    target = source_id if new_id is None else new_id
    problem = worker_id_problem(target)
    if problem:
        raise WorkerRefused(str(target), [problem])
    return _create_own(
        org,
        user_id,
        target,
        kind=source.kind,
        description=source.description,
        model=source.model,
        tools=list(source.tools or []),
        instructions=source.instructions,
        config=without_boards(source.config),
        source=source.source,
        forked_from=source.seat_id,
    )


@transaction.atomic
def do_fire_worker(org: Organization, user_id: str, worker_id: str) -> Seat:
    """Fire ``user_id``'s own worker ``worker_id``: its row is deleted.

    Its conversations stay; what it was already handed is not recalled. A coordinator's
    list keeps it: a post then skips it with ``No worker "<id>" on your roster.``, one it
    was handed but had not started fails, and removing it from the list still works
    (spec 004 "Choosing how it routes", "Who can be a delegate"). Where the fired worker
    shadowed a standard one of the same id, the standard one is on the roster again.

    Returns:
        The fired seat (no longer saved).

    Raises:
        Refusal("worker-not-your-own"): 409, the id names a standard or the
            organization's worker (fork it instead).
        Refusal("worker-not-on-roster"): 404, nobody holds it for this person (also
            when another fire of it won the race).
    """
    seat = own_worker(org, user_id, worker_id)
    if seat is None:
        reached = access_worker(org, user_id, worker_id)  # raises worker-not-on-roster
        raise Refusal(NOT_YOUR_OWN, not_your_own(reached))
    deleted, _ = Seat.objects.filter(pk=seat.pk).delete()
    if not deleted:
        raise Refusal(NOT_ON_ROSTER, no_worker_on_roster(worker_id))
    return seat
