"""Hiring: one seat per worker the tree declares (the spec's ``hireWorkforce``; spec
"Waking agent seats": "hire first").

``hire_problems`` says why a worker can't be hired (its kind, tools, model, boards, or
its kind's own ``validate_worker`` facet); ``hire_workforce`` writes the seats,
idempotently; ``do_hire_tree_workers`` is what ``serve`` does with the tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from django.conf import settings
from django.db import IntegrityError, transaction

from workforce.facets import TOOL_CATALOG, VALIDATE_WORKER, WORKER
from workforce.flows import registry
from workforce.llm import model_problem
from workforce.models import Organization

from .board_tools import board_hire_problems
from .models import Seat
from .tool_servers import TOOL_SERVERS_FILE, read_tool_servers, split_grant, tool_grant_problems, tool_grants
from .workers import WorkerManifest, read_workforce


class HireRefused(Exception):
    """Hiring stopped before writing anything. ``problems`` lists ``(worker id,
    sentence)`` for every worker that cannot be hired."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        lines = [f"  {worker}: {message}" for worker, message in problems]
        super().__init__(f"refused to hire {len({w for w, _ in problems})} worker(s)\n" + "\n".join(lines))


class WorkerTreeError(Exception):
    """The tree's workers did not load or could not be hired; the message names every
    problem (``lines``)."""

    def __init__(self, root: str, lines: list[str]):
        self.root = root
        self.lines = lines
        super().__init__(f"workforce tree {root}:\nworkers: {len(lines)} problem(s)\n" + "\n".join(f"  {line}" for line in lines))


def hire_problems(
    workers: Iterable[WorkerManifest],
    *,
    alongside: Iterable[WorkerManifest] = (),
    root: str | os.PathLike | None = None,
    reach: bool = True,
) -> list[tuple[str, str]]:
    """Why each worker cannot be hired: its flow is not a registered worker kind, its
    ``tools:`` names a tool the kind does not offer, its ``model:`` is unknown, its
    ``drains:``/``boardTools:`` name boards its kind can't hold
    (``seats.board_tools.board_hire_problems``), its kind's ``validate_worker`` facet refuses
    it (a coordinator's keys), its ``tools:`` grants a tool of a tool server the tree's
    ``org/tool-servers.yaml`` does not declare, or one that server does not list
    (``seats.tool_servers.tool_grant_problems``; ``root`` is the tree, default
    ``WORKFORCE_ROOT``; without ``reach`` the servers are not asked for their tools), or
    its id is declared twice. Empty when all can be hired.

    ``alongside``: workers already hired that a kind's own checks may name too (a
    person's roster, when they hire a coordinator of their own); they are not checked."""
    problems: list[tuple[str, str]] = []
    seen: set[str] = set()
    workers = list(workers)
    servers: dict = {}
    servers_file_problem = ""  # the tool servers' file has problems: grants name it, not "not declared"
    if any(tool_grants(w.tools) for w in workers):
        servers, file_errors = read_tool_servers(root if root is not None else settings.WORKFORCE_ROOT)
        if file_errors:
            servers_file_problem = (
                f"tools: grants tool-server tools, but {TOOL_SERVERS_FILE} has {len(file_errors)} problem(s) to fix first "
                f"(the first: {file_errors[0].message})"
            )
    known = workers + list(alongside)
    for worker in workers:
        if worker.id in seen:
            problems.append((worker.id, f'the worker id "{worker.id}" is declared twice'))
        seen.add(worker.id)
        flow = registry.get(worker.flow)
        known_kind = flow is not None and bool(WORKER.get(flow))
        if not known_kind:
            what = "was not registered" if flow is None else "is not a kind a worker runs on"
            problems.append((worker.id, f'flow: names the kind "{worker.flow}", which {what}'))
        # A tool-server grant (server/tool) is checked against the tree's servers whatever
        # the kind, so a bad flow does not hide a bad grant (every problem at once).
        if servers_file_problem and tool_grants(worker.tools):
            problems.append((worker.id, servers_file_problem))
        else:
            problems.extend((worker.id, message) for message in tool_grant_problems(worker.tools, servers, reach=reach))
        if flow is not None and known_kind:
            catalog = TOOL_CATALOG.get(flow) or {}
            for tool in worker.tools:
                if split_grant(tool) is None and tool not in catalog:
                    offered = ", ".join(sorted(catalog)) or "none"
                    problems.append(
                        (worker.id, f'tools: names "{tool}", which the {worker.flow} kind does not offer (it offers {offered})')
                    )
            problems.extend(board_hire_problems(worker, flow))  # drains:/boardTools: need a kind that can hold a board
            # A kind's own checks of what its workers declare (the coordinator's delegates:,
            # routing:, fallback:, rounds:): ``validate_worker(worker, workers) -> [sentence]``.
            validate = VALIDATE_WORKER.get(flow)
            if validate is not None:
                problems.extend((worker.id, message) for message in validate(worker, known))
        if worker.model:
            problem = model_problem(worker.model)
            if problem:
                problems.append((worker.id, f"model: {problem}"))
    return problems


def _seat_fields(worker: WorkerManifest) -> dict:
    return {
        "kind": worker.flow,
        "description": worker.description,
        "model": worker.model,
        "tools": worker.tools,
        "instructions": worker.instructions,
        "config": worker.config,
        "source": worker.path,
    }


def hire_workforce(
    workers: Iterable[WorkerManifest],
    *,
    scope: str = Seat.Scope.SHARED,
    org: Organization | None = None,
    owner_user_id: str = "",
    root: str | os.PathLike | None = None,
) -> list[Seat]:
    """Make one seat per worker (the spec's ``hireWorkforce``): idempotent.

    A worker already hired in that scope keeps its row (updated when its file changed);
    a second call with the same files writes nothing. Seats are rows (admin: Seats).

    Args:
        workers: manifests from ``read_workforce``.
        scope: ``"shared"`` (every organization; the tree's workers), ``"org"`` (one
            organization's: pass ``org``) or ``"own"`` (one user's: ``org`` and
            ``owner_user_id``).
        root: the tree whose tool servers the workers' grants name (default
            ``WORKFORCE_ROOT``).

    Returns:
        The seats, in the order of ``workers``.

    Raises:
        HireRefused: any worker cannot be hired (see ``hire_problems``); nothing written.
        ValueError: ``scope`` does not match ``org``/``owner_user_id``.
    """
    workers = list(workers)
    if scope == Seat.Scope.SHARED and (org is not None or owner_user_id):
        raise ValueError("a shared seat has no organization and no owner")
    if scope == Seat.Scope.ORG and (org is None or owner_user_id):
        raise ValueError("an organization's seat needs org and no owner")
    if scope == Seat.Scope.OWN and (org is None or not owner_user_id):
        raise ValueError("a user's own seat needs org and owner_user_id")
    if scope not in Seat.Scope.values:
        raise ValueError(f"unknown scope {scope!r}")
    problems = hire_problems(workers, root=root)
    if problems:
        raise HireRefused(problems)
    for attempt in range(2):
        rows = {
            seat.seat_id: seat
            for seat in Seat.objects.filter(
                scope=scope, organization=org, owner_user_id=owner_user_id, seat_id__in=[w.id for w in workers]
            )
        }
        to_create: list[Seat] = []
        to_update: list[Seat] = []
        for worker in workers:
            fields = _seat_fields(worker)
            row = rows.get(worker.id)
            if row is None:
                row = Seat(seat_id=worker.id, scope=scope, organization=org, owner_user_id=owner_user_id, **fields)
                to_create.append(row)
                rows[worker.id] = row
            elif any(getattr(row, k) != v for k, v in fields.items()):
                for key, value in fields.items():
                    setattr(row, key, value)
                to_update.append(row)
        if not to_create and not to_update:
            break
        try:
            with transaction.atomic():
                for row in to_create:
                    row.save()
                for row in to_update:
                    row.save()
            break
        except IntegrityError:  # another process hired the same worker at the same moment
            if attempt:
                raise
    return [rows[w.id] for w in workers]


def do_hire_tree_workers(root: str | os.PathLike) -> list[Seat]:
    """Read the tree's workers and hire them as shared seats (what ``serve`` does).

    Raises:
        WorkerTreeError: a worker folder failed to load or a worker cannot be hired
            (every problem named); nothing is hired then.
        workforce.tree.WorkforceRootError: the root itself is unreadable.
    """
    workers, errors = read_workforce(root)
    lines = [f"{e.path}: [{e.kind}] {e.message}" for e in errors]
    files = {w.id: f"{w.path}/WORKER.md" for w in workers if w.path}  # each problem names its file, as check does
    lines.extend(
        f"{files[worker]}: worker {worker}: {message}" if worker in files else f"{worker}: {message}"
        for worker, message in hire_problems(workers, root=root)
    )
    if lines:
        raise WorkerTreeError(str(root), lines)
    return hire_workforce(workers, root=root)


def seats_to_wake(hired: Iterable[Seat]) -> list[Seat]:
    """``hired`` plus every seat hired in a user's or an organization's scope, which
    ``reachable_seats`` prefers to a shared one: what ``serve`` hands ``wake_member_seats``."""
    return list(hired) + list(Seat.objects.exclude(scope=Seat.Scope.SHARED).order_by("pk"))
