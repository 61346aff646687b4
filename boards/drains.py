"""Who drains which board (spec "Working the rows"), and the warnings hiring gives.

A seat that drains a board names its ledger id (``mailbox_board(mailbox, name).id``)
and the keys of its workers map. Nothing checks that pair against the tree: a wrong id
is a second, empty ledger. Hiring therefore warns, naming the mailbox and the board,
about a drain of a board no mailbox holds and about a held board no hired seat drains.
Nothing is refused: a mailbox may keep a board that only people read.

The process keeps the drains its hire declared (``set_board_drains``), re-derived from
the files on every start like the roster; the task tools read the workers map from it
to refuse an ``unknown_assignee``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from workforce.runtime import Slot

from .naming import split_board_id


@dataclass(frozen=True)
class BoardDrain:
    """One seat draining one ledger with the given worker keys (its workers map)."""

    seat_id: str
    board_id: str
    worker_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class BoardWarning:
    """A hire-time warning about a board.

    Attributes:
        code: ``unattended-board`` (held, drained by no hired seat) or
            ``unknown-board-drain`` (drained, held by no mailbox).
        mailbox_id, board, board_id: the board named, split from its ledger id.
        seat_id: the draining seat (``unknown-board-drain`` only).
        message: the sentence to print.
    """

    code: str
    mailbox_id: str
    board: str
    board_id: str
    message: str
    seat_id: str | None = None

    def __str__(self) -> str:
        return self.message


def _split(board_id: str) -> tuple[str, str]:
    try:
        return split_board_id(board_id)
    except ValueError:
        return board_id, ""


def unattended_board_warnings(held_board_ids: Iterable[str], drained_board_ids: Iterable[str]) -> list[BoardWarning]:
    """One ``unattended-board`` warning per held board that no hired seat drains.

    Args:
        held_board_ids: the ledger ids the bound mailboxes hold
            (``mailbox.board_id(name)`` for each mailbox and board).
        drained_board_ids: the ledger ids the hired seats drain.

    Returns:
        Warnings sorted by ledger id; empty when every held board is drained.
    """
    drained = set(drained_board_ids)
    warnings = []
    for board_id in sorted(set(held_board_ids) - drained):
        mailbox_id, board = _split(board_id)
        warnings.append(
            BoardWarning(
                code="unattended-board",
                mailbox_id=mailbox_id,
                board=board,
                board_id=board_id,
                message=(
                    f'mailbox {mailbox_id} holds board "{board}" ({board_id}), and no hired seat drains it: '
                    "its rows wait until someone works them. If a seat should drain it, check the mailbox id "
                    "and board name it names."
                ),
            )
        )
    return warnings


def unknown_drain_warnings(drains: Iterable[BoardDrain | tuple[str, str]], held_board_ids: Iterable[str]) -> list[BoardWarning]:
    """One ``unknown-board-drain`` warning per drain of a ledger no mailbox holds.

    Args:
        drains: ``BoardDrain`` rows, or ``(seat_id, board_id)`` pairs.
        held_board_ids: the ledger ids the bound mailboxes hold.

    Returns:
        Warnings sorted by (ledger id, seat id). The message names the mailbox and the
        board, and what that mailbox does hold when it holds any.
    """
    return unheld_board_warnings(
        ((d.board_id, d.seat_id) if isinstance(d, BoardDrain) else (d[1], d[0]) for d in drains),
        held_board_ids,
        code="unknown-board-drain",
        message=lambda seat_id, board_id, what: (
            f"seat {seat_id} drains board {board_id}, which no mailbox holds: {what}. "
            "It drains a second, empty ledger; fix the mailbox id or board name it names."
        ),
    )


def unheld_board_warnings(
    pairs: Iterable[tuple[str, str]],
    held_board_ids: Iterable[str],
    *,
    code: str,
    message: Callable[[str, str, str], str],
) -> list[BoardWarning]:
    """One warning per ``(ledger id, seat id)`` in ``pairs`` whose ledger no mailbox holds
    (a seat naming a board by a wrong mailbox id or board name).

    Args:
        pairs: ``(board_id, seat_id)`` pairs; repeats count once.
        held_board_ids: the ledger ids the bound mailboxes hold.
        code: the warnings' code (``unknown-board-drain``, ``unknown-board-tools``).
        message: ``message(seat_id, board_id, what) -> str``, ``what`` saying what that
            mailbox does hold (``mailbox m holds a, b, not "x"``) or that no mailbox ``m``
            holds a board ``"x"``.

    Returns:
        Warnings sorted by (ledger id, seat id).
    """
    held = set(held_board_ids)
    by_mailbox: dict[str, list[str]] = {}
    for board_id in held:
        mailbox_id, board = _split(board_id)
        by_mailbox.setdefault(mailbox_id, []).append(board)
    warnings = []
    for board_id, seat_id in sorted(set(pairs)):
        if board_id in held:
            continue
        mailbox_id, board = _split(board_id)
        holds = sorted(by_mailbox.get(mailbox_id, []))
        if holds:
            what = f'mailbox {mailbox_id} holds {", ".join(holds)}, not "{board}"'
        else:
            what = f'no mailbox {mailbox_id} holds a board "{board}"'
        warnings.append(
            BoardWarning(
                code=code,
                mailbox_id=mailbox_id,
                board=board,
                board_id=board_id,
                seat_id=seat_id,
                message=message(seat_id, board_id, what),
            )
        )
    return warnings


# This process's drains: set by the boot's hire, so a read before it boots the process.
BOARD_DRAINS: Slot[tuple[BoardDrain, ...]] = Slot("boards.drains", empty=tuple, after_boot=True)


def set_board_drains(drains: Iterable[BoardDrain]) -> None:
    """Record the drains this process's hire declared (replacing any earlier set)."""
    BOARD_DRAINS.set(tuple(drains))


def current_board_drains() -> tuple[BoardDrain, ...]:
    """The drains recorded by ``set_board_drains``; a process not booted yet boots first
    (``workforce.runtime.Slot``); empty when its tree declares none."""
    return BOARD_DRAINS.get()


def board_worker_keys(board_id: str) -> frozenset[str] | None:
    """The worker keys of every drain of ``board_id``; None when no drain declares the
    board, so an assignee can't be checked (any key is then accepted)."""
    keys: set[str] = set()
    found = False
    for drain in current_board_drains():
        if drain.board_id == board_id:
            found = True
            keys.update(drain.worker_keys)
    return frozenset(keys) if found else None
