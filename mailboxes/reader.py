"""Reading the mailboxes of the workforce tree from disk (the spec's
``@flow-state-dev/workforce/loader`` ``readMailboxesDirectory``).

``read_mailboxes_directory`` walks ``<root>/teams/<team>/mailboxes/<mailbox>/MAILBOX.md``
and returns one ``MailboxManifest`` per mailbox plus a list of ``LoadError`` for every
folder that should have produced a mailbox and did not. Reading the tree opens nothing.
It walks the tree with the kernel's filesystem layer (``workforce.tree``: no link is
followed, names follow the tree's rule, frontmatter is strict YAML), as the worker
reader (``seats.workers``) does.

Spec: "Mailboxes on disk" (through "Treat a non-empty errors as fatal") and "Upgrading
from channels" (Files).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workforce.tree import (
    MAILBOX_LOAD_FAILED,
    PRE_RENAME_RECORD,
    REFUSED_DECLARATION,
    Entry,
    LoadError,
    RecordError,
    exists_nofollow,
    folder_name_error,
    linked_folder_error,
    list_dir_nofollow,
    name_problem,
    open_root,
    open_slot,
    os_reason,
    read_record_file,
)

__all__ = [
    "MailboxManifest",
    "read_mailboxes_directory",
]

MAILBOX_FILE = "MAILBOX.md"
CHANNEL_FILE = "CHANNEL.md"
TEAMS_DIR = "teams"
MAILBOXES_DIR = "mailboxes"
CHANNELS_DIR = "channels"


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
    top = open_root(root)
    mailboxes: list[MailboxManifest] = []
    errors: list[LoadError] = []
    try:
        teams = open_slot(top.get(TEAMS_DIR))
    except RecordError as exc:
        return [], [exc.error]
    for team in teams or ():
        if team.kind in ("file", "other"):
            continue  # a loose file in teams/
        try:
            team_entries = {entry.name: entry for entry in open_slot(team) or ()}  # (team is present: never None)
            if CHANNELS_DIR in team_entries:
                errors.extend(_pre_rename_channels(team, team_entries[CHANNELS_DIR]))
            boxes = open_slot(team_entries.get(MAILBOXES_DIR))
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
    team: Entry,
    team_problem: str | None,
    box: Entry,
    mailboxes: list[MailboxManifest],
    errors: list[LoadError],
) -> None:
    """Read one ``teams/<team>/mailboxes/<name>/`` folder into ``mailboxes`` or ``errors``."""
    try:
        has_channel_file = exists_nofollow(box.path / CHANNEL_FILE)
    except OSError as exc:
        errors.append(
            LoadError(
                MAILBOX_LOAD_FAILED,
                box.rel,
                f"Mailbox folder {box.rel} cannot be read ({os_reason(exc)}).",
            )
        )
        return
    if has_channel_file:
        errors.append(_pre_rename_file(f"{box.rel}/{CHANNEL_FILE}", f"{box.rel}/{MAILBOX_FILE}"))

    misnamed = folder_name_error(
        box,
        team_problem,
        kind=MAILBOX_LOAD_FAILED,
        noun="Mailbox",
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
            errors.append(
                LoadError(
                    MAILBOX_LOAD_FAILED,
                    box.rel,
                    f'Mailbox folder "{box.name}" has no {MAILBOX_FILE}. A mailbox folder '
                    f"declares one mailbox, and every mailbox is a {MAILBOX_FILE}. Add "
                    f"{box.rel}/{MAILBOX_FILE} with a description: in its frontmatter, or "
                    f"move the folder out of teams/{team.name}/{MAILBOXES_DIR}/.",
                )
            )
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
        found.append(
            LoadError(
                REFUSED_DECLARATION,
                folder_rel,
                f"{file_rel} declares system:, which a mailbox cannot declare. The charter "
                "is the body below the frontmatter; move that text there.",
            )
        )
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
        found.append(
            LoadError(
                MAILBOX_LOAD_FAILED,
                folder_rel,
                f"{file_rel} {what}. description is the one key a {MAILBOX_FILE} requires: "
                "say in a line what the mailbox is for.",
            )
        )
    return found


# --------------------------------------------------------------------------- pre-rename


def _pre_rename_file(old_rel: str, new_rel: str) -> LoadError:
    return LoadError(
        PRE_RENAME_RECORD,
        old_rel,
        f"{old_rel} is a channel record from before mailboxes were renamed, and it is not read. It belongs at {new_rel} now.",
    )


def _pre_rename_channels(team: Entry, channels: Entry) -> list[LoadError]:
    """One pre-rename-record per ``channels/<name>/CHANNEL.md``, or one for the
    ``channels`` entry itself when it holds none (or is a link, a file, or unlistable).
    Nothing inside an old file is read."""
    records: list[LoadError] = []
    if channels.kind == "dir":
        try:
            subfolders = list_dir_nofollow(channels.path, channels.rel)
        except OSError:
            subfolders = []
        for sub in subfolders:
            if sub.kind != "dir":
                continue
            try:
                found = exists_nofollow(sub.path / CHANNEL_FILE)
            except OSError:
                found = False
            if found:
                records.append(
                    _pre_rename_file(
                        f"{sub.rel}/{CHANNEL_FILE}",
                        f"{TEAMS_DIR}/{team.name}/{MAILBOXES_DIR}/{sub.name}/{MAILBOX_FILE}",
                    )
                )
    if not records:
        records.append(
            LoadError(
                PRE_RENAME_RECORD,
                channels.rel,
                f"{channels.rel} is a channels folder from before mailboxes were renamed, and "
                f"nothing in it is read. Mailboxes live in "
                f"{TEAMS_DIR}/{team.name}/{MAILBOXES_DIR}/<name>/{MAILBOX_FILE} now.",
            )
        )
    return records
