"""Embedded models: no network, deterministic.

``embedded/echo`` answers ``<seat> heard: <turn text>``, where the seat is the calling
block's name and the turn text is the last user message. It calls tools in two
documented ways, so demos and tests run offline:

1. **In the turn.** Every line of the turn text that contains
   ``/tool <name> <JSON object>`` (the object runs to the end of the line) asks for that
   call, in order. A woken seat's turn is ``<writer> in <mailbox>: <body>``, so a post
   whose body holds the line asks every woken echo seat for it::

       /tool post-to-mailbox {"mailbox": "support.desk", "body": "on it"}

2. **Standing orders.** The same lines in the system prompt (the worker's
   instructions) apply to every turn that is a mailbox post, with ``{seat}``,
   ``{writer}``, ``{mailbox}``, ``{body}``, ``{turn}`` and ``{heard}`` (the echo answer,
   ``<seat> heard: <turn text>``) replaced inside the JSON's strings::

       /tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}

Only tools offered on the call are called; a line naming any other tool, or whose JSON
is not an object, is passed over. The calls are made on the turn's first model call;
once tool results are in, echo gives its answer. A line ``/sleep <milliseconds>`` in the
turn makes each call wait that long first (a slow model, for end-to-end tests); a wait
longer than the call's timeout fails the call with ModelError after the timeout.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from .base import ModelCall, ModelError, ModelReply, ToolCall

_TOOL_LINE = re.compile(r"/tool\s+([A-Za-z0-9_.\-]+)\s+(\{.*\})\s*$")
_SLEEP_LINE = re.compile(r"(?:^|\s)/sleep\s+(\d+)\s*$")
_TURN = re.compile(r"^(?P<writer>\S+) in (?P<mailbox>\S+): (?P<body>.*)$", re.S)
MAX_SLEEP_MS = 600_000


class EchoModel:
    """``embedded/echo``: see the module docstring for what it answers and calls."""

    model_id = "embedded/echo"

    def complete(self, call: ModelCall) -> ModelReply:
        """Answer ``call`` deterministically. Raises ModelError when a ``/sleep`` asks
        for longer than ``call.timeout`` seconds (after waiting the timeout)."""
        turn, after = _last_turn(call.messages)
        _sleep(turn, call.timeout)
        seat = call.block or "echo"
        heard = f"{seat} heard: {turn}"
        if not any(m.get("role") == "tool" for m in after):
            offered = set(call.tool_names())
            wanted = [c for c in _requested_calls(turn, call.messages, seat, heard) if c[0] in offered]
            if wanted:
                calls = tuple(
                    ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=args, raw_arguments=json.dumps(args))
                    for name, args in wanted
                )
                return ModelReply(text="", tool_calls=calls)
        return ModelReply(text=heard)


def _last_turn(messages: list[dict]) -> tuple[str, list[dict]]:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            content = messages[index].get("content")
            return (content if isinstance(content, str) else json.dumps(content)), messages[index + 1 :]
    return "", []


def _sleep(turn: str, timeout: float) -> None:
    total = sum(int(m.group(1)) for line in turn.splitlines() if (m := _SLEEP_LINE.search(line)))
    if not total:
        return
    seconds = min(total, MAX_SLEEP_MS) / 1000
    if seconds > timeout:
        time.sleep(max(timeout, 0))
        raise ModelError(f"embedded/echo: no answer within {timeout:g}s (asked to wait {seconds:g}s)")
    time.sleep(seconds)


def _tool_lines(text: str) -> list[tuple[str, dict]]:
    found = []
    for line in text.splitlines():
        match = _TOOL_LINE.search(line)
        if not match:
            continue
        try:
            args = json.loads(match.group(2))
        except ValueError:
            continue
        if isinstance(args, dict):
            found.append((match.group(1), args))
    return found


def _requested_calls(turn: str, messages: list[dict], seat: str, heard: str) -> list[tuple[str, dict]]:
    calls = _tool_lines(turn)
    parsed = _TURN.match(turn)
    if parsed:
        system = "\n".join(m["content"] for m in messages if m.get("role") == "system" and isinstance(m.get("content"), str))
        values = {
            "seat": seat,
            "writer": parsed["writer"],
            "mailbox": parsed["mailbox"],
            "body": parsed["body"],
            "turn": turn,
            "heard": heard,
        }
        calls.extend((name, _fill(args, values)) for name, args in _tool_lines(system))
    return calls


def _fill(value: Any, values: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, text in values.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    return value


EMBEDDED_MODELS = {"echo": EchoModel}
