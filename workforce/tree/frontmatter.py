"""Strict YAML frontmatter for the workforce tree's record files (MAILBOX.md, WORKER.md).

PyYAML's ``safe_load`` reads YAML 1.1: ``no``/``on``/``off`` become booleans, ``0755`` an
octal int, ``1:30`` the number 90, ``2024-01-02`` a date, and a duplicate key silently
keeps the last value. A record is "the frontmatter, exactly as written" (spec, "Mailboxes
on disk"), so this module loads with a SafeLoader subclass that resolves only:

- null: ``~``, ``null``, ``Null``, ``NULL`` and the empty value;
- booleans: ``true``/``True``/``TRUE``/``false``/``False``/``FALSE``;
- decimal ints without a leading zero: ``0``, ``-12``, ``+3``;
- floats written with a dot: ``1.5``, ``-0.25``, ``1.0e3``, ``.5``.

Every other plain scalar is a string. A duplicate key is an error, and so is a missing,
unclosed or non-mapping block. Errors name the file and, where there is one, the line.
python-frontmatter is not used: it silently returns empty metadata for a BOM, a list
block or a missing closing ``---``.
"""

from __future__ import annotations

import re
from collections.abc import Hashable

import yaml

__all__ = [
    "FrontmatterError",
    "StrictSafeLoader",
    "split_frontmatter",
    "strict_yaml_load",
]

_BOM = "\ufeff"
_FENCE = "---"


class FrontmatterError(ValueError):
    """A record file's frontmatter cannot be read.

    The message names the file (the display path the caller passed as ``source``) and
    the line when one is known: ``"<source>, line <n>: <problem>"`` or
    ``"<source>: <problem>"``. The parts are kept as ``source``, ``line`` (1-based, or
    ``None``) and ``problem``.
    """

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        where = f"{source}, line {line}" if line is not None else source
        super().__init__(f"{where}: {problem}")


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """Raised by the strict loader's mapping constructor; converted to FrontmatterError."""

    def __init__(self, key: object, mark: yaml.Mark) -> None:
        self.key = key
        super().__init__(None, None, f"duplicate key {_show(key)}", mark)


class StrictSafeLoader(yaml.SafeLoader):
    """A SafeLoader that resolves only null, true/false, decimal ints and dotted floats,
    and refuses duplicate mapping keys. Its resolver table is its own (SafeLoader's is
    left untouched)."""

    yaml_implicit_resolvers: dict = {}

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        self.flatten_mapping(node)  # only an explicit !!merge tag; "<<" is a plain string here
        mapping: dict = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found unhashable key",
                    key_node.start_mark,
                )
            if key in mapping:
                raise _DuplicateKeyError(key, key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


# A fresh table for the subclass: the class attribute above shadows SafeLoader's, and
# add_implicit_resolver only ever writes to the class's own dict.
StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null",
    re.compile(r"(?:~|null|Null|NULL|)\Z"),
    ["~", "n", "N", ""],
)
StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z"),
    list("tTfF"),
)
StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"[-+]?(?:0|[1-9][0-9]*)\Z"),
    list("-+0123456789"),
)
StrictSafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z"),
    list("-+0123456789."),
)


def strict_yaml_load(text: str, source: str, *, first_line: int = 1) -> object:
    """Load one YAML document with ``StrictSafeLoader``.

    Args:
        text: the YAML text.
        source: the display path of the file it came from, used in error messages.
        first_line: the file line ``text`` starts on, so reported lines are file lines
            (``split_frontmatter`` passes 2: the block starts under the opening ``---``).

    Returns:
        The loaded value: ``None`` for an empty document, else a dict, list, str, int,
        float or bool (nested as written).

    Raises:
        FrontmatterError: invalid YAML, a duplicate key (naming the key), or more than
        one document; the message gives ``source`` and the line.

    Spec: "Mailboxes on disk" (the frontmatter, exactly as written).
    """
    loader = StrictSafeLoader(text)
    try:
        return loader.get_single_data()
    except _DuplicateKeyError as exc:
        raise FrontmatterError(
            source,
            f"duplicate key {_show(exc.key)} in the frontmatter. A key is declared once.",
            _line(exc.problem_mark, first_line),
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "unreadable"
        context = f" ({exc.context})" if exc.context and exc.problem else ""
        raise FrontmatterError(
            source,
            f"the frontmatter is not valid YAML: {problem}{context}{_colon_hint(text, exc)}.",
            _line(mark, first_line),
        ) from None
    except yaml.YAMLError as exc:
        raise FrontmatterError(source, f"the frontmatter is not valid YAML: {exc}.") from None
    finally:
        loader.dispose()


_KEY_VALUE = re.compile(r"^\s*(?:-\s+)?([^\s:#'\"][^:]*?):\s+(.*\S)\s*$")


def _colon_hint(text: str, exc: yaml.MarkedYAMLError) -> str:
    """``; quote a value that contains ': ' (key: "quoted value")`` when the error is a
    plain value holding ``": "`` (``description: Fixes: printers``), else ``""``."""
    if exc.problem != "mapping values are not allowed here" or exc.problem_mark is None:
        return ""
    lines = text.splitlines()
    row = exc.problem_mark.line
    match = _KEY_VALUE.match(lines[row]) if 0 <= row < len(lines) else None
    if match is None:
        return "; quote a value that contains ': '"
    key, value = match.groups()
    quoted = value.replace("\\", "\\\\").replace('"', '\\"')
    return f"; quote a value that contains ': ' ({key}: \"{quoted}\")"


def split_frontmatter(text: str, source: str) -> tuple[dict, str]:
    """Split a record file into its frontmatter mapping and its body.

    The file must begin with a line that is exactly ``---`` (after an optional UTF-8 BOM;
    a line may end in CRLF); the block runs to the next line that is exactly ``---``. The
    body is everything after that closing line, verbatim, less the one line break right
    after it (line endings inside the body are kept as written).

    Args:
        text: the whole file, already decoded.
        source: the display path of the file, used in error messages.

    Returns:
        ``(declared, body)``; an empty block (``---`` straight after ``---``, or one holding
        only comments) gives ``{}``.

    Raises:
        FrontmatterError: no opening ``---`` ("carries no frontmatter"), no closing
        ``---`` ("frontmatter block is not closed"), a block that is not a mapping (saying
        what it is), or anything ``strict_yaml_load`` refuses.

    Spec: "Declaring a mailbox", "Mailboxes on disk".
    """
    if text.startswith(_BOM):
        text = text[1:]
    end = text.find("\n")
    first = text if end == -1 else text[:end]
    if _strip_cr(first) != _FENCE:
        raise FrontmatterError(
            source,
            "the file carries no frontmatter: its first line must be exactly ---, followed by the YAML block and a closing ---.",
            1,
        )
    block_start = len(text) if end == -1 else end + 1
    pos = block_start
    line_number = 1
    while end != -1:
        line_number += 1
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if _strip_cr(line) == _FENCE:
            block = text[block_start:pos]
            body = "" if end == -1 else text[end + 1 :]
            return _as_mapping(strict_yaml_load(block, source, first_line=2), source), body
        pos = end + 1
    raise FrontmatterError(
        source,
        "the frontmatter block is not closed: the --- on line 1 has no closing --- line.",
        1,
    )


def _as_mapping(value: object, source: str) -> dict:
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise FrontmatterError(
        source,
        f"the frontmatter is {_describe(value)}, not a mapping. Write it as key: value lines.",
        2,
    )


def _describe(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"a boolean ({_show(value)})"
    if isinstance(value, (int, float)):
        return f"a number ({_show(value)})"
    if isinstance(value, str):
        return f"a string ({_show(value)})"
    return f"a {type(value).__name__}"


def _show(value: object) -> str:
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f'"{shown}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _strip_cr(line: str) -> str:
    return line[:-1] if line.endswith("\r") else line


def _line(mark: yaml.Mark | None, first_line: int) -> int | None:
    return None if mark is None else mark.line + first_line
