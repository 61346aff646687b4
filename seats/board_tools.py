"""The board capability: the eight task tools of each board a seat drains or holds
(spec "Working the rows"; what a worker declares is read by ``seats.boards``), and why a
worker's boards can't be held on its kind."""

from __future__ import annotations

from dataclasses import replace

from boards.tools import board_task_tools
from workforce.facets import BOARD_ROW_TURN, CAPABILITIES

from .boards import BOARD_TOOLS_KEY, DRAINS_KEY, seat_boards
from .drains import wake_board_drains


def board_task_capability(seat) -> list:
    """The agent kind's board capability (its ``capabilities`` facet): the eight task
    tools of every board the seat drains or holds by ``boardTools:``, composed once per
    board, in declared order (``boards.tools.board_task_tools``). The board's worker
    keys are read from the hired drains at call time (``unknown_assignee``). A row the
    model adds with ``addTask_…`` wakes the board's drains at once."""
    tools = []
    for board_id in seat_boards(seat.config).board_ids:
        for tool in board_task_tools(board_id):
            if tool.name.startswith("addTask_"):
                tool = replace(tool, call=_waking(tool.call, board_id))
            tools.append(tool)
    return tools


def _waking(call, board_id: str):
    def add_and_wake(ctx, args):
        result = call(ctx, args)
        if result.get("ok"):
            wake_board_drains(ctx.org, board_id, assignee=(args or {}).get("assignee"))
        return result

    add_and_wake.__name__ = getattr(call, "__name__", "addTask")
    return add_and_wake


def board_hire_problems(worker, flow) -> list[tuple[str, str]]:
    """Why ``worker`` can't hold the boards it declares on kind ``flow`` (a registered
    worker kind): ``drains:`` needs a kind that can run a row as the seat's turn (facet
    ``board_row_turn``), and either key needs a kind that offers the board capability.
    Returns ``(worker id, sentence)`` pairs; empty when the worker declares no board."""
    boards = seat_boards(worker.config)
    if not boards.board_ids:
        return []
    problems = []
    if boards.drains and not callable(BOARD_ROW_TURN.get(flow)):
        problems.append((worker.id, f"drains: the {flow.kind} kind can't run a board's rows as a seat's turn"))
    if board_task_capability not in (CAPABILITIES.get(flow) or ()):
        key = DRAINS_KEY if boards.drains else BOARD_TOOLS_KEY
        problems.append((worker.id, f"{key}: the {flow.kind} kind does not offer a board's task tools"))
    return problems
