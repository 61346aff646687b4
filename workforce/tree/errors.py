"""What reading the workforce tree reports: ``LoadError`` and its kinds, and the two
exceptions a reader uses (spec "Mailboxes on disk" / "When a folder is wrong")."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "LOAD_ERROR_KINDS",
    "MAILBOX_LOAD_FAILED",
    "PRE_RENAME_RECORD",
    "REFUSED_DECLARATION",
    "UNREADABLE_SLOT",
    "LoadError",
    "RecordError",
    "WorkforceRootError",
]

MAILBOX_LOAD_FAILED = "mailbox-load-failed"
REFUSED_DECLARATION = "refused-declaration"
UNREADABLE_SLOT = "unreadable-slot"
PRE_RENAME_RECORD = "pre-rename-record"
LOAD_ERROR_KINDS = (MAILBOX_LOAD_FAILED, REFUSED_DECLARATION, UNREADABLE_SLOT, PRE_RENAME_RECORD)


@dataclass(frozen=True)
class LoadError:
    """One entry of ``errors``: a folder that should have produced a record and did not.

    ``kind`` is one of ``LOAD_ERROR_KINDS`` (or a reader's own, e.g. the worker reader's
    ``worker-load-failed``); ``path`` is slash-separated and relative to the root (it
    starts at ``teams/`` or ``org/``), naming the folder (or old file) to go and fix;
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
    """One folder or record file failed; ``error`` is its ``LoadError``. A reader raises
    it from the walking helpers and collects ``error`` into its list."""

    def __init__(self, error: LoadError) -> None:
        self.error = error
        super().__init__(error.message)
