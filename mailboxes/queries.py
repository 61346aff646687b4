"""Reads of mailboxes: their bound state, the windowed transcript and the durable one."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count, QuerySet

from boards.models import BoardTask, TaskStatus
from boards.naming import board_id_for, split_board_id
from workforce.models import Organization, Session
from workforce.privacy import PARENT_JOIN, may_read
from workforce.queries import window_request_ids
from workforce.refusals import Refusal

from .models import Line
from .roster import current_roster

MAILBOX_STATE_KEYS = ("members", "charter", "description")


def is_mailbox_state(state: object) -> bool:
    """True when ``state`` is what ``open_mailboxes`` writes: members, charter, description."""
    return (
        isinstance(state, dict)
        and isinstance(state.get("members"), list)
        and isinstance(state.get("charter"), str)
        and isinstance(state.get("description"), str)
    )


def access_mailbox_state(session: Session) -> dict:
    """The mailbox state of ``session`` (members, charter, description).

    Raises:
        Refusal("mailbox-is-a-template"): the id is a room template's (``mintFor:``).
        Refusal("mailbox-not-bound"): nobody opened this id as a mailbox.
    """
    if current_roster().template(session.session_id) is not None:
        raise Refusal(
            "mailbox-is-a-template",
            f'"{session.session_id}" is a room template (mintFor:), not a mailbox; its old session is kept but not served.',
        )
    if not is_mailbox_state(session.state):
        raise Refusal(
            "mailbox-not-bound",
            f'"{session.session_id}" was never opened as a mailbox. Declare it in the tree and run open_mailboxes.',
        )
    return session.state


def access_mailbox_session(org: Organization, mailbox_id: str, *, reader: str | None) -> Session:
    """The opened mailbox ``mailbox_id`` in ``org``, as ``reader`` (a user id, None for a
    caller that named nobody) reads it: a mailbox is readable by its organization, and
    the kernel's rule (``workforce.privacy.may_read``) refuses any session under a
    private conversation.

    Raises:
        Refusal("mailbox-not-bound"): no such session, it is not an opened mailbox, or
            ``reader`` may not read it.
    """
    session = Session.objects.filter(organization=org, session_id=mailbox_id).select_related(PARENT_JOIN).first()
    if session is None or not session.state or session.flow_kind == "channel" or not may_read(session, reader):
        raise Refusal("mailbox-not-bound", f'"{mailbox_id}" was never opened as a mailbox.')
    access_mailbox_state(session)
    return session


def list_window_lines(session: Session) -> QuerySet[Line]:
    """The lines inside the session's history window (its last N requests), in order."""
    # Materialize the window's request ids first: a correlated subquery makes SQLite scan
    # every line of the mailbox (bench/posts.py), while 50 ids hit the request index.
    request_ids = list(window_request_ids(session).values_list("pk", flat=True))
    return Line.objects.filter(request_id__in=request_ids).order_by("seq")


def list_transcript(session: Session, *, after: int = 0, limit: int = 100) -> QuerySet[Line]:
    """The durable transcript: lines with ``seq > after``, oldest first, at most ``limit``."""
    return Line.objects.filter(session=session, seq__gt=after).order_by("seq")[:limit]


def held_boards(session: Session) -> list[str]:
    """The boards the mailbox holds, from the files as bound at this start (never stored)."""
    bound = current_roster().mailbox(session.session_id)
    return list(bound.boards) if bound is not None else []


@dataclass
class BoardSummary:
    """One board of an organization, as ``GET /api/boards`` lists it: its ledger id, the
    mailbox that holds it and the board's name there, whether that mailbox still declares
    it (``boards:`` in its MAILBOX.md as bound at this start), and its rows per status."""

    board_id: str
    mailbox_id: str
    name: str
    declared: bool
    counts: dict[str, int] = field(default_factory=dict)


def list_boards(
    org: Organization, *, reader: str | None, mailbox: str | None = None, status: str | None = None
) -> list[BoardSummary]:
    """The boards of ``org`` that ``reader`` may read, ordered by ledger id: every board a
    mailbox opened in ``org`` declares, and every ledger holding rows in ``org`` (a board
    its mailbox no longer declares keeps its rows). A board is read by its mailbox's rule
    (``workforce.privacy.may_read``), as ``GET /api/boards/{id}/tasks`` reads it.

    Args:
        mailbox: only the boards this mailbox id holds.
        status: only boards with at least one row in this status (a ``TaskStatus`` value).

    Two queries whatever the number of boards.
    """
    declared: dict[str, tuple[str, str]] = {}
    for bound in current_roster().mailboxes:
        for board in bound.boards:
            declared[board_id_for(bound.id, board)] = (bound.id, board)
    counts: dict[str, dict[str, int]] = {}
    for row in BoardTask.objects.filter(organization=org).values("board_id", "status").annotate(n=Count("id")).order_by():
        counts.setdefault(row["board_id"], {})[row["status"]] = row["n"]
    owners: dict[str, tuple[str, str]] = dict(declared)
    for board_id in counts:
        if board_id not in owners:
            try:
                owners[board_id] = split_board_id(board_id)
            except ValueError:
                continue
    if mailbox is not None:
        owners = {board_id: owner for board_id, owner in owners.items() if owner[0] == mailbox}
    sessions = {
        s.session_id: s
        for s in Session.objects.filter(organization=org, session_id__in={owner[0] for owner in owners.values()}).select_related(
            PARENT_JOIN
        )
    }
    out = []
    for board_id in sorted(owners):
        mailbox_id, name = owners[board_id]
        session = sessions.get(mailbox_id)
        if session is not None and not may_read(session, reader):
            continue
        is_declared = board_id in declared and session is not None and is_mailbox_state(session.state)
        if not is_declared and board_id not in counts:
            continue  # declared in the tree but its mailbox is not open in this organization
        board_counts = {value: counts.get(board_id, {}).get(value, 0) for value in TaskStatus.values}
        if status is not None and not board_counts.get(status):
            continue
        out.append(BoardSummary(board_id=board_id, mailbox_id=mailbox_id, name=name, declared=is_declared, counts=board_counts))
    return out
