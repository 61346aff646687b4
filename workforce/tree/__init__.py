"""The workforce tree on disk: the kernel's filesystem layer (docs/architecture.md "Apps").

Every reader of the tree (the mailbox reader ``mailboxes.reader``, the worker reader
``seats.workers``) goes through these public names and nothing else:

- ``frontmatter``: strict YAML frontmatter (``split_frontmatter``, ``FrontmatterError``);
- ``names``: the name rule for team, mailbox and worker folders, and seat ids;
- ``walk``: listing folders and reading record files without following links
  (``open_root``, ``open_slot``, ``read_record_file``), and the errors every reader words
  the same way (``linked_folder_error``, ``folder_name_error``);
- ``errors``: ``LoadError`` and its kinds, ``RecordError``, ``WorkforceRootError``.

Spec: "Mailboxes on disk" ("A mailbox's id comes from the folders", "What the file is
checked for", "When a folder is wrong").
"""

from __future__ import annotations

from .errors import (
    LOAD_ERROR_KINDS,
    MAILBOX_LOAD_FAILED,
    PRE_RENAME_RECORD,
    REFUSED_DECLARATION,
    UNREADABLE_SLOT,
    LoadError,
    RecordError,
    WorkforceRootError,
)
from .frontmatter import FrontmatterError, StrictSafeLoader, split_frontmatter, strict_yaml_load
from .names import NAME_MAX_LENGTH, NAME_RULE, RESERVED_NAMES, did_you_mean, is_seat_id, is_valid_name, name_problem
from .walk import (
    LINK_ADVICE,
    Entry,
    exists_nofollow,
    folder_name_error,
    is_dropping,
    join_rel,
    linked_folder_error,
    list_dir_nofollow,
    open_root,
    open_slot,
    os_reason,
    read_record_file,
)

__all__ = [
    "LINK_ADVICE",
    "LOAD_ERROR_KINDS",
    "MAILBOX_LOAD_FAILED",
    "NAME_MAX_LENGTH",
    "NAME_RULE",
    "PRE_RENAME_RECORD",
    "REFUSED_DECLARATION",
    "RESERVED_NAMES",
    "UNREADABLE_SLOT",
    "Entry",
    "FrontmatterError",
    "LoadError",
    "RecordError",
    "StrictSafeLoader",
    "WorkforceRootError",
    "did_you_mean",
    "exists_nofollow",
    "folder_name_error",
    "is_dropping",
    "is_seat_id",
    "is_valid_name",
    "join_rel",
    "linked_folder_error",
    "list_dir_nofollow",
    "name_problem",
    "open_root",
    "open_slot",
    "os_reason",
    "read_record_file",
    "split_frontmatter",
    "strict_yaml_load",
]
