"""The room template's other home: ``org/resources/projects.yaml`` (spec "A room per
project": "declared once for the organization, beside the projects collection").

The file is the spec's ``defineProjectsCollection({talk: {seats, charter}})`` written as
YAML and read with the tree's strict loader (``workforce.tree.strict_yaml_load``: ``no``
stays a string, a duplicate key is an error)::

    talk:
      seats: [support.lead, chief-of-staff]
      charter: Plan the work, and say what is blocked.

Reading it checks only that it is YAML; what it declares is checked when the roster is
bound (``mailboxes.binder.bind_roster``), together with the mailboxes, so every problem
is reported at once.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from workforce.tree import MAILBOX_LOAD_FAILED, FrontmatterError, LoadError, os_reason, strict_yaml_load

PROJECTS_FILE = "org/resources/projects.yaml"
PROJECTS_COLLECTION = "projects"


@dataclass(frozen=True)
class ResourceDeclaration:
    """One organization resource file as read: ``site`` (its path from the root,
    ``org/resources/projects.yaml``), ``collection`` (``projects``) and ``declared``
    (the loaded YAML, unchecked)."""

    site: str
    collection: str
    declared: object


def read_org_resources(root: str | os.PathLike) -> tuple[list[ResourceDeclaration], list[LoadError]]:
    """Read ``<root>/org/resources/projects.yaml`` when it exists.

    Returns:
        ``(resources, errors)``: the file's declaration (none when the file is absent),
        and one ``LoadError`` (kind ``mailbox-load-failed``, at the file's path) when it
        is a link, not a file, unreadable, or not valid YAML. No link on the way is
        followed.
    """
    path = Path(root)
    for part in PROJECTS_FILE.split("/"):
        path = path / part
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            return [], [LoadError(MAILBOX_LOAD_FAILED, PROJECTS_FILE, f"{PROJECTS_FILE} cannot be read ({os_reason(exc)}).")]
        if stat.S_ISLNK(st.st_mode):
            return [], [
                LoadError(
                    MAILBOX_LOAD_FAILED,
                    PROJECTS_FILE,
                    f"{PROJECTS_FILE}: a symbolic link sits on its path, and links in the tree are never followed.",
                )
            ]
    if not stat.S_ISREG(st.st_mode):
        return [], [LoadError(MAILBOX_LOAD_FAILED, PROJECTS_FILE, f"{PROJECTS_FILE} is not a file.")]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else "it is not UTF-8 text"
        return [], [LoadError(MAILBOX_LOAD_FAILED, PROJECTS_FILE, f"{PROJECTS_FILE} cannot be read ({reason}).")]
    try:
        declared = strict_yaml_load(text, PROJECTS_FILE)
    except FrontmatterError as exc:
        return [], [LoadError(MAILBOX_LOAD_FAILED, PROJECTS_FILE, str(exc).replace("the frontmatter", "the file"))]
    return [ResourceDeclaration(PROJECTS_FILE, PROJECTS_COLLECTION, declared)], []
