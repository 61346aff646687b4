"""The one turn log's shape (``seats.turns``), for the tests that check every caller
records its turn the same way: the turn's request is running while the model runs and
ends completed (or failed, with the turn's error), and its items are the turn text as
a user message, one ``tool-call`` component per tool call, and the reply as an
assistant message."""

from __future__ import annotations

import sys

from workforce.models import Item, Request

# A turn that calls one tool and then answers.
TURN_LOG = [("message", "", "user"), ("component", "tool-call", ""), ("message", "", "assistant")]
# What the scripted model calls: not one of the seat's tools, so its call is recorded
# (``tool-not-offered``) whatever the seat holds.
TOOL = "no-such-tool"


def turn_log(request: Request) -> list[tuple[str, str, str]]:
    """The turn log's items on ``request``, in order: ``(type, component, role)`` of
    each message item and each ``tool-call`` item (what the caller records besides, a
    coordinator's route record, is the caller's own)."""
    items = Item.objects.filter(request=request).order_by("seq")
    return [
        (i.type, i.component, i.data.get("role", "") if i.type == "message" else "")
        for i in items
        if i.type == "message" or i.component == "tool-call"
    ]


class ScriptedTurn:
    """A model script (``create_mock_model_resolver({block: ScriptedTurn(action)})``):
    the first call notes the status of the newest ``action`` request (the turn's own,
    while the model runs) and calls ``TOOL``; the next answers ``reply``. With
    ``fail`` every call raises (the provider is down)."""

    def __init__(self, action: str, *, reply: str = "the reply", fail: bool = False):
        self.action = action
        self.reply = reply
        self.fail = fail
        self.calls = 0
        self.statuses: list[str] = []

    def __call__(self, call):
        self.calls += 1
        self.statuses.append(Request.objects.filter(action=self.action).order_by("-pk").values_list("status", flat=True).first())
        if self.fail:
            return RuntimeError("the provider is down")
        if self.calls == 1:
            return {"tool_calls": [{"name": TOOL, "arguments": {}}]}
        return self.reply


def spy_drive_turn(monkeypatch) -> list[str]:
    """Spy on the one orchestration of a turn (``seats.turns.drive_turn``) wherever a
    module bound it, still running it: returns the list the kind of every turn driven
    from now on is appended to (``spec.kind``), in order."""
    from seats import turns

    real = turns.drive_turn
    kinds: list[str] = []

    def spy(spec):
        kinds.append(spec.kind)
        return real(spec)

    bound = [m for m in list(sys.modules.values()) if m is not None and getattr(m, "drive_turn", None) is real]
    assert turns in bound and len(bound) > 1  # the callers import it; nothing of theirs runs a turn another way
    for module in bound:
        monkeypatch.setattr(module, "drive_turn", spy)
    return kinds
