"""Walking the workforce tree without following links (spec "Mailboxes on disk").

Links are never followed at any level: every folder is listed with ``os.scandir`` on a
descriptor opened with ``O_NOFOLLOW`` (where the platform has it) and entries are typed
without following (``follow_symlinks=False``); record files are ``lstat``-ed and opened
with ``O_NOFOLLOW``. A reader (the mailbox reader, the worker reader) opens the root with
``open_root``, each structural folder (``teams``, a team, ``mailboxes``, ``workers``) with
``open_slot``, and each record file with ``read_record_file``; ``linked_folder_error`` and
``folder_name_error`` word the errors every reader reports the same way.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import MAILBOX_LOAD_FAILED, UNREADABLE_SLOT, LoadError, RecordError, WorkforceRootError
from .frontmatter import FrontmatterError, split_frontmatter
from .names import name_problem

__all__ = [
    "LINK_ADVICE",
    "Entry",
    "exists_nofollow",
    "folder_name_error",
    "join_rel",
    "linked_folder_error",
    "list_dir_nofollow",
    "open_root",
    "open_slot",
    "os_reason",
    "read_record_file",
]

LINK_ADVICE = "Links are never followed in a workforce tree"


@dataclass(frozen=True)
class Entry:
    """A directory entry typed without following links.

    ``kind`` is ``"dir"``, ``"symlink"``, ``"file"`` (regular) or ``"other"``.
    """

    name: str
    path: Path
    rel: str
    kind: str


# --------------------------------------------------------------------------- walking

_CAN_SCAN_FD = os.scandir in os.supports_fd and hasattr(os, "O_NOFOLLOW")
_DIR_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def join_rel(rel: str, name: str) -> str:
    """``rel/name``, or ``name`` at the root (``rel == ""``): a display path."""
    return f"{rel}/{name}" if rel else name


def _entry_kind(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "other"


def list_dir_nofollow(path: Path, rel: str) -> list[Entry]:
    """List the folder ``path`` (display path ``rel``) without following any link.

    Returns its entries sorted by name, each typed without following. Raises ``OSError``
    when the folder cannot be listed, including when ``path`` itself turned out to be a
    link (``ELOOP`` from ``O_NOFOLLOW``).
    """
    if _CAN_SCAN_FD:
        fd = os.open(path, _DIR_OPEN_FLAGS)
        try:
            with os.scandir(fd) as it:
                raw = [(entry.name, _entry_kind(entry)) for entry in it]
        finally:
            os.close(fd)
    else:  # pragma: no cover - platforms without dir fds (Windows)
        with os.scandir(path) as it:
            raw = [(entry.name, _entry_kind(entry)) for entry in it]
    return [Entry(name, path / name, join_rel(rel, name), kind) for name, kind in sorted(raw)]


# What operating systems, editors and version control leave in folders: passed over in
# silence where the tree's structural folders are listed, folders and files alike (spec
# "Mailboxes on disk": "OS and editor droppings such as .DS_Store").
DROPPING_NAMES = frozenset(
    {
        ".DS_Store",
        ".AppleDouble",
        ".LSOverride",
        ".Spotlight-V100",
        ".Trashes",
        ".fseventsd",
        ".TemporaryItems",
        ".DocumentRevisions-V100",
        "__MACOSX",
        "Icon\r",
        "Thumbs.db",
        "ehthumbs.db",
        "desktop.ini",
        "$RECYCLE.BIN",
        ".directory",
        ".idea",
        ".vscode",
        ".git",
        ".svn",
        ".hg",
        "__pycache__",
        ".ipynb_checkpoints",
    }
)


def is_dropping(name: str) -> bool:
    """True for an OS, editor or version-control dropping (``.DS_Store``, ``Thumbs.db``,
    ``._name`` AppleDouble files, ``name~`` and ``.name.swp`` editor backups, ``.#name``
    and ``#name#`` Emacs locks), which the tree's readers pass over in silence."""
    return (
        name in DROPPING_NAMES
        or name.startswith(("._", ".#"))
        or name.endswith("~")
        or (name.startswith(".") and name.endswith((".swp", ".swo", ".swx")))
        or (len(name) > 1 and name.startswith("#") and name.endswith("#"))
    )


def os_reason(exc: OSError) -> str:
    """What an OSError says, for a message: its ``strerror`` or its class name."""
    return exc.strerror or exc.__class__.__name__


def open_slot(entry: Entry | None) -> list[Entry] | None:
    """List a structural folder (``teams``, a team folder, ``mailboxes``, ``workers``).

    Returns ``None`` when it is absent (``entry is None``), else its entries, less OS and
    editor droppings (``is_dropping``: a ``.DS_Store`` folder is no badly named mailbox). Raises
    ``RecordError`` of kind ``unreadable-slot`` at the folder's own path when it is a
    link, is not a folder, or exists and cannot be listed: the records beneath it cannot
    be enumerated.
    """
    if entry is None:
        return None
    if entry.kind == "symlink":
        raise RecordError(
            LoadError(
                UNREADABLE_SLOT,
                entry.rel,
                f"{entry.rel} is a symbolic link. {LINK_ADVICE}, so nothing beneath it is read; put the folder itself here.",
            )
        )
    if entry.kind != "dir":
        raise RecordError(
            LoadError(
                UNREADABLE_SLOT,
                entry.rel,
                f"{entry.rel} is not a folder, so nothing beneath it can be enumerated.",
            )
        )
    try:
        entries = list_dir_nofollow(entry.path, entry.rel)
    except OSError as exc:
        raise RecordError(
            LoadError(
                UNREADABLE_SLOT,
                entry.rel,
                f"{entry.rel} cannot be listed ({os_reason(exc)}), so nothing beneath it can be enumerated.",
            )
        ) from None
    return [child for child in entries if not is_dropping(child.name)]


def exists_nofollow(path: Path) -> bool:
    """True when anything (file, folder or link) sits at ``path``. Raises OSError when
    the folder holding it cannot be searched."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def open_root(root: str | os.PathLike) -> dict[str, Entry]:
    """The root's entries by name.

    Raises:
        WorkforceRootError: (the only thing a reader raises) the root cannot be read, is
            a link, or is not a folder.
    """
    root_path = Path(root)
    shown = os.fspath(root)
    try:
        st = os.lstat(root_path)
    except OSError as exc:
        raise WorkforceRootError(f"The workforce root {shown} cannot be read ({os_reason(exc)}).") from exc
    if stat.S_ISLNK(st.st_mode):
        raise WorkforceRootError(f"The workforce root {shown} is a symbolic link. {LINK_ADVICE}; pass the folder itself.")
    if not stat.S_ISDIR(st.st_mode):
        raise WorkforceRootError(f"The workforce root {shown} is not a folder.")
    try:
        return {entry.name: entry for entry in list_dir_nofollow(root_path, "")}
    except OSError as exc:
        raise WorkforceRootError(f"The workforce root {shown} cannot be read ({os_reason(exc)}).") from exc


def linked_folder_error(entry: Entry, *, kind: str, noun: str) -> LoadError:
    """The LoadError for a record folder that is a symbolic link (``noun``:
    ``Mailbox``, ``Worker``), at the folder's path, of ``kind``."""
    return LoadError(
        kind,
        entry.rel,
        f"{noun} folder {entry.rel} is a symbolic link. {LINK_ADVICE}; put the folder itself here.",
    )


def folder_name_error(entry: Entry, team_problem: str | None, *, kind: str, noun: str, team_note: str) -> LoadError | None:
    """The LoadError for a record folder whose id can't be formed from the names on its
    path, or None when both names follow the tree's name rule.

    Args:
        entry: the record folder (``teams/<team>/mailboxes/<name>``).
        team_problem: ``name_problem`` of its team folder, or None (no team, or fine).
        kind: the LoadError kind; noun: the record's (``Mailbox``, ``Worker``).
        team_note: the sentence after a team folder's problem (what can't be given an id
            until it is renamed).

    Returns:
        One LoadError at the folder's path naming the team folder's problem, then the
        folder's own, or None.
    """
    problems = []
    if team_problem:
        problems.append(f"Team folder {team_problem} {team_note}")
    problem = name_problem(entry.name)
    if problem:
        problems.append(f"{noun} folder {problem}")
    return LoadError(kind, entry.rel, " ".join(problems)) if problems else None


def read_record_file(folder: Path, folder_rel: str, filename: str, *, kind: str = MAILBOX_LOAD_FAILED) -> tuple[dict, str] | None:
    """Read one record file (``MAILBOX.md``, ``WORKER.md``) from a record folder.

    Args:
        folder: the record folder on disk (already known not to be a link).
        folder_rel: its display path, slash-separated from the root (``teams/eng/...``).
        filename: the fixed file name to read in it.
        kind: the LoadError kind to report failures under.

    Returns:
        ``(declared, body)`` from ``split_frontmatter``, or ``None`` when no such file is
        there (the caller words the "has no ..." message).

    Raises:
        RecordError: at ``folder_rel``, with a message naming the file, when the folder
        cannot be searched or the file is a link, not a regular file, unreadable, not
        valid UTF-8, or its frontmatter is missing, unclosed, not a mapping, has a
        duplicate key or is not valid YAML.
    """
    file_path = folder / filename
    file_rel = join_rel(folder_rel, filename)

    def fail(message: str) -> RecordError:
        return RecordError(LoadError(kind, folder_rel, message))

    try:
        st = os.lstat(file_path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise fail(f"{file_rel} cannot be read ({os_reason(exc)}).") from None
    if stat.S_ISLNK(st.st_mode):
        raise fail(f"{file_rel} is a symbolic link. {LINK_ADVICE}; put the file itself here.")
    if not stat.S_ISREG(st.st_mode):
        raise fail(f"{file_rel} is not a regular file.")
    try:
        fd = os.open(file_path, _FILE_OPEN_FLAGS)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise fail(f"{file_rel} cannot be read ({os_reason(exc)}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise fail(
            f"{file_rel}, line {line}: the file is not valid UTF-8 "
            f"(byte 0x{raw[exc.start]:02x} at offset {exc.start}). Save it as UTF-8."
        ) from None
    if "\x00" in text:  # the one input rule (workforce.wire): no store keeps a NUL
        line = text[: text.index("\x00")].count("\n") + 1
        raise fail(f"{file_rel}, line {line}: the file holds a NUL character, which no text field can keep.")
    try:
        return split_frontmatter(text, file_rel)
    except FrontmatterError as exc:
        raise fail(str(exc)) from None
