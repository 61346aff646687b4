"""Reading the workforce tree from disk (the spec's ``@flow-state-dev/workforce/loader``).

``read_mailboxes_directory`` walks ``<root>/teams/<team>/mailboxes/<mailbox>/MAILBOX.md``
and returns one ``MailboxManifest`` per mailbox plus a list of ``LoadError`` for every
folder that should have produced a mailbox and did not. Reading the tree opens nothing.

Links are never followed at any level: every folder is listed with ``os.scandir`` on a
descriptor opened with ``O_NOFOLLOW`` (where the platform has it) and entries are typed
without following (``follow_symlinks=False``); record files are ``lstat``-ed and opened
with ``O_NOFOLLOW``.

The lower-level pieces (``_list_dir_nofollow``, ``_open_slot``, ``read_record_file``,
``RecordError``, ``linked_folder_error``, ``folder_name_error``) are shared with the
worker reader (``WORKER.md`` under ``teams/<team>/workers/`` and ``org/workers/``).

Spec: "Mailboxes on disk" (through "Treat a non-empty errors as fatal") and "Upgrading
from channels" (Files).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .frontmatter import FrontmatterError, split_frontmatter
from .names import name_problem

__all__ = [
    "LOAD_ERROR_KINDS",
    "MAILBOX_LOAD_FAILED",
    "PRE_RENAME_RECORD",
    "REFUSED_DECLARATION",
    "UNREADABLE_SLOT",
    "LoadError",
    "MailboxManifest",
    "RecordError",
    "WorkforceRootError",
    "folder_name_error",
    "linked_folder_error",
    "read_mailboxes_directory",
    "read_record_file",
]

MAILBOX_LOAD_FAILED = "mailbox-load-failed"
REFUSED_DECLARATION = "refused-declaration"
UNREADABLE_SLOT = "unreadable-slot"
PRE_RENAME_RECORD = "pre-rename-record"
LOAD_ERROR_KINDS = (MAILBOX_LOAD_FAILED, REFUSED_DECLARATION, UNREADABLE_SLOT, PRE_RENAME_RECORD)

MAILBOX_FILE = "MAILBOX.md"
CHANNEL_FILE = "CHANNEL.md"
TEAMS_DIR = "teams"
MAILBOXES_DIR = "mailboxes"
CHANNELS_DIR = "channels"

_LINK_ADVICE = "Links are never followed in a workforce tree"


@dataclass
class MailboxManifest:
    """One mailbox record read from disk.

    ``id`` is ``"<team>.<mailbox>"`` (e.g. ``"engineering.standup"``), ``declared`` the
    frontmatter exactly as written (unknown keys included; the binder checks them), and
    ``body`` the charter below it, verbatim.
    """

    id: str
    declared: dict
    body: str


@dataclass(frozen=True)
class LoadError:
    """One entry of ``errors``: a folder that should have produced a mailbox and did not.

    ``kind`` is one of ``LOAD_ERROR_KINDS``; ``path`` is slash-separated and relative to
    the root (it starts at ``teams/``), naming the folder (or old file) to go and fix;
    ``message`` says what is wrong.
    """

    kind: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """``{"kind", "path", "message"}``, ready for JSON."""
        return {"kind": self.kind, "path": self.path, "message": self.message}


class WorkforceRootError(Exception):
    """The root passed to a reader is missing, unreadable, a symlink, or not a folder."""


class RecordError(Exception):
    """Internal carrier: one folder or record file failed; ``error`` is its LoadError."""

    def __init__(self, error: LoadError) -> None:
        self.error = error
        super().__init__(error.message)


@dataclass(frozen=True)
class _Entry:
    """A directory entry typed without following links.

    ``kind`` is ``"dir"``, ``"symlink"``, ``"file"`` (regular) or ``"other"``.
    """

    name: str
    path: Path
    rel: str
    kind: str


# --------------------------------------------------------------------------- walking

_CAN_SCAN_FD = os.scandir in os.supports_fd and hasattr(os, "O_NOFOLLOW")
_DIR_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_DIRECTORY", 0)
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_FILE_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _join(rel: str, name: str) -> str:
    return f"{rel}/{name}" if rel else name


def _entry_kind(entry: os.DirEntry) -> str:
    if entry.is_symlink():
        return "symlink"
    if entry.is_dir(follow_symlinks=False):
        return "dir"
    if entry.is_file(follow_symlinks=False):
        return "file"
    return "other"


def _list_dir_nofollow(path: Path, rel: str) -> list[_Entry]:
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
    return [_Entry(name, path / name, _join(rel, name), kind) for name, kind in sorted(raw)]


def _reason(exc: OSError) -> str:
    return exc.strerror or exc.__class__.__name__


def _open_slot(entry: _Entry | None) -> list[_Entry] | None:
    """List a structural folder (``teams``, a team folder, ``mailboxes``, ``workers``).

    Returns ``None`` when it is absent (``entry is None``), else its entries. Raises
    ``RecordError`` of kind ``unreadable-slot`` at the folder's own path when it is a
    link, is not a folder, or exists and cannot be listed: the records beneath it cannot
    be enumerated.
    """
    if entry is None:
        return None
    if entry.kind == "symlink":
        raise RecordError(LoadError(
            UNREADABLE_SLOT, entry.rel,
            f"{entry.rel} is a symbolic link. {_LINK_ADVICE}, so nothing beneath it is "
            "read; put the folder itself here.",
        ))
    if entry.kind != "dir":
        raise RecordError(LoadError(
            UNREADABLE_SLOT, entry.rel,
            f"{entry.rel} is not a folder, so nothing beneath it can be enumerated.",
        ))
    try:
        return _list_dir_nofollow(entry.path, entry.rel)
    except OSError as exc:
        raise RecordError(LoadError(
            UNREADABLE_SLOT, entry.rel,
            f"{entry.rel} cannot be listed ({_reason(exc)}), so nothing beneath it can be "
            "enumerated.",
        )) from None


def _exists_nofollow(path: Path) -> bool:
    """True when anything (file, folder or link) sits at ``path``. Raises OSError when
    the folder holding it cannot be searched."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def _open_root(root: str | os.PathLike) -> dict[str, _Entry]:
    """The root's entries by name; raises WorkforceRootError (the only thing a reader
    raises) when the root cannot be read, is a link, or is not a folder."""
    root_path = Path(root)
    shown = os.fspath(root)
    try:
        st = os.lstat(root_path)
    except OSError as exc:
        raise WorkforceRootError(
            f"The workforce root {shown} cannot be read ({_reason(exc)})."
        ) from exc
    if stat.S_ISLNK(st.st_mode):
        raise WorkforceRootError(
            f"The workforce root {shown} is a symbolic link. {_LINK_ADVICE}; pass the "
            "folder itself."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise WorkforceRootError(f"The workforce root {shown} is not a folder.")
    try:
        return {entry.name: entry for entry in _list_dir_nofollow(root_path, "")}
    except OSError as exc:
        raise WorkforceRootError(
            f"The workforce root {shown} cannot be read ({_reason(exc)})."
        ) from exc


def linked_folder_error(entry: _Entry, *, kind: str, noun: str) -> LoadError:
    """The LoadError for a record folder that is a symbolic link (``noun``:
    ``Mailbox``, ``Worker``), at the folder's path, of ``kind``."""
    return LoadError(
        kind, entry.rel,
        f"{noun} folder {entry.rel} is a symbolic link. {_LINK_ADVICE}; put the folder itself here.",
    )


def folder_name_error(
    entry: _Entry, team_problem: str | None, *, kind: str, noun: str, team_note: str
) -> LoadError | None:
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


def read_record_file(
    folder: Path, folder_rel: str, filename: str, *, kind: str = MAILBOX_LOAD_FAILED
) -> tuple[dict, str] | None:
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
    file_rel = _join(folder_rel, filename)

    def fail(message: str) -> RecordError:
        return RecordError(LoadError(kind, folder_rel, message))

    try:
        st = os.lstat(file_path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise fail(f"{file_rel} cannot be read ({_reason(exc)}).") from None
    if stat.S_ISLNK(st.st_mode):
        raise fail(f"{file_rel} is a symbolic link. {_LINK_ADVICE}; put the file itself here.")
    if not stat.S_ISREG(st.st_mode):
        raise fail(f"{file_rel} is not a regular file.")
    try:
        fd = os.open(file_path, _FILE_OPEN_FLAGS)
        with os.fdopen(fd, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise fail(f"{file_rel} cannot be read ({_reason(exc)}).") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise fail(
            f"{file_rel}, line {line}: the file is not valid UTF-8 "
            f"(byte 0x{raw[exc.start]:02x} at offset {exc.start}). Save it as UTF-8."
        ) from None
    try:
        return split_frontmatter(text, file_rel)
    except FrontmatterError as exc:
        raise fail(str(exc)) from None


# --------------------------------------------------------------------------- mailboxes


def read_mailboxes_directory(
    root: str | os.PathLike,
) -> tuple[list[MailboxManifest], list[LoadError]]:
    """Read every ``teams/<team>/mailboxes/<mailbox>/MAILBOX.md`` under ``root``.

    Args:
        root: the workforce tree's root folder (``str`` or path-like).

    Returns:
        ``(mailboxes, errors)``: one ``MailboxManifest`` per mailbox that loaded, sorted by
        id, and one ``LoadError`` per folder that should have produced a mailbox and did
        not (plus one per pre-rename file), sorted by path. The rest of the mailboxes load
        next to a failing one. A root with no ``teams/`` gives ``([], [])``; a team with no
        ``mailboxes/`` is not an error. Loose files in ``teams/``, a team folder or
        ``mailboxes/`` are passed over in silence. Callers should treat a non-empty
        ``errors`` as fatal at startup.

    Raises:
        WorkforceRootError: only about ``root``: it cannot be read, is a symbolic link, or
        is not a folder.

    Spec: "Mailboxes on disk" (through "Treat a non-empty errors as fatal"), "Upgrading
    from channels" (Files).
    """
    top = _open_root(root)
    mailboxes: list[MailboxManifest] = []
    errors: list[LoadError] = []
    try:
        teams = _open_slot(top.get(TEAMS_DIR))
    except RecordError as exc:
        return [], [exc.error]
    for team in teams or ():
        if team.kind in ("file", "other"):
            continue  # a loose file in teams/
        try:
            team_entries = {entry.name: entry for entry in _open_slot(team)}
            if CHANNELS_DIR in team_entries:
                errors.extend(_pre_rename_channels(team, team_entries[CHANNELS_DIR]))
            boxes = _open_slot(team_entries.get(MAILBOXES_DIR))
        except RecordError as exc:
            errors.append(exc.error)
            continue
        team_problem = name_problem(team.name)
        for box in boxes or ():
            if box.kind == "symlink":
                errors.append(linked_folder_error(box, kind=MAILBOX_LOAD_FAILED, noun="Mailbox"))
            elif box.kind == "dir":
                _read_mailbox_folder(team, team_problem, box, mailboxes, errors)
            # anything else is a loose file in mailboxes/: passed over in silence
    mailboxes.sort(key=lambda manifest: manifest.id)
    errors.sort(key=lambda error: (error.path, error.kind))
    return mailboxes, errors


def _read_mailbox_folder(
    team: _Entry,
    team_problem: str | None,
    box: _Entry,
    mailboxes: list[MailboxManifest],
    errors: list[LoadError],
) -> None:
    """Read one ``teams/<team>/mailboxes/<name>/`` folder into ``mailboxes`` or ``errors``."""
    try:
        has_channel_file = _exists_nofollow(box.path / CHANNEL_FILE)
    except OSError as exc:
        errors.append(LoadError(
            MAILBOX_LOAD_FAILED, box.rel,
            f"Mailbox folder {box.rel} cannot be read ({_reason(exc)}).",
        ))
        return
    if has_channel_file:
        errors.append(_pre_rename_file(f"{box.rel}/{CHANNEL_FILE}", f"{box.rel}/{MAILBOX_FILE}"))

    misnamed = folder_name_error(
        box, team_problem, kind=MAILBOX_LOAD_FAILED, noun="Mailbox",
        team_note="The mailboxes under it cannot be given an id until the team folder is renamed.",
    )
    if misnamed is not None:
        errors.append(misnamed)
        return

    try:
        record = read_record_file(box.path, box.rel, MAILBOX_FILE)
    except RecordError as exc:
        errors.append(exc.error)
        return
    if record is None:
        if not has_channel_file:  # the pre-rename record already says what to do
            errors.append(LoadError(
                MAILBOX_LOAD_FAILED, box.rel,
                f'Mailbox folder "{box.name}" has no {MAILBOX_FILE}. A mailbox folder '
                f"declares one mailbox, and every mailbox is a {MAILBOX_FILE}. Add "
                f"{box.rel}/{MAILBOX_FILE} with a description: in its frontmatter, or "
                f"move the folder out of teams/{team.name}/{MAILBOXES_DIR}/.",
            ))
        return

    declared, body = record
    problems_found = _check_mailbox_declared(declared, box.rel, f"{box.rel}/{MAILBOX_FILE}")
    if problems_found:
        errors.extend(problems_found)
        return
    mailboxes.append(MailboxManifest(id=f"{team.name}.{box.name}", declared=declared, body=body))


def _check_mailbox_declared(declared: dict, folder_rel: str, file_rel: str) -> list[LoadError]:
    """What the file itself is checked for: ``description`` required, ``system:`` refused.

    Nothing else is validated here; the closed list of declarable keys is the binder's.
    """
    found: list[LoadError] = []
    if "system" in declared:
        found.append(LoadError(
            REFUSED_DECLARATION, folder_rel,
            f"{file_rel} declares system:, which a mailbox cannot declare. The charter "
            "is the body below the frontmatter; move that text there.",
        ))
    description = declared.get("description")
    if "description" not in declared:
        what = "declares no description"
    elif description is None:
        what = "declares description: with no value"
    elif isinstance(description, str) and not description.strip():
        what = "declares an empty description"
    else:
        what = None
    if what:
        found.append(LoadError(
            MAILBOX_LOAD_FAILED, folder_rel,
            f"{file_rel} {what}. description is the one key a {MAILBOX_FILE} requires: "
            "say in a line what the mailbox is for.",
        ))
    return found


# --------------------------------------------------------------------------- pre-rename


def _pre_rename_file(old_rel: str, new_rel: str) -> LoadError:
    return LoadError(
        PRE_RENAME_RECORD, old_rel,
        f"{old_rel} is a channel record from before mailboxes were renamed, and it is not "
        f"read. It belongs at {new_rel} now.",
    )


def _pre_rename_channels(team: _Entry, channels: _Entry) -> list[LoadError]:
    """One pre-rename-record per ``channels/<name>/CHANNEL.md``, or one for the
    ``channels`` entry itself when it holds none (or is a link, a file, or unlistable).
    Nothing inside an old file is read."""
    records: list[LoadError] = []
    if channels.kind == "dir":
        try:
            subfolders = _list_dir_nofollow(channels.path, channels.rel)
        except OSError:
            subfolders = []
        for sub in subfolders:
            if sub.kind != "dir":
                continue
            try:
                found = _exists_nofollow(sub.path / CHANNEL_FILE)
            except OSError:
                found = False
            if found:
                records.append(_pre_rename_file(
                    f"{sub.rel}/{CHANNEL_FILE}",
                    f"{TEAMS_DIR}/{team.name}/{MAILBOXES_DIR}/{sub.name}/{MAILBOX_FILE}",
                ))
    if not records:
        records.append(LoadError(
            PRE_RENAME_RECORD, channels.rel,
            f"{channels.rel} is a channels folder from before mailboxes were renamed, and "
            f"nothing in it is read. Mailboxes live in "
            f"{TEAMS_DIR}/{team.name}/{MAILBOXES_DIR}/<name>/{MAILBOX_FILE} now.",
        ))
    return records
