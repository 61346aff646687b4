"""The delegated-post entry (spec 004 "Making your own flow a delegate").

A worker flow takes a coordinator's posts once it declares the internal action
``DELEGATED_POST_ENTRY`` around its door (the block its run action runs)::

    FlowKind(
        kind="research",
        actions={"run": Action("run", door_action, RunInput)},
        internal_actions={DELEGATED_POST_ENTRY: delegated_post_entry(door)},
        facets={"worker": True, "request_on_finished": delegated_post_on_finished},
    )

and is named in the coordinator's ``delegate_flows``. The door is handed ``{message}``,
where the message reads ``<from>, through <coordinator>: <post>``; whatever it returns,
a string or ``{"text": ...}``, is the answer. An empty reply fails the turn and nothing is
answered. A door whose run is cancelled raises ``DelegatedRunCancelled``; the coordinator
hears of it at once only when the flow sets ``delegated_post_on_finished`` (its
``request_on_finished`` facet), otherwise the round waits for its deadline.

This module is the kernel's half: names and helpers any app can import. The coordinator
kind (``coordinators``) runs the entry; the built-in agent kind (``seats``) declares it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import serializers

from .facets import REQUEST_ON_FINISHED
from .flows import Action, StrictCharField, registry
from .refusals import Refusal

DELEGATED_POST_ENTRY = "onDelegatedPost"

Door = Callable[[Any, dict], Any]


class DelegatedPostInput(serializers.Serializer):
    """What the entry takes: ``{message}`` (``<from>, through <coordinator>: <post>``)."""

    message = StrictCharField()


class DelegatedRunCancelled(Exception):
    """Raised by a door whose delegated run was cancelled (not failed)."""


def delegated_post_on_finished(outcome: str) -> bool:
    """The spec's ``delegatedPostOnFinished``: set it as a flow's ``request_on_finished``
    facet (``workforce.facets.RequestOnFinished``) and the coordinator is told at once
    when a delegated run ends, cancelled included, so its round does not wait for the
    deadline. ``outcome``: how the run ended (``"cancelled"``). Returns True (report)."""
    return True


def reports_cancellation(kind: str) -> bool:
    """True when flow ``kind``'s ``request_on_finished`` facet, asked with
    ``"cancelled"``, says the coordinator hears of a cancelled run at once (the
    built-in ``delegated_post_on_finished`` always does); False when the kind sets none
    (its round waits for its deadline)."""
    on_finished = REQUEST_ON_FINISHED.of(kind)
    return on_finished is not None and bool(on_finished("cancelled"))


def declares_delegated_post_entry(kind: str) -> bool:
    """True when flow ``kind`` is registered and declares the internal action
    ``DELEGATED_POST_ENTRY``."""
    flow = registry.get(kind)
    return flow is not None and DELEGATED_POST_ENTRY in flow.internal_actions


def reply_text(output: Any) -> str:
    """The answer a door returned: a string, or ``{"text": ...}``; anything else is
    no answer (``""``)."""
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and isinstance(output.get("text"), str):
        return output["text"]
    return ""


def delegated_post_entry(door: Door, *, description: str = "Work a post a coordinator delegated.") -> Action:
    """The internal action a flow declares to take delegated posts (the spec's
    ``delegatedPostEntry(door)``).

    Args:
        door: ``door(ctx, {"message": str}) -> str | {"text": str}`` (an ActionContext
            on the delegate's own session). It may raise Refusal (the turn fails) or
            DelegatedRunCancelled.

    Returns:
        An Action named ``DELEGATED_POST_ENTRY`` whose output is ``{"text": answer}``.
        An empty answer is refused (``empty-reply``): nothing is answered.
    """

    def handler(ctx: Any, data: dict) -> dict:
        text = reply_text(door(ctx, data))
        if not text.strip():
            raise Refusal("empty-reply", "the delegate's door answered the delegated post with nothing; nothing is answered.")
        return {"text": text}

    return Action(DELEGATED_POST_ENTRY, handler, DelegatedPostInput, description=description)


__all__ = [
    "DELEGATED_POST_ENTRY",
    "DelegatedPostInput",
    "DelegatedRunCancelled",
    "declares_delegated_post_entry",
    "delegated_post_entry",
    "delegated_post_on_finished",
    "reply_text",
    "reports_cancellation",
]
