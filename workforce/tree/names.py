"""The workforce tree's name rule.

Spec: "Mailboxes on disk" / "A mailbox's id comes from the folders": team and mailbox
folder names (and worker folder names) are lowercase letters, digits and single hyphens,
at most 64 characters. A folder name also has to be one every platform can create, so the
Windows device names are refused too.

A seat id (a ``members:`` entry, a worker id) is either a bare ``<name>`` (an org-level
worker) or ``<team>.<name>``, each part following the same rule.
"""

from __future__ import annotations

import difflib
import re

__all__ = [
    "NAME_MAX_LENGTH",
    "NAME_RULE",
    "RESERVED_NAMES",
    "is_seat_id",
    "is_valid_name",
    "name_problem",
]

NAME_RULE = "lowercase letters, digits and single hyphens, at most 64 characters"
NAME_MAX_LENGTH = 64

# Windows device names: a folder cannot be called any of these on Windows, whatever its case.
RESERVED_NAMES = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{digit}" for digit in range(1, 10)} | {f"lpt{digit}" for digit in range(1, 10)}
)

_NAME_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def name_problem(name: str) -> str | None:
    """Say what is wrong with ``name`` as a folder name in the workforce tree.

    Args:
        name: one folder name (no slashes, no dots), e.g. ``"daily-standup"``.

    Returns:
        ``None`` when the name follows the rule; otherwise one sentence that quotes the
        name and gives the rule, e.g.
        ``'"Stand Up" breaks the name rule: lowercase letters, digits and single hyphens,
        at most 64 characters.'`` or ``'"con" is a reserved device name and cannot name a
        folder.'``. Never raises.

    Spec: "Mailboxes on disk" / "A mailbox's id comes from the folders".
    """
    if not isinstance(name, str):
        return f"{name!r} is not a name: a name is text made of {NAME_RULE}."
    if len(name) > NAME_MAX_LENGTH or _NAME_PATTERN.fullmatch(name) is None:
        return f'"{name}" breaks the name rule: {NAME_RULE}.'
    if name in RESERVED_NAMES:
        return f'"{name}" is a reserved device name and cannot name a folder.'
    return None


def is_valid_name(name: object) -> bool:
    """True when ``name`` is a string that follows the name rule (see ``name_problem``)."""
    return isinstance(name, str) and name_problem(name) is None


def is_seat_id(value: object) -> bool:
    """True when ``value`` is a seat (worker) id: ``"<name>"`` or ``"<team>.<name>"``.

    Both parts must follow the name rule; anything that is not a string, has more than
    one dot, or an empty part is not a seat id. Never raises. Used to check ``members:``
    entries.
    """
    if not isinstance(value, str):
        return False
    parts = value.split(".")
    if len(parts) > 2:
        return False
    return all(is_valid_name(part) for part in parts)


def did_you_mean(key: object, known: tuple[str, ...] | list[str]) -> str:
    """``" (did you mean `members`?)"`` when ``key`` is close to one of ``known`` (difflib,
    a ratio of at least 0.6, or the same word in another case), else ``""``: the hint a
    refusal of an unknown key ends with."""
    if not isinstance(key, str):
        return ""
    folded = {k.lower(): k for k in known}
    if key.lower() in folded:
        return f" (did you mean `{folded[key.lower()]}`?)"
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean `{close[0]}`?)" if close else ""
