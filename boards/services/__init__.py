"""Write side of boards: ``do_*`` functions that own the transaction (docs/architecture.md
"Layers").

``rows`` files rows and runs the task operations; ``claims`` claims, settles, sweeps
leases and drains. Everything public is importable from here.
"""

from .claims import (
    DEFAULT_LEASE_SECONDS,
    DrainReport,
    ParkTask,
    Settled,
    do_claim_task,
    do_drain_board,
    do_extend_lease,
    do_release_lapsed_tasks,
    do_settle_claim,
    mint_run_id,
)
from .rows import (
    UPDATABLE_FIELDS,
    check_assignee,
    do_assign_task,
    do_block_task,
    do_cancel_task,
    do_complete_task,
    do_fail_task,
    do_file_task,
    do_resume_task,
    do_unblock_task,
    do_update_task,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "DrainReport",
    "ParkTask",
    "Settled",
    "UPDATABLE_FIELDS",
    "check_assignee",
    "do_assign_task",
    "do_block_task",
    "do_cancel_task",
    "do_claim_task",
    "do_complete_task",
    "do_drain_board",
    "do_extend_lease",
    "do_fail_task",
    "do_file_task",
    "do_release_lapsed_tasks",
    "do_resume_task",
    "do_settle_claim",
    "do_unblock_task",
    "do_update_task",
    "mint_run_id",
]
