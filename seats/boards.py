"""Boards a seat holds (spec "Working the rows"): what a WORKER.md declares about boards,
(the capability that gives a seat's model the eight task tools of each is
``seats.board_tools``).

Two keys, both optional, both lists of board ledger ids (``<mailbox id>.<board>``, the id
``mailbox_board(mailbox, name).id`` mints, e.g. ``support.desk.escalations``):

``drains:``
    The boards the seat drains. Each entry is a ledger id, or a mapping
    ``{board: <ledger id>, worker: <key>}``. ``worker`` is the seat's key in the board's
    workers map, the name a row's ``assignee`` uses to send a row to it; it defaults to
    the seat's own name (the part of its id after the team: ``support.lead`` drains as
    ``lead``). A drain claims rows assigned to its key or to nobody. Draining a board
    also gives the seat the board's eight task tools::

        drains: [support.desk.escalations]
        drains:
          - support.desk.escalations
          - {board: eng.incidents.followups, worker: analyst}

``boardTools:``
    Boards whose eight task tools the seat holds without draining them (a clerk that
    files and reassigns rows another seat works). A board is named once across both
    keys: draining it already gives its tools.

The tools are composed once per board (a seat holding two boards holds sixteen), named
``<tool>_<suffix>``. They are a capability of the seat's kind, not catalog tools: a
``tools:`` line can neither grant them (naming ``addTask_…`` there is refused at hire,
as any tool the kind's catalog lacks) nor withhold them (a seat holding a board gets
all eight whatever its ``tools:`` says).

Nothing here checks a ledger id against the tree: a wrong one is a second, empty ledger,
and hiring warns about it (``seats.drains``). Read errors are only about shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boards.naming import board_name_problem, split_board_id, tool_suffix
from workforce.tree import name_problem

DRAINS_KEY = "drains"
BOARD_TOOLS_KEY = "boardTools"
BOARD_KEYS = (DRAINS_KEY, BOARD_TOOLS_KEY)
DRAIN_ENTRY_KEYS = ("board", "worker")

_LEDGER_EXAMPLE = "support.desk.escalations"


def board_id_problem(value: Any) -> str | None:
    """Why ``value`` is not a board ledger id (``<mailbox id>.<board>``: a mailbox id
    ``<team>.<mailbox>`` whose parts follow the tree's name rule, a dot, and a board
    name following the board name rule), or None when it is one."""
    if not isinstance(value, str):
        return f"{value!r} is not a board ledger id: name a board as <mailbox id>.<board>, such as {_LEDGER_EXAMPLE}"
    try:
        mailbox_id, board = split_board_id(value)
    except ValueError:
        return f'"{value}" is not a board ledger id: name a board as <mailbox id>.<board>, such as {_LEDGER_EXAMPLE}'
    parts = mailbox_id.split(".")
    if len(parts) != 2 or any(name_problem(p) for p in parts):
        return (
            f'"{value}" is not a board ledger id: "{mailbox_id}" is not a mailbox id (<team>.<mailbox>, each part '
            f"lowercase letters, digits and single hyphens), so name the board as <mailbox id>.<board>, such as "
            f"{_LEDGER_EXAMPLE}"
        )
    problem = board_name_problem(board)
    if problem:
        return f'"{value}" is not a board ledger id: {problem}'
    return None


@dataclass(frozen=True)
class SeatBoards:
    """What a worker declares about boards: ``drains`` as ``(ledger id, worker key or
    None)`` pairs in declared order (None: the seat's own name), and ``tool_boards``
    (``boardTools:``)."""

    drains: tuple[tuple[str, str | None], ...] = ()
    tool_boards: tuple[str, ...] = ()

    @property
    def board_ids(self) -> tuple[str, ...]:
        """Every board the seat holds the task tools of: drained ones, then the rest."""
        return tuple(b for b, _ in self.drains) + self.tool_boards


def default_worker_key(seat_id: str) -> str:
    """A seat's key in a board's workers map when its ``drains:`` names none: its own
    name, the part of its id after the team (``support.lead`` -> ``lead``)."""
    return seat_id.rpartition(".")[2]


def check_board_keys(declared: dict) -> list[str]:
    """The shape problems of ``drains:`` and ``boardTools:`` in a WORKER.md's frontmatter,
    one sentence each (prefixed with the key). Empty when both are absent or well formed.

    Checked: each is a list; each ``drains:`` entry a ledger id or ``{board, worker}``
    (``worker`` a name); each ledger id well formed (``board_id_problem``); no board named
    twice, in one key or across both; and no two boards whose tool names would collide
    (the same suffix once unsafe characters become ``_``).
    """
    problems: list[str] = []
    seen: dict[str, str] = {}
    if DRAINS_KEY in declared:
        drains = declared[DRAINS_KEY]
        if not isinstance(drains, list):
            problems.append(
                f"drains: must be a list of boards, each a ledger id (<mailbox id>.<board>, such as {_LEDGER_EXAMPLE}) "
                "or {board: <ledger id>, worker: <key>}"
            )
        else:
            for entry in drains:
                board = entry
                if isinstance(entry, dict):
                    extra = [k for k in entry if k not in DRAIN_ENTRY_KEYS]
                    if extra:
                        problems.append(f"drains: an entry takes board and worker only, not {', '.join(repr(k) for k in extra)}")
                    if "board" not in entry:
                        problems.append("drains: an entry written as a mapping needs board: <ledger id>")
                        continue
                    board = entry["board"]
                    if "worker" in entry:
                        worker = entry["worker"]
                        problem = name_problem(worker) if isinstance(worker, str) else f"{worker!r} is not text."
                        if problem:
                            problems.append(f"drains: worker of {board}: {problem}")
                problem = board_id_problem(board)
                if problem:
                    problems.append(f"drains: {problem}")
                elif board in seen:
                    problems.append(f"drains: names board {board} twice")
                else:
                    seen[board] = DRAINS_KEY
    if BOARD_TOOLS_KEY in declared:
        tool_boards = declared[BOARD_TOOLS_KEY]
        if not isinstance(tool_boards, list):
            problems.append(f"boardTools: must be a list of board ledger ids (<mailbox id>.<board>, such as {_LEDGER_EXAMPLE})")
        else:
            for board in tool_boards:
                problem = board_id_problem(board)
                if problem:
                    problems.append(f"boardTools: {problem}")
                elif seen.get(board) == DRAINS_KEY:
                    problems.append(
                        f"boardTools: names board {board}, which drains: names; draining it already gives its task tools"
                    )
                elif board in seen:
                    problems.append(f"boardTools: names board {board} twice")
                else:
                    seen[board] = BOARD_TOOLS_KEY
    by_suffix: dict[str, list[str]] = {}
    for board in seen:
        by_suffix.setdefault(tool_suffix(board), []).append(board)
    for suffix, boards in by_suffix.items():
        if len(boards) > 1:
            problems.append(
                f'{" and ".join(f"board {b}" for b in boards)} both give tool names ending "{suffix}"; '
                "a seat can hold the tools of only one of them"
            )
    return problems


def seat_boards(config: dict | None) -> SeatBoards:
    """Read ``drains:`` and ``boardTools:`` from a seat's ``config`` (what its WORKER.md
    declared besides the agent's own keys). Entries that are not well formed are passed
    over (``read_workforce`` refuses them before a seat is hired)."""
    config = config or {}
    drains: list[tuple[str, str | None]] = []
    seen: set[str] = set()
    for entry in config.get(DRAINS_KEY) or ():
        board, worker = entry, None
        if isinstance(entry, dict):
            board, worker = entry.get("board"), entry.get("worker")
        if board_id_problem(board) is None and board not in seen:
            seen.add(board)
            drains.append((board, worker if isinstance(worker, str) and worker else None))
    tool_boards = []
    for board in config.get(BOARD_TOOLS_KEY) or ():
        if board_id_problem(board) is None and board not in seen:
            seen.add(board)
            tool_boards.append(board)
    return SeatBoards(tuple(drains), tuple(tool_boards))
