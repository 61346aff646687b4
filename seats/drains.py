"""Boards drained by seats on the task cluster (spec "Working the rows").

At hire (``configure_board_drains``, called by the composition root) the hired seats'
``drains:`` become the process's board drains (``boards.drains.set_board_drains``), the
mailbox kind's ``on_task_filed`` facet is set, and the board warnings are logged: a
seat's drain naming a board no mailbox holds, a seat holding the task tools of such a
board, and a held board no hired seat drains. Nothing is refused.

A drain runs on the cluster as ``seats.tasks.drain_board_as_seat(org_id, board_id,
seat_id, worker_key)``:

1. enqueued once per seat draining the board when a row is filed (``fileTask``, or a
   seat's ``addTask_…``), and by the periodic sweep (``do_sweep_board_drains``) for rows
   nothing picked up: a dropped task, a lapsed lease, a row whose deps just completed;
2. ``do_seat_drain`` runs the step as one ``seats.turns.drive_turn`` (kind
   ``board-row``) that takes the seat's turn slot before it claims anything and holds it
   while its run, ``boards.services.do_drain_board``, works the rows: each row is claimed (one statement on PostgreSQL), run as
   the seat's turn and settled, and the same task claims the next row while rows
   remain, up to ``DRAIN_ROWS_PER_TASK`` rows and ``drain_seconds_per_task()`` seconds
   (a bound that keeps the task inside the cluster's ``timeout`` and lets other work
   have the worker); when a bound stopped it, it enqueues itself again;
3. the claim decides who works a row (exactly one claimer wins), so redelivered or
   duplicate drains are harmless; a row whose turn a crash cut short is claimed again
   once its lease (the cluster's ``timeout`` plus a margin) lapses.

The row's turn runs outside any transaction in the seat's board session, ``run`` on the
row (``<ledger id>:<seat id>``, a child of the mailbox's session): one ``runTask``
request per claim, with the turn text as a user message and the reply as an assistant
message. The reply becomes the row's ``output`` and completes it; a failed turn fails
the row (pending again while attempts remain, else errored). The row is settled in the
transaction that ends its turn, so a crash re-runs the turn whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import partial
from typing import cast

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from boards.drains import (
    BoardDrain,
    BoardWarning,
    current_board_drains,
    set_board_drains,
    unattended_board_warnings,
    unheld_board_warnings,
    unknown_drain_warnings,
)
from boards.models import BoardTask, TaskStatus
from boards.naming import split_board_id
from boards.queries import claimable_tasks
from boards.services import DrainReport, Settled, do_drain_board, do_settle_claim
from workforce.cancelling import CANCELLED
from workforce.dispatch import enqueue
from workforce.facets import BOARD_ROW_TURN, ON_TASK_FILED, BoardRowTurn, Turn
from workforce.flows import registry
from workforce.framing import quoted
from workforce.leases import lease_seconds, requeue_lost
from workforce.models import Organization, Session
from workforce.refusals import Refusal
from workforce.runtime import Slot

from .boards import default_worker_key, seat_boards
from .models import DrainWake, Seat
from .queries import access_seat
from .turns import HeldTurns, SlotRule, TurnPlan, TurnSpec, Wake, drive_held_turn, drive_turn, turn_timeout

logger = logging.getLogger(__name__)

SEAT_DRAIN_TASK = "seats.tasks.drain_board_as_seat"
ROW_RUNNER = "seats.drains.run_board_row"
RUN_TASK_ACTION = "runTask"
RUN_ID_MAX = 200  # BoardTask.run

# The warnings of this process's hire (serve prints them): set by the boot.
BOARD_WARNINGS: Slot[tuple[BoardWarning, ...]] = Slot("seats.board_warnings", empty=tuple, after_boot=True)


# ----------------------------------------------------------------------------- hiring


def seat_board_drains(seats: Iterable[Seat]) -> list[BoardDrain]:
    """The board drains the hired ``seats`` declare, one per (seat, board), in seat order:
    ``BoardDrain(seat_id, board_id, (worker key,))``. Only shared seats count (the tree's
    workers, which ``serve`` hires); a seat id hired twice gives its drains once."""
    drains: list[BoardDrain] = []
    seen: set[tuple[str, str]] = set()
    for seat in seats:
        if seat.scope != Seat.Scope.SHARED:
            continue
        for board_id, worker in seat_boards(seat.config).drains:
            if (seat.seat_id, board_id) in seen:
                continue
            seen.add((seat.seat_id, board_id))
            drains.append(BoardDrain(seat.seat_id, board_id, (worker or default_worker_key(seat.seat_id),)))
    return drains


def unknown_board_tools_warnings(seats: Iterable[Seat], held_board_ids: Iterable[str]) -> list[BoardWarning]:
    """One ``unknown-board-tools`` warning per board a hired seat holds the task tools of
    (``boardTools:``) that no mailbox holds, naming the mailbox and the board."""
    return unheld_board_warnings(
        ((b, s.seat_id) for s in seats if s.scope == Seat.Scope.SHARED for b in seat_boards(s.config).tool_boards),
        held_board_ids,
        code="unknown-board-tools",
        message=lambda seat_id, board_id, what: (
            f"seat {seat_id} holds the task tools of board {board_id}, which no mailbox holds: {what}. "
            "Its tools write to a second, empty ledger; fix the mailbox id or board name it names."
        ),
    )


def board_problems(seats: Iterable[Seat], held_board_ids: Iterable[str]) -> list[BoardWarning]:
    """The board warnings for ``seats`` (hired, or unsaved ``Seat`` rows built from the
    tree's workers: only ``seat_id``, ``scope`` and ``config`` are read) against the
    ledger ids the bound mailboxes hold. Writes nothing; ``manage.py check`` and
    ``configure_board_drains`` both use it.

    Returns:
        Drains of a board no mailbox holds (``unknown-board-drain``), task tools of such
        a board (``unknown-board-tools``), then held boards no seat drains
        (``unattended-board``).
    """
    seats = list(seats)
    held = list(held_board_ids)
    drains = seat_board_drains(seats)
    return (
        unknown_drain_warnings(drains, held)
        + unknown_board_tools_warnings(seats, held)
        + unattended_board_warnings(held, [d.board_id for d in drains])
    )


def configure_board_drains(
    mailbox_kind: str, seats: Iterable[Seat], held_board_ids: Iterable[str], *, log: bool = True
) -> list[BoardWarning]:
    """Wire boards drained by the hired seats into this process (called at boot, after
    hiring and binding).

    Records the seats' drains (``set_board_drains``: the task tools read each board's
    worker keys from it), sets mailbox kind ``mailbox_kind``'s ``on_task_filed`` facet to
    ``on_task_filed``, and logs (``logger.warning``) and keeps the board warnings, which
    ``board_warnings()`` returns (``serve`` prints them).

    Args:
        seats: the hired seats (non-shared ones are passed over).
        held_board_ids: the ledger ids the bound mailboxes hold.
        log: False keeps the warnings without logging them (``serve`` prints them
            once itself; a cluster worker leaves them to ``serve`` and ``check``).

    Returns:
        The warnings, in order: drains of a board no mailbox holds
        (``unknown-board-drain``), task tools of such a board (``unknown-board-tools``),
        held boards no hired seat drains (``unattended-board``). Nothing is refused.
    """
    seats = list(seats)
    drains = seat_board_drains(seats)
    set_board_drains(drains)
    ON_TASK_FILED.set_on(mailbox_kind, on_task_filed)
    warnings = board_problems(seats, held_board_ids)
    for warning in warnings if log else ():
        logger.warning("%s", warning.message)
    BOARD_WARNINGS.set(tuple(warnings))
    return warnings


def board_warnings() -> list[BoardWarning]:
    """The board warnings of this process's last ``configure_board_drains``."""
    return list(BOARD_WARNINGS.get())


# ----------------------------------------------------------------------------- waking drains


def on_task_filed(ctx, board_id: str, task: BoardTask) -> list[BoardDrain]:
    """The mailbox kind's ``on_task_filed`` facet: ``fileTask`` calls it inside its
    transaction after filing ``task`` on ``board_id``; wakes the board's drains."""
    return wake_board_drains(ctx.org, board_id, assignee=task.assignee)


def wake_board_drains(org: Organization, board_id: str, *, assignee: str | None = None) -> list[BoardDrain]:
    """Enqueue one ``drain_board_as_seat`` per hired seat draining ``board_id`` that could
    claim a row assigned to ``assignee`` (every drain for an unassigned row; those whose
    worker key is the assignee otherwise). Inside a transaction the tasks go with its
    commit (``workforce.dispatch.enqueue``). Returns the drains woken."""
    woken = []
    for drain in current_board_drains():
        if drain.board_id != board_id:
            continue
        for key in drain.worker_keys or (None,):
            if assignee is None or key is None or key == assignee:
                enqueue_drain(org.pk, board_id, drain.seat_id, key)
                woken.append(drain)
    return woken


def _wake_keys(org_id: str, board_id: str, seat_id: str, worker_key: str | None) -> dict:
    return {"organization_id": org_id, "board_id": board_id, "seat_id": seat_id, "worker_key": worker_key or ""}


def enqueue_drain(org_id: str, board_id: str, seat_id: str, worker_key: str | None) -> None:
    """Enqueue one step of ``seat_id``'s drain of ``board_id`` and note when
    (``DrainWake``), so the sweep knows a task is on its way. Inside a transaction the
    task goes with its commit and the note is written after it, stamped with the time
    before the commit (a worker that ran the task at once has the later time)."""
    at = timezone.now()
    keys = _wake_keys(org_id, board_id, seat_id, worker_key)

    def note() -> None:
        if DrainWake.objects.filter(**keys, enqueued_at__lt=at).update(enqueued_at=at, requeues=0):
            return
        if not DrainWake.objects.filter(**keys).exists():
            try:
                with transaction.atomic():
                    DrainWake.objects.create(**keys, enqueued_at=at)
            except IntegrityError:  # another process noted it at the same moment
                pass

    enqueue(SEAT_DRAIN_TASK, org_id, board_id, seat_id, worker_key)
    transaction.on_commit(note)


def sweep_grace_seconds() -> float:
    """A pending row the sweep wakes a drain for has waited this long since its last
    change (``WORKFORCE_SWEEP_SECONDS``): a fresher one has a drain on its way."""
    return float(settings.WORKFORCE_SWEEP_SECONDS)


def _send_drain(org_id: str, board_id: str, seat_id: str, key: str | None, pk: int) -> None:
    """``requeue_lost``'s ``send`` for a drain's wake row ``pk``: enqueue the drain again."""
    enqueue(SEAT_DRAIN_TASK, org_id, board_id, seat_id, key)


def do_sweep_board_drains(*, now=None) -> list[tuple[str, str, str, str | None]]:
    """Wake drains for rows nothing picked up: a task the broker dropped, a row whose
    lease lapsed (its worker died), a row whose deps completed or that was unblocked,
    added by a board action. Idempotent; safe from several processes (claims decide).

    For each hired drain and each organization with a row on its board that is pending
    and unchanged for ``sweep_grace_seconds()`` or in progress with a lapsed lease, when
    the board has a row that drain can claim and none of its rows is in progress under a
    live claim of that seat (its chain is running): one drain is enqueued when no task
    of it is on its way (the last one enqueued has started), or when the one on its way
    is known lost (``workforce.leases.requeue_lost``: the queue has passed it or holds
    nothing, with backoff). A drain still waiting in a backlog is left alone.

    Returns:
        ``(org id, board id, seat id, worker key)`` per drain enqueued.
    """
    now = now or timezone.now()
    drains = current_board_drains()
    if not drains:
        return []
    grace = now - timedelta(seconds=sweep_grace_seconds())
    waiting = (
        BoardTask.objects.filter(board_id__in={d.board_id for d in drains})
        .filter(Q(status=TaskStatus.PENDING, updated_at__lt=grace) | Q(status=TaskStatus.IN_PROGRESS, lease_until__lt=now))
        .order_by()
        .values_list("organization_id", "board_id")
        .distinct()
    )
    woken = []
    for org_id, board_id in sorted(waiting):
        org = Organization(pk=org_id)
        for drain in drains:
            if drain.board_id != board_id:
                continue
            live = BoardTask.objects.filter(
                organization_id=org_id,
                board_id=board_id,
                status=TaskStatus.IN_PROGRESS,
                run=board_run_id(board_id, drain.seat_id),
                lease_until__gte=now,
            )
            if live.exists():
                continue
            for key in drain.worker_keys or (None,):
                if not claimable_tasks(org, board_id, now=now, worker_key=key).exists():
                    continue
                wake = DrainWake.objects.filter(**_wake_keys(org_id, board_id, drain.seat_id, key)).first()
                if wake is None or (wake.ran_at is not None and wake.ran_at >= wake.enqueued_at):
                    enqueue_drain(org_id, board_id, drain.seat_id, key)  # nothing on its way
                elif not requeue_lost(
                    DrainWake,
                    waiting=Q(pk=wake.pk),
                    now=now,
                    send=partial(_send_drain, org_id, board_id, drain.seat_id, key),
                ).all:
                    continue
                woken.append((org_id, board_id, drain.seat_id, key))
    return woken


# ----------------------------------------------------------------------------- the drain


def board_run_id(board_id: str, seat_id: str) -> str:
    """The id of ``seat_id``'s board session on ``board_id``, which claimed rows carry as
    ``run``: ``<ledger id>:<seat id>`` (``support.desk.escalations:support.lead``), or,
    past 200 characters, ``run_`` and a digest of it. A ledger id has two dots and a
    mailbox id one, so it never collides with a mailbox conversation."""
    run = f"{board_id}:{seat_id}"
    if len(run) <= RUN_ID_MAX:
        return run
    return f"run_{hashlib.sha256(run.encode()).hexdigest()[:32]}"


def ensure_board_session(org: Organization, board_id: str, seat: Seat, *, user_id: str) -> Session:
    """``seat``'s board session on ``board_id`` (``board_run_id``): created on its first
    drain, owned by ``user_id`` (the board's mailbox's principal), a child of that
    mailbox's session when it is open; its state names the seat and the board.

    Raises:
        Refusal("session-not-addressable"): the id is held by another kind's session or
            another seat's.
    """
    mailbox_id, _ = split_board_id(board_id)
    parent = Session.objects.filter(organization=org, session_id=mailbox_id).first()
    with transaction.atomic():
        session, _ = Session.objects.get_or_create(
            organization=org,
            session_id=board_run_id(board_id, seat.seat_id),
            defaults={
                "flow_kind": seat.kind,
                "user_id": user_id,
                "parent": parent,
                "state": {"seat": seat.seat_id, "boardId": board_id},
            },
        )
    state = session.state or {}
    if session.flow_kind != seat.kind or state.get("seat") != seat.seat_id or state.get("boardId") != board_id:
        raise Refusal(
            "session-not-addressable",
            f'"{session.session_id}" is not {seat.seat_id}\'s session on board {board_id}.',
        )
    return session


# A drain task runs at most this many rows before it hands the worker back (enqueueing
# its next step): other seats' drains and deliveries on the same cluster get a turn.
DRAIN_ROWS_PER_TASK = 32
# ... and claims no further row after this many seconds (see drain_seconds_per_task).
DRAIN_SECONDS_CAP = 10.0


def drain_seconds_per_task() -> float:
    """Seconds after which a drain task claims no further row: ``DRAIN_SECONDS_CAP``, or
    less when the cluster's ``timeout`` leaves less room after one whole turn
    (``Q_CLUSTER["timeout"] - WORKFORCE_TURN_TIMEOUT - 2``, at least 0: one row per task).

    Why: a row claimed just before the bound may run a whole turn
    (``seats.turns.turn_timeout()``), so the task always ends before the cluster kills it
    (``timeout``) and before the ORM broker would hand it out again (``retry``); its turn
    slot's hold (``slot_hold_seconds``, past the ``timeout``) and each row's lease (taken
    at that row's claim, past the ``timeout``) therefore never lapse under a live task.
    """
    room = float(settings.Q_CLUSTER.get("timeout") or 60) - turn_timeout() - 2
    return max(0.0, min(DRAIN_SECONDS_CAP, room))


def do_seat_drain(org_id: str, board_id: str, seat_id: str, worker_key: str | None) -> dict:
    """One step of ``seat_id``'s drain of ``board_id`` in ``org_id`` (the
    ``drain_board_as_seat`` task's body): claim rows one at a time and run each as the
    seat's turn (``boards.services.do_drain_board`` with the seat's runner, a lease of
    ``workforce.leases.lease_seconds()`` per row) until none is claimable or a bound
    stops it (``DRAIN_ROWS_PER_TASK`` rows, ``drain_seconds_per_task()`` seconds); when a
    bound stopped it, it enqueues the next step. Never raises for a row's failure (the
    row is failed).

    The step is one ``seats.turns.drive_turn`` (kind ``board-row``) whose slot, the
    seat's in its board session, is known before any claim (``TurnSpec.slot``): it is
    taken first and held for all the step's rows, one turn after another (each through
    ``drive_held_turn``), and freed with the step's end. While a turn of the seat runs
    there the step claims nothing, and runs again when that turn ends. The seat and its
    session are read once per step, not once per row.

    Returns:
        The drain report (``{boardId, run, claimed, completed, retried, errored, parked,
        lost, taskIds, drained}``) with ``seat``; ``{boardId, seat, waiting: True}`` when
        the seat's turn slot was taken; or ``{boardId, seat, skipped: <reason>}`` when the
        seat can't be reached in the organization or its kind can't run a row (the rows
        stay pending).
    """
    org = Organization.objects.get(pk=org_id)
    mailbox_id, _ = split_board_id(board_id)
    principal = Session.objects.filter(organization=org, session_id=mailbox_id).values_list("user_id", flat=True).first()
    try:
        seat = access_seat(org, principal or "", seat_id)
        flow = registry.require(seat.kind)
        work_row = BOARD_ROW_TURN.get(flow)
        if not callable(work_row):
            raise Refusal("cannot-drain", f"the {seat.kind} kind can't run a board's rows")
        session = ensure_board_session(org, board_id, seat, user_id=principal or seat_id)
    except Refusal as refusal:
        logger.warning("board %s: %s does not drain it in %s: %s", board_id, seat_id, org_id, refusal.message)
        return {"boardId": board_id, "seat": seat_id, "skipped": refusal.message}
    session.organization = org  # known: the turn reads it without a query
    DrainWake.objects.filter(**_wake_keys(org_id, board_id, seat_id, worker_key)).update(ran_at=timezone.now())

    def rows() -> HeldTurns[DrainReport]:
        return HeldTurns(
            do_drain_board(
                org,
                board_id,
                worker_key=worker_key,
                run_row=lambda task: drive_held_turn(_row_plan(task, seat=seat, session=session, work_row=work_row)),
                run=session.session_id,
                lease_seconds=lease_seconds(),
                max_rows=DRAIN_ROWS_PER_TASK,
                max_seconds=drain_seconds_per_task(),
            )
        )

    def settle(step: HeldTurns[DrainReport]) -> DrainReport | None:
        return step.outcome

    # One turn of the seat at a time in its board session (seats.turns): the slot is
    # taken before the claim, so a step that finds a row's turn running there claims
    # nothing and runs again when it ends.
    step: TurnPlan[HeldTurns[DrainReport], DrainReport | None] = TurnPlan(
        start=lambda: rows, settle=settle, slot=None, waiting=None
    )
    wake = Wake(SEAT_DRAIN_TASK, (org_id, board_id, seat_id, worker_key))
    spec: TurnSpec[HeldTurns[DrainReport], DrainReport | None] = TurnSpec(
        "board-row", lambda: step, slot=SlotRule(session, seat_id, wake), waiting=None
    )
    report = drive_turn(spec)
    if report is None:
        return {"boardId": board_id, "seat": seat_id, "waiting": True}
    if not report.drained:  # a bound stopped it: rows may remain
        enqueue_drain(org_id, board_id, seat_id, worker_key)
    return {**report.as_dict(), "seat": seat_id}


class TurnFailed(Exception):
    """A seat's turn on a row failed; the message is the turn's refusal
    (``model-error: …``), so the row's error reads ``TurnFailed: model-error: …``."""


def run_board_row(task: BoardTask) -> Settled:
    """The drain's runner (``boards.tasks.drain_board``'s ``runner``): run the claimed
    ``task`` as the turn of the seat whose board session ``task.run`` names, through its
    kind's ``board_row_turn`` facet (``workforce.facets.BOARD_ROW_TURN``), then finish
    the turn and settle the row in one transaction, as a delivery settles with its turn:
    the ``runTask`` request completed (the reply as an assistant message) and the row
    completed with the reply as its output; or the request failed and the row failed
    (``TurnFailed: <the turn's refusal>``); a turn whose request was cancelled parks the
    row (reason ``its run <request id> was cancelled``). A crash before the commit leaves both as they
    were (the request running, the row claimed): the row's lease lapses, it is claimed
    again and the dead request is aborted. There is no moment at which the turn is
    recorded and the row not settled.

    Returns:
        ``boards.services.Settled`` with the settled row (None when the claim was no
        longer current: the row was settled by the turn's own task tools, cancelled or
        claimed again meanwhile, and what that did stands): the drain only counts it.

    Raises:
        TurnFailed: the seat can't be reached, or its kind can't run a row (the drain
            fails the row).
    """
    session = (
        Session.objects.select_related("organization").filter(organization_id=task.organization_id, session_id=task.run).first()
    )
    if session is None or not (session.state or {}).get("seat"):
        raise TurnFailed(f'session-not-found: no seat\'s board session "{task.run}"')
    try:
        seat = access_seat(session.organization, session.user_id, session.state["seat"])
    except Refusal as refusal:
        raise TurnFailed(refusal.message) from None
    work_row = BOARD_ROW_TURN.get(registry.require(seat.kind))
    if not callable(work_row):
        raise TurnFailed(f"cannot-drain: the {seat.kind} kind can't run a board's rows")
    plan = _row_plan(task, seat=seat, session=session, work_row=work_row)

    def busy() -> None:
        raise TurnFailed(f"seat-busy: {seat.seat_id} is running a turn in {session.session_id}")

    # A row claimed already (outside a seat's drain step): the slot is taken after the
    # claim, and a busy seat fails this attempt (the wait is rolled back with it).
    plan.slot = SlotRule(session, seat.seat_id, Wake(ROW_RUNNER, (task.pk,)), on_wait=busy)
    return drive_turn(TurnSpec.planned("board-row", plan))


def _row_plan(task: BoardTask, *, seat: Seat, session: Session, work_row: BoardRowTurn) -> TurnPlan[Turn, Settled]:
    """The plan of a claimed row's turn once the seat, its board session and its kind's
    ``board_row_turn`` are known (a seat drain knows them for all its rows): the turn
    starts in ``drive_turn``'s start step when the facet has a ``begin`` (the agent
    kind's ``begin_board_row``); a kind's own facet with none starts and runs the turn
    in the run. The row is settled with the turn's end (``do_settle_claim``). No slot:
    the caller names it (``run_board_row``) or holds it (``do_seat_drain``'s step)."""
    begin = getattr(work_row, "begin", None)

    def start() -> Callable[[], Turn]:
        if begin is not None:
            started = begin(task=task, seat=seat, session=session)
            return cast(Callable[[], Turn], started.run)
        return lambda: work_row(task=task, seat=seat, session=session)

    def settle(turn: Turn) -> Settled:
        request = turn.request
        if turn.error is None:
            settled = do_settle_claim(task, output=turn.reply)
        elif turn.error.reason == CANCELLED and request is not None:
            # Its run was cancelled (POST /api/requests/{id}/cancel): the row waits, parked,
            # for resumeTask or cancelTask instead of going straight back to the drain.
            settled = do_settle_claim(task, park=f"its run {request.request_id} was cancelled")
        else:
            settled = do_settle_claim(task, error=f"{TurnFailed.__name__}: {turn.error.message}")
        return Settled(settled)

    return TurnPlan(start=start, settle=settle, slot=None, waiting=Settled(None))


def row_turn_text(task: BoardTask) -> str:
    """The turn a seat runs on a row: a first line naming the row, its board and the
    attempt, then ``Title:``, ``Goal:``, ``Context:`` and ``Input:`` (JSON) lines for what
    the row carries, then what the reply is for::

        Task task_… on board support.desk.escalations (attempt 1 of 3).
        Title: Refund over the limit
        Goal: Decide on the refund.
        Input: {"amount": 120}
        Your reply is the task's output.

    A title, goal or context that is not one plain line is a JSON string literal
    (``workforce.framing``), so what a filer wrote cannot add a line of this framing.
    """
    lines = [f"Task {task.task_id} on board {task.board_id} (attempt {task.attempts} of {task.max_attempts})."]
    if task.title:
        lines.append(f"Title: {quoted(task.title)}")
    lines.append(f"Goal: {quoted(task.goal)}")
    if task.context:
        lines.append(f"Context: {quoted(task.context)}")
    if task.input is not None:
        lines.append(f"Input: {json.dumps(task.input, sort_keys=True, ensure_ascii=False)}")
    lines.append("Your reply is the task's output.")
    return "\n".join(lines)
