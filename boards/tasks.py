"""django-q2 entry points for boards: ids and JSON in, one service call, no logic.

Enqueue with ``workforce.dispatch.enqueue("boards.tasks.drain_board", org_id, board_id,
worker_key, runner, ...)``. Both tasks are idempotent: a redelivered drain claims only
what is still claimable, and a redelivered sweep finds nothing left to move.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from workforce.models import Organization

from .services import DEFAULT_LEASE_SECONDS, do_drain_board, do_release_lapsed_tasks


def drain_board(
    org_id: str,
    board_id: str,
    worker_key: str | None,
    runner: str,
    run: str | None = None,
    lease_seconds: float = DEFAULT_LEASE_SECONDS,
    max_rows: int | None = None,
    max_seconds: float | None = None,
) -> dict:
    """Drain ledger ``board_id`` in organization ``org_id`` (``do_drain_board``).

    Args:
        runner: the dotted path of ``run_row(task) -> output`` (e.g. the seats app's
            function that runs a row as the seat's turn).
        run, lease_seconds (seconds), max_rows, max_seconds (seconds): as
            ``do_drain_board``.

    Returns:
        ``DrainReport.as_dict()``: ``{boardId, run, claimed, completed, retried, errored,
        parked, lost, taskIds, drained}``.
    """
    org = Organization.objects.get(pk=org_id)
    report = do_drain_board(
        org,
        board_id,
        worker_key=worker_key,
        run_row=import_string(runner),
        run=run,
        lease_seconds=lease_seconds,
        max_rows=max_rows,
        max_seconds=max_seconds,
    )
    return report.as_dict()


def release_lapsed_tasks(org_id: str | None = None, board_id: str | None = None) -> int:
    """Sweep rows whose lease lapsed (``do_release_lapsed_tasks``); a schedule may run it.
    Returns how many rows moved."""
    org = Organization.objects.get(pk=org_id) if org_id is not None else None
    return do_release_lapsed_tasks(org, board_id)
