"""Board names, ledger ids and tool-name suffixes (spec "Holding a board", "Working the
rows").

A board is declared by a plain local name (``followups``); its ledger id is minted from
the mailbox that holds it, ``<mailbox id>.<board>`` (``engineering.incidents.followups``).
Because a board name can't contain a dot, the last dot of a ledger id always separates
the mailbox from the board. This module is the one home of those rules: the mailbox
binder imports them from here (mailboxes may import boards, never the reverse).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

RESERVED_BOARD_NAMES = frozenset({"__proto__", "prototype", "constructor"})
_BOARD_FORBIDDEN = re.compile(r"[\s./*\[\]]")
_TOOL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def board_name_problem(name: Any) -> str | None:
    """Why ``name`` is not a plain local board name, or None when it is one.

    The rule (spec "Holding a board"): text, not empty, no whitespace, none of
    ``. / * [ ]``, not ``lock`` in any case, not ``__proto__``, ``prototype`` or
    ``constructor``.
    """
    if not isinstance(name, str):
        return f"board names are plain local names, and {name!r} is not text"
    if name == "":
        return "a board name can't be empty"
    if _BOARD_FORBIDDEN.search(name):
        return f'board "{name}" breaks the board name rule: no whitespace and none of . / * [ ]'
    if name.lower() == "lock":
        return f'board "{name}" is reserved: "lock" can\'t name a board'
    if name in RESERVED_BOARD_NAMES:
        return f'board "{name}" is reserved: __proto__, prototype and constructor can\'t name a board'
    return None


def tool_suffix(board_id: str) -> str:
    """A ledger id with every character that can't go in a tool name turned into ``_``
    (``eng.feature.work`` -> ``eng_feature_work``)."""
    return _TOOL_NAME_UNSAFE.sub("_", board_id)


def board_id_for(mailbox_id: str, board: str) -> str:
    """The ledger id of ``board`` held by ``mailbox_id``: ``<mailbox id>.<board>``."""
    return f"{mailbox_id}.{board}"


def split_board_id(board_id: str) -> tuple[str, str]:
    """``(mailbox id, board name)`` of a ledger id, split at its last dot.

    Raises:
        ValueError: ``board_id`` has no dot, so it names no mailbox's board.
    """
    mailbox_id, dot, board = board_id.rpartition(".")
    if not dot or not mailbox_id or not board:
        raise ValueError(f'"{board_id}" is not a board ledger id (<mailbox id>.<board>)')
    return mailbox_id, board


@dataclass(frozen=True)
class MailboxBoard:
    """The ledger a mailbox writes to (spec ``mailboxBoard``): ``id`` is the minted ledger
    id, so a drain's resource key is never a string retyped by hand."""

    mailbox_id: str
    name: str

    @property
    def id(self) -> str:
        return board_id_for(self.mailbox_id, self.name)

    @property
    def tool_suffix(self) -> str:
        return tool_suffix(self.id)

    def __str__(self) -> str:
        return self.id


def mailbox_board(mailbox_id: str, name: str) -> MailboxBoard:
    """The ledger of board ``name`` held by mailbox ``mailbox_id`` (spec "Working the rows").

    Nothing checks the pair against the tree (a wrong one is a second, empty ledger,
    which the hire-time unattended-board warning makes visible), but the board name must
    follow the board name rule and the mailbox id must be non-empty text.

    Raises:
        ValueError: an empty mailbox id or a name breaking the board name rule.
    """
    if not isinstance(mailbox_id, str) or not mailbox_id.strip():
        raise ValueError("mailbox_board needs the mailbox's id")
    problem = board_name_problem(name)
    if problem:
        raise ValueError(problem)
    return MailboxBoard(mailbox_id, name)
