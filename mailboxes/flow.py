"""The built-in ``mailbox`` kind: ``post`` and ``read`` (spec "Posting and reading"),
and on a project's talk session ``join``, ``post`` and ``read`` as the room's
(``mailboxes.rooms``; spec "A room per project").

Other apps extend the kind through its facets rather than by being imported here: a
``notify`` block (seats waking members), a ``route`` (routing), more actions (boards).
"""

from __future__ import annotations

from functools import partial

from rest_framework import serializers

from workforce.facets import ACTION_FAMILIES, CLIENT_CREATES_SESSIONS, MAILBOX, NOTIFY, PRIVATE_SESSION, ROUTE
from workforce.flows import Action, ClientTextField, FlowKind, StrictCharField, registry
from workforce.refusals import Refusal
from workforce.sessions import ActionContext

from .board_actions import (
    FileTaskInput,
    ReadBoardInput,
    board_action_families,
    file_task,
    read_board,
    resolve_board_action,
)
from .queries import access_mailbox_state, held_boards, list_window_lines
from .rooms import do_answer_room_post, do_join, do_post_room_line, do_read_room, is_room_session, is_talk_address
from .services import do_answer_post, do_post_line

KIND = "mailbox"


class PostInput(serializers.Serializer):
    """``{body, author?}``: body is non-empty text; author an unverified member label."""

    body = ClientTextField()
    author = StrictCharField(required=False, max_length=200)  # Line.author


def post(ctx: ActionContext, data: dict) -> dict:
    """Post one line; answers the line as stored. On a talk session, a person's post in
    the project's room (``mailboxes.rooms.do_post_room_line``)."""
    if is_room_session(ctx.session):
        return do_post_room_line(ctx, body=data["body"], author=data.get("author"))
    return do_post_line(ctx, body=data["body"], author=data.get("author"), answers_line=True).as_wire()


class JoinInput(serializers.Serializer):
    """``join {projectId}``: bind this session to the project as the caller's talk session."""

    projectId = StrictCharField(max_length=64)


def join(ctx: ActionContext, data: dict) -> dict:
    """Bind the session to a project and list it (``mailboxes.rooms.do_join``)."""
    return do_join(ctx, project_id=data["projectId"])


class SeatPostInput(serializers.Serializer):
    """Internal ``seatPost``: ``{body, author}`` where author is the seat's id, set by the
    server (the post-to-mailbox capability), never by a model."""

    body = StrictCharField()
    author = StrictCharField()


def seat_post(ctx: ActionContext, data: dict) -> dict:
    """A seat's own line (``seatAuthored: true``; it wakes nobody). Internal: only a
    dispatch reaches it. Refused like a post when the seat is not a member."""
    return do_post_line(ctx, body=data["body"], author=data["author"], seat_authored=True, answers_line=True).as_wire()


class AnswerInput(serializers.Serializer):
    """Internal ``answer``: ``{postId, body, author, token?}``: a woken member's answer to
    the post ``postId``; author is the seat's id, set by the server, never a model;
    ``token`` is the delivery's answer token (a room's ``answerToken``)."""

    postId = StrictCharField()
    body = StrictCharField()
    author = StrictCharField()
    token = StrictCharField(required=False)


def answer(ctx: ActionContext, data: dict) -> dict:
    """A routed member's answer (spec "The answer lands in the mailbox"): the seat's line,
    at most one per post. Internal: only a dispatch reaches it, so no client can answer
    for a member. See ``mailboxes.services.do_answer_post``. On a talk session, a seat's
    answer to a room post, with its token (``mailboxes.rooms.do_answer_room_post``)."""
    if is_room_session(ctx.session):
        return do_answer_room_post(ctx, post_id=data["postId"], body=data["body"], author=data["author"], token=data.get("token"))
    return do_answer_post(ctx, post_id=data["postId"], body=data["body"], author=data["author"])


def _cursor(raw: object) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise Refusal("invalid-input", f"after: a cursor is a whole number of at least 0 (a read's nextCursor), not {raw!r}.")
    return raw


def read(ctx: ActionContext, data: dict) -> dict:
    """The mailbox: ``{id, description, members, boards?, transcript}``. The transcript
    holds the lines inside the history window; ``boards`` only when it holds one. On a
    talk session, the room's lines after ``after`` (``mailboxes.rooms.do_read_room``)."""
    if is_room_session(ctx.session):
        return do_read_room(ctx, after=_cursor(ctx.request.input.get("after")))
    state = access_mailbox_state(ctx.session)
    answer: dict = {"id": ctx.session.session_id, "description": state["description"], "members": list(state["members"])}
    boards = held_boards(ctx.session)
    if boards:
        answer["boards"] = sorted(boards)
    answer["transcript"] = [line.as_wire() for line in list_window_lines(ctx.session)]
    return answer


def is_talk_session(session) -> bool:
    """True for a room session (``PRIVATE_SESSION``: only its owner reads it): a bound
    talk session, or an empty session at a talk address, which only its owner can bind
    with ``join``. Anyone else gets the kernel's ``session-not-found``, word for word
    as for an id nobody holds, on every action (``client_creates_session``)."""
    return is_room_session(session)


def client_creates_session(session_id: str, action: str) -> bool:
    """``CLIENT_CREATES_SESSIONS`` of the mailbox kind: a client's call naming an id
    nobody holds creates the session at a mailbox address (spec "Opening it, and why an
    unopened id is not a mailbox": an empty session, then ``mailbox-not-bound``), and at
    a talk address (no dot) only for ``join``, the one action a fresh talk session is
    for. Any other action there answers ``session-not-found``, as it does on another
    user's talk session: an outsider can't tell a held talk address from a free one by
    the answer (``join`` is the exception: it takes a free id, and can't take a held one)."""
    return action == "join" or not is_talk_address(session_id)


def build_mailbox_kind() -> FlowKind:
    """The built-in mailbox kind, registered once per process."""
    return FlowKind(
        kind=KIND,
        actions={
            # A post wakes members: refused past WORKFORCE_BACKLOG_LIMIT (workforce.backlog).
            "post": Action(
                "post",
                post,
                PostInput,
                description="Post a line to the mailbox (or a project's room).",
                locks_session=True,
                adds_work=True,
            ),
            "join": Action(
                "join", join, JoinInput, description="Bind this session to a project: your talk session.", locks_session=True
            ),
            # read takes no input; an ``after`` cursor is accepted and ignored on a mailbox.
            "read": Action("read", read, None, allow_extra=frozenset({"after"}), description="Read the mailbox."),
            # A mailbox holding no board refuses both (board-not-declared).
            "fileTask": Action("fileTask", file_task, FileTaskInput, description="File a row onto a board the mailbox holds."),
            "readBoard": Action(
                "readBoard", read_board, ReadBoardInput, description="Read every row on a board the mailbox holds."
            ),
        },
        internal_actions={
            "seatPost": Action("seatPost", seat_post, SeatPostInput, description="A seat's own line.", locks_session=True),
            "answer": Action(
                "answer", answer, AnswerInput, description="A routed member's answer to a post.", locks_session=True
            ),
        },
        # A talk session is its member's own (and the seats' conversations under it): the
        # room is read through each member's own session, never through another's.
        facets={
            MAILBOX.key: True,
            NOTIFY.key: None,
            ROUTE.key: None,
            PRIVATE_SESSION.key: is_talk_session,
            CLIENT_CREATES_SESSIONS.key: client_creates_session,
            ACTION_FAMILIES.key: board_action_families(),
        },
        # boardActions: true -> the eight task tools as <tool>_<suffix> actions.
        resolve=partial(resolve_board_action, KIND),
    )


def register() -> FlowKind:
    return registry.register(build_mailbox_kind())
