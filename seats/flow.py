"""The built-in ``agent`` kind (issue 3, "The built-in agent kind").

A worker whose file names no ``flow:`` runs on it. It hears posts: it declares the
internal action ``onMailboxPost`` (spec "Making a kind of your own hear posts"), which is
all ``wake_member_seats`` looks for. Facets other apps read:

- ``worker``: a worker can run on it (hiring checks this);
- ``hears_posts``: True (informational; the internal action is what counts);
- ``tools``: the catalog a worker's ``tools:`` line is read against
  (``post-to-mailbox``);
- ``capabilities``: functions ``(seat) -> [Tool]`` whose tools every seat of the kind
  is offered whatever its ``tools:`` says: ``seats.boards.board_task_capability``, the
  eight task tools of each board the seat drains or holds (``drains:``, ``boardTools:``);
- ``post_turn``: how a delivery runs the woken turn with the model outside any
  transaction (``seats.services.run_agent_post_turn``);
- ``board_row_turn``: how a seat's drain runs one claimed board row as the seat's turn
  (``seats.drains.run_agent_board_row``); a kind without it can't declare ``drains:``;
- ``request_on_finished``: ``delegated_post_on_finished`` (spec 004): a coordinator hears
  at once when a delegated run ends, cancelled included. The internal action
  ``onDelegatedPost`` (``seats.delegated``) makes the kind a coordinator's delegate.
"""
from __future__ import annotations

from workforce.flows import Action, FlowKind, registry
from workforce.delegation import DELEGATED_POST_ENTRY, delegated_post_on_finished
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput

from .boards import BOARD_ROW_TURN_FACET, board_task_capability
from .capabilities import AGENT_CATALOG
from .delegated import AGENT_DELEGATED_POST
from .drains import run_agent_board_row
from .services import run_agent_post_turn, run_agent_turn_inline

KIND = "agent"


def build_agent_kind() -> FlowKind:
    """The built-in agent kind, registered once per process."""
    return FlowKind(
        kind=KIND,
        actions={},
        internal_actions={
            ON_MAILBOX_POST: Action(
                ON_MAILBOX_POST, run_agent_turn_inline, MailboxNotifyInput,
                description="Run the seat's turn on a post it heard.",
            ),
            # A coordinator's delegate (spec 004 "Making your own flow a delegate").
            DELEGATED_POST_ENTRY: AGENT_DELEGATED_POST,
        },
        facets={
            "worker": True,
            "hears_posts": True,
            "tools": dict(AGENT_CATALOG),
            "capabilities": [board_task_capability],
            "post_turn": run_agent_post_turn,
            "request_on_finished": delegated_post_on_finished,
            BOARD_ROW_TURN_FACET: run_agent_board_row,
        },
    )


def register() -> FlowKind:
    return registry.register(build_agent_kind())
