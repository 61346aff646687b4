"""What a turn and an action carry beside their input, between the apps that set it and
those that read it: ``ToolContext.extras`` (``TurnExtras``: what a turn's tools share)
and ``ActionContext.extras`` (``ActionExtras``: what a dispatch hands the action it
runs). Each key is optional; each is set by one app and read by another, as said."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # pragma: no cover
    from .facets import AnswerSlot
    from .models import Session


class TurnExtras(TypedDict, total=False):
    """A turn's ``ToolContext.extras`` (``seats.turns.run_turn``'s ``extras``), shared by
    its tool calls and read back from ``TurnResult.extras``."""

    # The Seat whose turn calls the tool (``seats.turns.SEAT_EXTRA``; a seats model, which
    # the kernel cannot name).
    seat: Any
    # The routed post the turn answers (``seats.capabilities.ANSWER_EXTRA``).
    answer: AnswerSlot
    # The mailbox session a woken turn was delivered from (``seats.capabilities.MAILBOX_EXTRA``).
    mailbox_session: Session
    post_id: str  # the post a woken turn hears
    mailbox_id: str  # the mailbox it was posted in
    # Prefixes the idempotency keys of the turn's hand-overs (a delivery's, a row's, a run's).
    idempotency_prefix: str
    answer_handed: bool  # post-to-mailbox handed the routed answer over already
    # False when the turn's text does not land on its parent session (a woken seat's turn
    # on a post it does not answer): its preview stays on the turn's own session
    # (``workforce.previews``). Unset: it lands there.
    preview_parent: bool
    post_count: int  # the turn's posts so far (each has its own key)
    board_id: str  # the board row a row's turn works
    task_id: str
    # A coordinator's judgment turn: its state (``coordinators.judgment.STATE``).
    coordinator: dict[str, Any]
    mail_thread: str  # the mail a mail run is for (``mail.tools.THREAD_EXTRA``)
    call_counts: dict[str, int]  # a mail tool's calls so far, by tool name (``mail.tools.call_key``)
    # Set on a mailbox's board action (``mailboxes.board_actions``): no seat's tool call,
    # so no seat is its author (``boards.tools``).
    board_action: bool


class DelegatedRun(TypedDict):
    """What a coordinator's delegated post tells its delegate's entry
    (``coordinators.delivery``, read by ``seats.agent``)."""

    postId: str
    round: int
    coordinator: str  # the coordinator's worker id
    filingSessionId: str  # the conversation's session: where a filed task is filed
    deliveryId: int
    idempotencyPrefix: str


class ActionExtras(TypedDict, total=False):
    """An action's ``ActionContext.extras`` (``workforce.dispatch.dispatch``'s ``extras``)."""

    claim_token: str  # a delegate's report: the claim of the delivery it reports
    delegated: DelegatedRun  # a delegated post's entry
