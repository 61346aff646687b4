"""What the store can keep: the one input rule, applied to everything a caller sends
before anything is written, so bad input is a clean ``invalid-input`` (400) on SQLite
and PostgreSQL alike, never a database error (PostgreSQL's text and JSON refuse NUL,
UTF-8 cannot encode a lone surrogate, Python's json reads ``1e400`` as infinity, deep
nesting overflows the stack).

Where it is applied (docs/api.md "Input the server refuses"): every JSON body the API parses
(``workforce.api.parsers``: values and keys, however deep), every URL path and query and
every page form field (``workforce.api.middleware``), every action's input however it
arrives (``workforce.sessions.do_run_action``: HTTP, pages, MCP, dispatch, a seat's tool
call), a seat's tool arguments (``seats.turns``), mail before its vault is written and
the vault's own writes (``mail.services``, ``mail.vault``), the MCP tools' arguments and
the management commands' text arguments. The same rule is the same check:
``text_problem`` for one text, ``check_storable`` for a JSON value."""

from __future__ import annotations

import math
from typing import Any

from .refusals import Refusal

MAX_DEPTH = 64
MAX_ID_LENGTH = 300
MAX_USER_ID_LENGTH = 200


def text_problem(value: str) -> str | None:
    """Why ``value`` can't be stored as text, or None: a NUL or a lone surrogate."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def check_storable(value: Any, *, label: str = "input") -> None:
    """Refuse a JSON value the store can't keep.

    Raises:
        Refusal("invalid-input"): nested deeper than 64, a non-finite number, or text
            (a value or a key) with a NUL or a lone surrogate.
    """
    stack = [(value, 1, label)]
    while stack:
        item, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise Refusal("invalid-input", f"{label} is nested deeper than {MAX_DEPTH} levels.")
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                raise Refusal("invalid-input", f"{where} {problem}.")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise Refusal("invalid-input", f"{where} is not a finite number.")
        elif isinstance(item, dict):
            for key, child in item.items():
                problem = text_problem(str(key))
                if problem:
                    raise Refusal("invalid-input", f"a key in {where} {problem}.")
                stack.append((child, depth + 1, f"{where}.{key}"))
        elif isinstance(item, list):
            stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(item))


def check_text(value: Any, *, label: str) -> None:
    """Refuse a text (``str``; anything else is left to the caller's own checks) holding
    a NUL or a lone surrogate.

    Raises:
        Refusal("invalid-input"): ``<label> contains a NUL character.`` and the like.
    """
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise Refusal("invalid-input", f"{label} {problem}.")


def check_arguments(**arguments: Any) -> None:
    """A management command's text arguments (a string, a list of strings, or None)
    under the one input rule: an argument the shell decoded to a lone surrogate (bytes
    that are not UTF-8) is refused before the command reads or writes anything.

    Raises:
        CommandError: ``--<name> contains a lone surrogate (not valid Unicode).``
    """
    from django.core.management import CommandError

    for name, value in arguments.items():
        for text in value if isinstance(value, list | tuple) else [value]:
            problem = text_problem(text) if isinstance(text, str) else None
            if problem:
                raise CommandError(f"--{name.replace('_', '-')} {problem}.")


def check_id(value: str, *, label: str, max_length: int = MAX_ID_LENGTH) -> None:
    """Refuse an id (session id, user id) that is empty, too long, or not storable text.

    Raises:
        Refusal("invalid-input").
    """
    if not value:
        raise Refusal("invalid-input", f"{label} can't be empty.")
    if len(value) > max_length:
        raise Refusal("invalid-input", f"{label} is longer than {max_length} characters.")
    problem = text_problem(value)
    if problem or any(ord(c) < 32 for c in value):
        raise Refusal("invalid-input", f"{label} {problem or 'contains a control character'}.")


MAX_IDEMPOTENCY_KEY_LENGTH = 255  # what a request keeps


def check_idempotency_key(key: str | None) -> str | None:
    """A caller's ``Idempotency-Key`` header as it is kept: None when absent or empty.

    Raises:
        Refusal("invalid-input"): longer than 255 characters, or holding a control
            character (a tab, DEL, ...: a key is something a client can show and log).
    """
    if not key:
        return None
    if len(key) > MAX_IDEMPOTENCY_KEY_LENGTH:
        raise Refusal("invalid-input", f"Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY_LENGTH} characters.")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in key):
        raise Refusal("invalid-input", "Idempotency-Key holds a control character.")
    return key


def name_list(names: list[str], *, most: int = 10) -> str:
    """``'a', 'b' and 3 more``: a bounded list for messages (never echo a whole input)."""
    shown = ", ".join(repr(n[:80]) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
