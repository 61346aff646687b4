"""The task substrate's status machine (spec "Working the rows": "task substrate rows,
with the same fields, statuses and transitions any other board's carry").

Allowed transitions, exactly:

- pending     -> in_progress, blocked, cancelled
- in_progress -> completed, errored, parked, pending, cancelled
- blocked     -> pending, cancelled
- parked      -> pending, completed, cancelled, errored
- completed, errored, cancelled: terminal, nothing.

``CALLS`` names what moves a row along each transition (a tool call, or something the
drain does), so a refusal can say which calls a row's status allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .models import TERMINAL_STATUSES, TaskStatus

S = TaskStatus

ALLOWED: dict[str, frozenset[str]] = {
    S.PENDING: frozenset({S.IN_PROGRESS, S.BLOCKED, S.CANCELLED}),
    S.IN_PROGRESS: frozenset({S.COMPLETED, S.ERRORED, S.PARKED, S.PENDING, S.CANCELLED}),
    S.BLOCKED: frozenset({S.PENDING, S.CANCELLED}),
    S.PARKED: frozenset({S.PENDING, S.COMPLETED, S.CANCELLED, S.ERRORED}),
    S.COMPLETED: frozenset(),
    S.ERRORED: frozenset(),
    S.CANCELLED: frozenset(),
}

TERMINAL: frozenset[str] = frozenset(TERMINAL_STATUSES)


def can_transition(from_status: str, to_status: str) -> bool:
    """True when a row may move from ``from_status`` to ``to_status``."""
    return to_status in ALLOWED.get(from_status, frozenset())


def is_terminal(status: str) -> bool:
    """True for completed, errored and cancelled: no call changes such a row."""
    return status in TERMINAL


@dataclass(frozen=True)
class Call:
    """Something that moves a row: a task tool (``tool=True``, named ``<name>_<suffix>``)
    or a step of the drain. ``moves`` maps a from-status to the statuses it can lead to."""

    name: str
    moves: dict
    tool: bool = True
    phrase: str = ""

    def label(self, suffix: str | None) -> str:
        """How a message names it: ``completeTask_<suffix>``, or the drain step's phrase."""
        if not self.tool:
            return self.phrase
        base = f"{self.name}_{suffix}" if suffix else self.name
        return f"{base} {self.phrase}" if self.phrase else base


CALLS: tuple[Call, ...] = (
    Call("claim", {S.PENDING: (S.IN_PROGRESS,)}, tool=False, phrase="a drain claiming it"),
    Call("blockTask", {S.PENDING: (S.BLOCKED,)}),
    Call("unblock", {S.BLOCKED: (S.PENDING,)}, tool=True, phrase=""),
    Call("completeTask", {S.IN_PROGRESS: (S.COMPLETED,), S.PARKED: (S.COMPLETED,)}),
    Call("failTask", {S.IN_PROGRESS: (S.PENDING, S.ERRORED), S.PARKED: (S.PENDING, S.ERRORED)}),
    Call("cancelTask", {s: (S.CANCELLED,) for s in (S.PENDING, S.IN_PROGRESS, S.BLOCKED, S.PARKED)}),
    Call("park", {S.IN_PROGRESS: (S.PARKED,)}, tool=False, phrase="its drain parking it"),
    Call("release", {S.IN_PROGRESS: (S.PENDING, S.ERRORED)}, tool=False, phrase="its lease lapsing"),
    Call("resume", {S.PARKED: (S.PENDING,)}, tool=False, phrase="resuming it"),
)

# "unblock" is blockTask called with unblock: true; it is listed under that tool's name.
_TOOL_ALIASES = {"unblock": ("blockTask", "with unblock: true")}


def calls_from(status: str, suffix: str | None = None) -> list[str]:
    """The calls that can move a row out of ``status``, as a message names them: tool
    calls first (``blockTask_<suffix>``), then the drain's steps. Empty for a terminal
    status."""
    tools, steps = [], []
    for call in CALLS:
        if status not in call.moves:
            continue
        if call.name in _TOOL_ALIASES:
            name, phrase = _TOOL_ALIASES[call.name]
            tools.append(f"{name}_{suffix} {phrase}" if suffix else f"{name} {phrase}")
        elif call.tool:
            tools.append(call.label(suffix))
        else:
            steps.append(call.label(suffix))
    return tools + steps


def describe_calls_from(status: str, suffix: str | None = None) -> str:
    """A sentence naming what ``status`` allows, for ``illegal_status_transition``
    messages: ``from pending the calls are blockTask_x, cancelTask_x, or a drain claiming it``."""
    if is_terminal(status):
        return f"{status} is terminal: no call changes it"
    calls = calls_from(status, suffix)
    if len(calls) == 1:
        return f"from {status} the only call is {calls[0]}"
    return f"from {status} the calls are {', '.join(calls[:-1])}, or {calls[-1]}"
