"""The built-in ``agent`` kind (issue 3, "The built-in agent kind").

A worker whose file names no ``flow:`` runs on it. It hears posts: it declares the
internal action ``onMailboxPost`` (spec "Making a kind of your own hear posts"), which is
all ``wake_member_seats`` looks for. Facets other apps read:

- ``worker``: a worker can run on it (hiring checks this);
- ``hears_posts``: True (informational; the internal action is what counts);
- ``tools``: the catalog a worker's ``tools:`` line is read against
  (``post-to-mailbox``);
- ``capabilities``: functions ``(seat) -> [Tool]`` whose tools every seat of the kind
  is offered whatever its ``tools:`` says (a board's eight task tools);
- ``post_turn``: how a delivery runs the woken turn with the model outside any
  transaction (``seats.services.run_agent_post_turn``).
"""
from __future__ import annotations

from workforce.flows import Action, FlowKind, registry
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput

from .capabilities import AGENT_CATALOG
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
        },
        facets={
            "worker": True,
            "hears_posts": True,
            "tools": dict(AGENT_CATALOG),
            "capabilities": [],
            "post_turn": run_agent_post_turn,
        },
    )


def register() -> FlowKind:
    return registry.register(build_agent_kind())
