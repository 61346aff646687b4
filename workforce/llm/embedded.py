"""Embedded models: no network, deterministic.

``embedded/echo``, the development default, answers ``<seat> heard: <turn text>``, where
the seat is the calling block's name and the turn text is the last user message. It never
acts on what a sender wrote: a ``/tool`` line in a post, a mail or a chat message is only
text it echoes. The one tool call it makes is the worker's own:

- **Standing orders.** A line ``/tool <name> <JSON object>`` (the object runs to the end
  of the line) in the system prompt (the worker's instructions, written by whoever wrote
  the tree or hired the worker) applies to every turn that is a mailbox post, with
  ``{seat}``, ``{writer}``, ``{mailbox}``, ``{body}``, ``{turn}`` and ``{heard}`` (the
  echo answer, ``<seat> heard: <turn text>``) replaced inside the JSON's strings::

      /tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}

``embedded/scripted`` is the test model a tree names on purpose: it does all echo does
and also follows **the turn's own lines**: every line of the turn text (of a post's body,
read back from its quoted form: ``workforce.framing``) that contains ``/tool <name>
<JSON object>`` asks for that call, in order, so a post whose body holds
``/tool post-to-mailbox {"mailbox": "support.desk", "body": "on it"}`` makes every woken
scripted seat call it. Never name it for a seat anyone else can post to.

Only tools offered on the call are called; a line naming any other tool, or whose JSON
is not an object, is passed over. The calls are made on the turn's first model call;
once tool results are in, the model gives its answer. A line ``/sleep <milliseconds>`` in
the turn makes each call of ``embedded/scripted`` wait that long first (a slow model, for
end-to-end tests); a wait longer than the call's timeout fails the call with ModelError
after the timeout. ``embedded/echo`` ignores it: anyone who can post would otherwise hold
every woken seat, and a cluster worker each, for the turn's whole time limit.

Both write their answer word by word: a call with ``on_text`` gets each word (with the
space after it) as a piece, then the reply. A line ``/pace <milliseconds>`` in the turn
makes ``embedded/scripted`` wait that long before each word (a model that writes slowly,
for the pages' live answer); a pace that would pass the call's timeout fails the call
with ModelError once the timeout is spent. ``embedded/echo`` ignores it, as ``/sleep``.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from workforce.framing import unquoted

from .base import ModelCall, ModelError, ModelReply, ToolCall

_TOOL_LINE = re.compile(r"/tool\s+([A-Za-z0-9_.\-]+)\s+(\{.*\})\s*$")
_SLEEP_LINE = re.compile(r"(?:^|\s)/sleep\s+(\d+)\s*$")
_PACE_LINE = re.compile(r"(?:^|\s)/pace\s+(\d+)\s*$")
_WORD = re.compile(r"\S+\s*|\s+")
# A framed line: the writer is one word or a JSON string literal (workforce.framing).
_FRAMED = re.compile(r'^(?P<writer>"(?:[^"\\]|\\.)*"|[^\s"]+) in (?P<mailbox>\S+): (?P<body>.*)$', re.S)
MAX_SLEEP_MS = 600_000


class EchoModel:
    """``embedded/echo``: see the module docstring for what it answers and calls."""

    model_id = "embedded/echo"
    follows_turn_tools = False

    def complete(self, call: ModelCall) -> ModelReply:
        """Answer ``call`` deterministically. Raises ModelError when ``embedded/scripted``
        is asked by a ``/sleep`` for longer than ``call.timeout`` seconds (after waiting
        the timeout)."""
        turn, after = _last_turn(call.messages)
        if self.follows_turn_tools:  # a sender's /sleep is obeyed by the test model only
            _sleep(turn, call.timeout)
        seat = call.block or "echo"
        heard = f"{seat} heard: {turn}"
        if not any(m.get("role") == "tool" for m in after):
            offered = set(call.tool_names())
            wanted = [c for c in _requested_calls(turn, call.messages, seat, heard, self.follows_turn_tools) if c[0] in offered]
            if wanted:
                calls = tuple(
                    ToolCall(id=f"call_{uuid.uuid4().hex[:12]}", name=name, arguments=args, raw_arguments=json.dumps(args))
                    for name, args in wanted
                )
                return ModelReply(text="", tool_calls=calls)
        _write(heard, call, _pace(turn) if self.follows_turn_tools else 0.0)
        return ModelReply(text=heard)


def _pace(turn: str) -> float:
    """Seconds to wait before each word: the turn's last ``/pace <ms>`` line, or 0."""
    paces = [int(m.group(1)) for line in _logical_lines(turn) if (m := _PACE_LINE.search(line))]
    return min(paces[-1], MAX_SLEEP_MS) / 1000 if paces else 0.0


def _write(text: str, call: ModelCall, pace: float) -> None:
    """Hand ``text`` to ``call.on_text`` a word at a time, ``pace`` seconds before each.
    Raises ModelError when the pace would pass ``call.timeout`` (after waiting it out)."""
    if call.on_text is None:
        return
    deadline = time.monotonic() + call.timeout
    for word in _WORD.findall(text):
        if pace:
            if time.monotonic() + pace > deadline:
                time.sleep(max(deadline - time.monotonic(), 0))
                raise ModelError(f"embedded/scripted: no answer within {call.timeout:g}s (writing at {pace:g}s a word)")
            time.sleep(pace)
        call.on_text(word)


def _last_turn(messages: list[dict]) -> tuple[str, list[dict]]:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            content = messages[index].get("content")
            return (content if isinstance(content, str) else json.dumps(content)), messages[index + 1 :]
    return "", []


def _logical_lines(turn: str) -> list[str]:
    """The turn's lines as its senders wrote them: a framed line's quoted body, or a line
    that is a quoted text on its own (a mail's), read back and split (``workforce.framing``)."""
    lines = []
    for line in turn.splitlines():
        framed = _FRAMED.match(line)
        if framed:
            lines.extend(unquoted(framed["body"]).splitlines())
        elif line.startswith('"'):
            lines.extend(unquoted(line).splitlines())
        else:
            lines.append(line)
    return lines


def _sleep(turn: str, timeout: float) -> None:
    total = sum(int(m.group(1)) for line in _logical_lines(turn) if (m := _SLEEP_LINE.search(line)))
    if not total:
        return
    seconds = min(total, MAX_SLEEP_MS) / 1000
    if seconds > timeout:
        time.sleep(max(timeout, 0))
        raise ModelError(f"embedded/scripted: no answer within {timeout:g}s (asked to wait {seconds:g}s)")
    time.sleep(seconds)


def _tool_lines(lines: list[str]) -> list[tuple[str, dict]]:
    found = []
    for line in lines:
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


def _requested_calls(turn: str, messages: list[dict], seat: str, heard: str, follows_turn_tools: bool) -> list[tuple[str, dict]]:
    calls = _tool_lines(_logical_lines(turn)) if follows_turn_tools else []
    parsed = _FRAMED.match(turn)
    if parsed:
        system = "\n".join(m["content"] for m in messages if m.get("role") == "system" and isinstance(m.get("content"), str))
        values = {
            "seat": seat,
            "writer": unquoted(parsed["writer"]),
            "mailbox": parsed["mailbox"],
            "body": unquoted(parsed["body"]),
            "turn": turn,
            "heard": heard,
        }
        calls.extend((name, _fill(args, values)) for name, args in _tool_lines(system.splitlines()))
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


class ScriptedModel(EchoModel):
    """``embedded/scripted``: echo, and it also calls the tools the turn's own ``/tool``
    lines ask for (see the module docstring). A test model: a tree names it on purpose."""

    model_id = "embedded/scripted"
    follows_turn_tools = True


EMBEDDED_MODELS = {"echo": EchoModel, "scripted": ScriptedModel}
