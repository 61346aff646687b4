"""The embedded mail backend: one bare git repository per agent, written with dulwich
(spec "Where mail lives"; ``docs/architecture.md``, "Mail").

A vault lives at ``WORKFORCE_VAULT_DIR/<org id>/<agent slug>.git`` with one branch,
``main`` (``HEAD`` points at it, so ``git log`` and ``git show`` read it as they are).
Every change is one commit by the office, and its tree holds:

- ``labels.json``: the four mail labels (written by the vault's first commit);
- ``issues/<number>/body.md``: the issue's body, the office's header first
  (``mail.header``);
- ``issues/<number>/meta.json``: ``{number, title, labels, state, createdAt,
  comments: [{id, createdAt}]}``;
- ``issues/<number>/comments/<id>.md``: each comment's body, header first.

Numbers are zero-padded to six digits in paths so a listing sorts. The branch moves by
compare-and-swap (``refs.set_if_equals``, ``refs.add_if_new`` for the first commit):
a writer builds its commit on the tip it read and moves the branch only if the tip is
still that one, else reads the new tip and applies its change again, so two writers,
in two processes or two threads, never lose a commit (and never take the same issue
number). After each commit the vault tells the office (``mail.store.tell_office``)
once the caller's database transaction commits, as a forge's webhook would.

A writer killed mid-write (a SIGKILL of ``serve``) can leave dulwich's lock file behind
(``refs/heads/main.lock``, or an object's ``.lock``), and dulwich then refuses every later
write. So every write holds a shared ``flock`` on the vault's ``workforce-writers`` file
for as long as it may hold a dulwich lock (``_VaultWrite``); a writer that meets a lock
file tries for that flock exclusively, and only when it gets it (no writer is at work in
any process, on any machine whose file system carries ``flock``) and the lock file is older
than ``STALE_LOCK_SECONDS`` (a guard against writers that do not take the flock: ``git``
itself, a machine whose ``flock`` stays local) is the lock stale: it is removed and logged,
naming the file (``clear_stale_lock``). A lock a live writer holds is never touched.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import random
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction
from dulwich.file import FileLocked
from dulwich.index import commit_tree
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Blob, Commit, ObjectID, RawObjectID, ShaFile, Tree
from dulwich.refs import Ref
from dulwich.repo import Repo

from workforce.wire import check_storable

from .constants import LABEL_COLORS, LABELS
from .store import Comment, Issue, StoreError, StoreEvent, tell_office

logger = logging.getLogger(__name__)

BRANCH = Ref(b"refs/heads/main")
OFFICE = b"Workforce Office <office@workforce.invalid>"
FILE_MODE = 0o100644
# A writer that keeps losing the race gives up after this many tries.
MAX_TRIES = 500
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
# An issue's folder: ASCII digits only (``str.isdigit`` also takes "²", which ``int``
# refuses); any other name under ``issues/`` is not an issue and is ignored.
_NUMBER = re.compile(r"[0-9]{1,9}")
# The file in each vault every writer holds a shared flock on while it writes.
WRITERS_FILE = "workforce-writers"
# The packer's gate: held exclusively while a packer waits for the writers flock.
PACKER_FILE = "workforce-packer"
# A dulwich lock file this old (seconds), with no writer at work, is one a killed writer left.
STALE_LOCK_SECONDS = 2.0
# Packing: past this many packs a vault's packs are merged into one (``pack_vault``), and
# the packer waits up to PACK_WAIT_SECONDS for the office's readers and writers to let go.
MAX_PACKS = 16
PACK_WAIT_SECONDS = 1.0


def vault_dir() -> Path:
    """Where the vaults are (``WORKFORCE_VAULT_DIR``; default ``VAR_DIR/vaults``)."""
    return Path(settings.WORKFORCE_VAULT_DIR)


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _issue_dir(number: int) -> str:
    return f"issues/{number:06d}"


def _numbers(names: list[str]) -> list[int]:
    """The issue numbers among folder names under ``issues/`` (see ``_NUMBER``)."""
    return sorted({int(n) for n in names if _NUMBER.fullmatch(n)})


def clear_stale_lock(repo_path: str | os.PathLike, lock_file: str | os.PathLike, *, holding: int | None = None) -> bool:
    """Remove ``lock_file`` (a dulwich ``*.lock`` in the vault at ``repo_path``) when its
    writer is gone: no process holds the vault's writers flock (``WRITERS_FILE``) and the
    file is at least ``STALE_LOCK_SECONDS`` old. Logs a warning naming the file when it
    removes one. ``holding``: the caller's own descriptor holding the shared flock, let go
    while this looks and taken again before it returns. Returns whether it removed it."""
    writers = os.path.join(os.fspath(repo_path), WRITERS_FILE)
    if holding is not None:
        fcntl.flock(holding, fcntl.LOCK_UN)
    try:
        fd = os.open(writers, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # a writer is at work: the lock may be its own
            try:
                age = time.time() - os.stat(lock_file).st_mtime
            except FileNotFoundError:
                return False
            if age < STALE_LOCK_SECONDS:
                return False
            try:
                os.unlink(lock_file)
            except FileNotFoundError:
                return False
            logger.warning(
                "removed the stale vault lock %s: no vault writer is at work and it is %.0f s old (its writer was killed)",
                os.fspath(lock_file),
                age,
            )
            return True
        finally:
            os.close(fd)  # lets go of the flock
    finally:
        if holding is not None:
            fcntl.flock(holding, fcntl.LOCK_SH)


class _VaultWrite:
    """One write to a vault's repository: ``fd`` holds the shared writers flock
    (``_writing``) for as long as the write may hold a dulwich lock."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = fd

    def clear_if_stale(self, exc: FileLocked) -> bool:
        """``clear_stale_lock`` for the lock file ``exc`` met."""
        lock = exc.lockfilename
        return clear_stale_lock(self.path, os.fsdecode(lock), holding=self.fd)


@contextmanager
def _writing(path: Path) -> Iterator[_VaultWrite]:
    """Hold the vault's writers flock, shared, for the duration of one write (or read).
    It is taken through the packer's gate (``PACKER_FILE``, held shared for a moment):
    while a packer waits for the office's readers and writers to let go, no new one
    begins, so a busy vault is still packed (``_exclusive``)."""
    gate = os.open(path / PACKER_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(gate, fcntl.LOCK_SH)
        fd = os.open(path / WRITERS_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    finally:
        os.close(gate)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        yield _VaultWrite(path, fd)
    finally:
        os.close(fd)


def _take(fd: int, deadline: float) -> bool:
    """``flock(fd, LOCK_EX)``, tried until ``deadline`` (a ``time.monotonic()``)."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


@contextmanager
def _exclusive(path: Path, *, wait: float) -> Iterator[bool]:
    """Hold the vault's writers flock exclusively (no office reader or writer at work in
    any process), tried for up to ``wait`` seconds: the packer's gate first
    (``PACKER_FILE``), which stops new readers and writers from beginning, then the
    writers flock, once those at work let go. Yields whether it was taken."""
    gate = os.open(path / PACKER_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fd = os.open(path / WRITERS_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + wait
            yield _take(gate, deadline) and _take(fd, deadline)
        finally:
            os.close(fd)  # lets go of the flock
    finally:
        os.close(gate)


def _add_object(repo: Repo, obj, write: _VaultWrite | None = None) -> None:
    """Write ``obj`` unless the store has it. Two writers writing the same object (the
    same text, the same tree) at once meet on its lock file: the second waits until the
    first has written it; a lock whose writer is gone is cleared (``clear_stale_lock``)."""
    for _ in range(MAX_TRIES):
        if obj.id in repo.object_store:
            return
        try:
            repo.object_store.add_object(obj)
            return
        except FileLocked as exc:
            if write is None or not write.clear_if_stale(exc):
                time.sleep(0.001)
    raise StoreError(f"the object {obj.id.decode()} stayed locked")


_Object = TypeVar("_Object", bound=ShaFile)


def _read(repo: Repo, sha: ObjectID, kind: type[_Object]) -> _Object:
    """The object ``sha`` of ``repo``, which must be a ``kind`` (a Commit, Tree, Blob).

    Raises:
        KeyError: no such object. StoreError: it is another kind (a damaged vault).
    """
    obj = repo.object_store[sha]
    if not isinstance(obj, kind):
        raise StoreError(f"the object {sha.decode()} is a {type(obj).__name__}, not a {kind.__name__}")
    return obj


class _Files:
    """The branch tip's tree as a flat ``{path: (mode, sha)}`` map, read lazily, plus
    what a change writes."""

    def __init__(self, repo: Repo, tree_id: ObjectID | None, write: _VaultWrite | None = None):
        self.repo = repo
        self.write = write
        self.entries: dict[bytes, tuple[int, ObjectID]] = {}
        if tree_id is not None:
            self._walk(tree_id, b"")

    def _walk(self, tree_id: ObjectID, prefix: bytes) -> None:
        tree = _read(self.repo, tree_id, Tree)
        for entry in tree.items():
            path = prefix + entry.path
            if entry.mode & 0o170000 == 0o040000:
                self._walk(entry.sha, path + b"/")
            else:
                self.entries[path] = (entry.mode, entry.sha)

    def get(self, path: str) -> bytes | None:
        found = self.entries.get(path.encode())
        return None if found is None else _read(self.repo, found[1], Blob).data

    def get_json(self, path: str) -> Any:
        data = self.get(path)
        return None if data is None else json.loads(data)

    def put(self, path: str, data: bytes | str) -> None:
        blob = Blob.from_string(data.encode() if isinstance(data, str) else data)
        _add_object(self.repo, blob, self.write)
        self.entries[path.encode()] = (FILE_MODE, blob.id)

    def put_json(self, path: str, value: Any) -> None:
        self.put(path, json.dumps(value, indent=2, sort_keys=True) + "\n")

    def names(self, prefix: str) -> list[str]:
        start = prefix.encode()
        return sorted({p[len(start) :].split(b"/")[0].decode() for p in self.entries if p.startswith(start)})

    def tree(self) -> ObjectID:
        return commit_tree(
            _LockTolerantStore(self.repo, self.write), [(p, sha, mode) for p, (mode, sha) in sorted(self.entries.items())]
        )


class _LockTolerantStore:
    """What ``commit_tree`` writes its trees through: ``_add_object``."""

    def __init__(self, repo: Repo, write: _VaultWrite | None = None):
        self.repo = repo
        self.write = write

    max_tree_depth: int | None = None

    def add_object(self, obj: ShaFile) -> None:
        _add_object(self.repo, obj, self.write)

    # The rest of dulwich's ObjectContainer (commit_tree asks for one; it only adds):
    # the repository's own store answers.
    def add_objects(self, objects: Sequence[tuple[ShaFile, str | None]], progress: Callable[..., None] | None = None) -> None:
        for obj, _path in objects:
            self.add_object(obj)

    def __contains__(self, sha1: ObjectID) -> bool:
        return sha1 in self.repo.object_store

    def __getitem__(self, sha1: ObjectID | RawObjectID) -> ShaFile:
        return self.repo.object_store[sha1]

    def peel(self, sha: ObjectID | RawObjectID) -> tuple[ShaFile, ShaFile]:
        return self.repo.object_store.peel(sha)

    def get_commit_graph(self) -> None:
        return None


@dataclass(frozen=True)
class VaultChanges:
    """What ``VaultStore.changes_since`` read: ``commit``, the newest settled commit (None
    when the vault has none yet), the issue numbers changed up to it, and those of them
    opened since."""

    commit: str | None
    changed: list[int] = field(default_factory=list)
    opened: list[int] = field(default_factory=list)


class VaultStore:
    """The embedded ``MailStore``: see the module docstring.

    Args:
        root: the folder the vaults live in (default ``vault_dir()``).
        notify: tell the office of each change (default True; the reindex test and a
            bare writer pass False).
    """

    def __init__(self, root: str | os.PathLike | None = None, *, notify: bool = True):
        self.root = Path(root) if root is not None else vault_dir()
        self.notify = notify

    # ------------------------------------------------------------------ the repository

    def path(self, org_id: str, vault: str) -> Path:
        """The bare repository of ``vault`` in ``org_id``. Raises StoreError for a name
        that is not a plain folder name."""
        for name in (org_id, vault):
            if not _SAFE.match(name or "") or ".." in name:
                raise StoreError(f"{name!r} can't name a vault")
        return self.root / org_id / f"{vault}.git"

    def _repo(self, org_id: str, vault: str, *, create: bool) -> Repo:
        path = self.path(org_id, vault)
        if not (path / "HEAD").exists():
            if not create:
                raise StoreError(f"there is no vault {vault} in {org_id}")
            # Made under a temporary name and renamed into place, so two writers
            # creating the same vault at once never see a half-made repository.
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.parent / f".{path.name}.{uuid.uuid4().hex}"
            repo = Repo.init_bare(str(tmp), mkdir=True)
            repo.refs.set_symbolic_ref(Ref(b"HEAD"), BRANCH)
            repo.close()
            try:
                os.rename(tmp, path)
            except OSError:
                shutil.rmtree(tmp, ignore_errors=True)
                if not (path / "HEAD").exists():
                    raise
        return Repo(str(path))

    def _tip(self, repo: Repo) -> ObjectID | None:
        try:
            return repo.refs[BRANCH]
        except KeyError:
            return None

    def _files(self, repo: Repo, tip: ObjectID | None) -> _Files:
        return _Files(repo, _read(repo, tip, Commit).tree if tip is not None else None)

    def _change(self, org_id: str, vault: str, message: str, mutate: Callable[[_Files], Any]) -> tuple[Any, bytes]:
        """Apply ``mutate`` to the branch tip as one commit, moved in by
        compare-and-swap; on a lost race read the new tip and apply it again. Returns
        ``(what mutate returned, commit id)``."""
        repo = self._repo(org_id, vault, create=True)
        held = None  # the last lock file met, for the message when the vault stays busy
        try:
            with _writing(Path(repo.path)) as write:
                for attempt in range(MAX_TRIES):
                    tip = self._tip(repo)
                    files = self._files(repo, tip)
                    files.write = write  # what it writes meets a stale lock: clear it
                    if not files.get("labels.json"):
                        files.put_json("labels.json", [{"name": n, "color": LABEL_COLORS[n]} for n in LABELS])
                    result = mutate(files)
                    commit = Commit()
                    commit.tree = files.tree()
                    commit.parents = [tip] if tip is not None else []
                    commit.author = commit.committer = OFFICE
                    commit.author_time = commit.commit_time = int(time.time())
                    commit.author_timezone = commit.commit_timezone = 0
                    commit.encoding = b"UTF-8"
                    commit.message = message.encode() + b"\n"
                    _add_object(repo, commit, write)
                    try:
                        if tip is None:
                            moved = repo.refs.add_if_new(BRANCH, commit.id)
                        else:
                            moved = repo.refs.set_if_equals(BRANCH, tip, commit.id)
                    except FileLocked as exc:
                        moved = False
                        held = os.fsdecode(exc.lockfilename)
                        if write.clear_if_stale(exc):
                            continue
                    if moved:
                        return result, commit.id
                    time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 20)))
            where = f" (the lock file {held} stayed: a writer at work holds it)" if held else ""
            logger.warning("the vault %s in %s stayed busy through %s tries%s", vault, org_id, MAX_TRIES, where)
            raise StoreError(f"the vault {vault} in {org_id} stayed busy through {MAX_TRIES} tries{where}")
        finally:
            repo.close()

    def _told(self, action: str, org_id: str, vault: str, issue: Issue, commit: bytes) -> Issue:
        if self.notify:
            event = StoreEvent(action=action, org_id=org_id, vault=vault, issue=issue, delivery=commit.decode())
            transaction.on_commit(lambda: tell_office(event))
        return issue

    # ------------------------------------------------------------------ issues

    @staticmethod
    def _read_issue(files: _Files, number: int, vault: str = "", writers: dict[bytes, bool] | None = None) -> Issue:
        """Issue ``number`` from ``files``. ``writers``: for each text's path, whether the
        office wrote it (``_office_wrote``; None: the office's own change, all its).
        Raises StoreError naming the vault and issue when there is none or its files
        are not what the office writes (a hand-made ``meta.json``)."""
        base = _issue_dir(number)
        where = f"issue #{number} on {vault or 'the vault'}"
        try:
            meta = files.get_json(f"{base}/meta.json")
            if meta is None:
                raise StoreError(f"there is no {where}")
            if not isinstance(meta, dict) or meta.get("number") != number:
                raise StoreError(f"the meta.json of {where} is not an issue's")
            by = writers or {}
            comments = tuple(
                Comment(
                    id=int(c["id"]),
                    body=(files.get(f"{base}/comments/{int(c['id']):06d}.md") or b"").decode(),
                    created_at=datetime.fromisoformat(c["createdAt"]),
                    by_office=by.get(f"{base}/comments/{int(c['id']):06d}.md".encode(), True),
                )
                for c in meta.get("comments", [])
            )
            return Issue(
                number=number,
                title=str(meta["title"]),
                body=(files.get(f"{base}/body.md") or b"").decode(),
                labels=tuple(str(label) for label in meta["labels"]),
                state=str(meta["state"]),
                created_at=datetime.fromisoformat(meta["createdAt"]),
                comments=comments,
                by_office=by.get(f"{base}/body.md".encode(), True),
            )
        except StoreError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            # json.JSONDecodeError is a ValueError.
            raise StoreError(f"{where} is malformed ({type(exc).__name__}: {exc})") from exc

    def _office_wrote(self, repo: Repo, tip: ObjectID | None, files: _Files, numbers: list[int]) -> dict[bytes, bool]:
        """For each text of issues ``numbers`` on ``tip`` (the body and each comment):
        whether the commit that gave it its present content is the office's
        (``OFFICE``, the committer every change this class makes carries). The office
        never rewrites a body or a comment, so a text a hand-made commit wrote or
        changed reads False. One walk back along the (linear) branch, stopping once
        every path is accounted for."""
        wanted = {}
        for number in numbers:
            base = _issue_dir(number).encode() + b"/"
            for path, (_, sha) in files.entries.items():
                if path.startswith(base) and (path == base + b"body.md" or path.startswith(base + b"comments/")):
                    wanted[path] = sha
        found: dict[bytes, bool] = {}
        at = tip
        while at is not None and len(found) < len(wanted):
            commit = _read(repo, at, Commit)
            parent = commit.parents[0] if commit.parents else None
            parent_tree = _read(repo, parent, Commit).tree if parent is not None else None
            for path, sha in wanted.items():
                if path in found:
                    continue
                before = None
                if parent_tree is not None:
                    try:
                        before = tree_lookup_path(repo.object_store.__getitem__, parent_tree, path)[1]
                    except KeyError:
                        before = None
                if before != sha:  # this commit wrote the path's present content
                    found[path] = commit.committer == OFFICE
            at = parent
        return found

    def ensure_vault(self, org_id: str, vault: str) -> None:
        """Create the vault with its four labels when it has no commit yet."""
        repo = self._repo(org_id, vault, create=True)
        try:
            if self._tip(repo) is not None:
                return
        finally:
            repo.close()
        self._change(org_id, vault, "mail: the vault's labels", lambda files: None)

    def create_issue(self, org_id: str, vault: str, *, title: str, body: str, labels: list[str]) -> Issue:
        """Open issue ``n + 1`` (n the highest number on the tip the commit lands on).
        Raises Refusal("invalid-input") for text the index could not keep (below)."""
        _refuse_unstorable(title=title, body=body, labels=list(labels))
        created = _now()

        def mutate(files: _Files) -> Issue:
            number = max(_numbers(files.names("issues/")), default=0) + 1
            base = _issue_dir(number)
            files.put(f"{base}/body.md", body)
            meta = {
                "number": number,
                "title": title,
                "labels": list(labels),
                "state": "open",
                "createdAt": created.isoformat(),
                "comments": [],
            }
            files.put_json(f"{base}/meta.json", meta)
            return self._read_issue(files, number, vault)

        issue, commit = self._change(org_id, vault, f"mail: open an issue: {' '.join(title.split())[:72]}", mutate)
        return self._told("opened", org_id, vault, issue, commit)

    def _update(self, org_id: str, vault: str, number: int, message: str, action: str, edit: Callable[[_Files, dict], None]):
        def mutate(files: _Files) -> Issue:
            base = _issue_dir(number)
            meta = files.get_json(f"{base}/meta.json")
            if meta is None:
                raise StoreError(f"there is no issue #{number} on {vault}")
            if not isinstance(meta, dict) or not isinstance(meta.get("comments"), list):
                raise StoreError(f"the meta.json of issue #{number} on {vault} is not an issue's")
            edit(files, meta)
            files.put_json(f"{base}/meta.json", meta)
            return self._read_issue(files, number, vault)

        if not (self.path(org_id, vault) / "HEAD").exists():
            raise StoreError(f"there is no vault {vault} in {org_id}")
        issue, commit = self._change(org_id, vault, message, mutate)
        return self._told(action, org_id, vault, issue, commit)

    def comment(self, org_id: str, vault: str, number: int, body: str) -> Issue:
        """Add comment ``k + 1`` to issue ``number``. Raises Refusal("invalid-input") for
        text the index could not keep (below)."""
        _refuse_unstorable(body=body)
        created = _now()

        def edit(files: _Files, meta: dict) -> None:
            comment_id = max((c["id"] for c in meta["comments"]), default=0) + 1
            files.put(f"{_issue_dir(number)}/comments/{comment_id:06d}.md", body)
            meta["comments"].append({"id": comment_id, "createdAt": created.isoformat()})

        return self._update(org_id, vault, number, f"mail: comment on #{number}", "commented", edit)

    def set_labels(self, org_id: str, vault: str, number: int, labels: list[str]) -> Issue:
        """Replace issue ``number``'s labels. Raises Refusal("invalid-input") for text
        the index could not keep (below)."""
        _refuse_unstorable(labels=list(labels))

        def edit(files: _Files, meta: dict) -> None:
            meta["labels"] = list(labels)

        return self._update(
            org_id, vault, number, f"mail: label #{number} {', '.join(labels) or '(none)'}", "label_updated", edit
        )

    def close(self, org_id: str, vault: str, number: int) -> Issue:
        """Close issue ``number``."""

        def edit(files: _Files, meta: dict) -> None:
            meta["state"] = "closed"

        return self._update(org_id, vault, number, f"mail: close #{number}", "closed", edit)

    def get_issue(self, org_id: str, vault: str, number: int) -> Issue:
        """Issue ``number`` as the branch tip has it, with who wrote its texts
        (``Issue.by_office``). Raises StoreError for a missing or malformed issue."""
        repo = self._repo(org_id, vault, create=False)
        try:
            with _writing(Path(repo.path)):  # no packer deletes an object this reads
                tip = self._tip(repo)
                files = self._files(repo, tip)
                return self._read_issue(files, number, vault, self._office_wrote(repo, tip, files, [number]))
        finally:
            repo.close()

    def list_issues(self, org_id: str, vault: str) -> list[Issue]:
        """Every issue on the branch tip, by number (as ``get_issue``). A malformed issue
        is logged and left out, so one hand-made folder does not hide the others."""
        repo = self._repo(org_id, vault, create=False)
        try:
            with _writing(Path(repo.path)):  # no packer deletes an object this reads
                tip = self._tip(repo)
                files = self._files(repo, tip)
                numbers = _numbers(files.names("issues/"))
                writers = self._office_wrote(repo, tip, files, numbers)
                issues = []
                for n in numbers:
                    try:
                        issues.append(self._read_issue(files, n, vault, writers))
                    except StoreError:
                        logger.warning(
                            "left out issue #%s of the vault %s in %s: it is malformed", n, vault, org_id, exc_info=True
                        )
                return issues
        finally:
            repo.close()

    def list_vaults(self) -> list[tuple[str, str]]:
        """Every ``(org id, agent slug)`` with a vault under the root, sorted."""
        found: list[tuple[str, str]] = []
        if not self.root.is_dir():
            return found
        for org in sorted(self.root.iterdir()):
            if not org.is_dir() or org.name.startswith("."):
                continue
            for repo in sorted(org.iterdir()):
                if repo.name.endswith(".git") and not repo.name.startswith(".") and (repo / "HEAD").exists():
                    found.append((org.name, repo.name[: -len(".git")]))
        return found

    def changes_since(self, org_id: str, vault: str, since: str | None, *, settled_before: float) -> VaultChanges:
        """What changed on the branch after commit ``since`` (None: from the start, or
        when ``since`` is not on the branch), up to the newest commit made before
        ``settled_before`` (a Unix time, seconds): a writer whose commit is newer may
        still be telling the office itself. Read by the vault sweep (``mail.repair``).
        One tree comparison, whatever the number of commits in between."""
        repo = self._repo(org_id, vault, create=False)
        try:
            with _writing(Path(repo.path)):  # no packer deletes an object this reads
                return self._changes_since(repo, since, settled_before)
        finally:
            repo.close()

    def _changes_since(self, repo: Repo, since: str | None, settled_before: float) -> VaultChanges:
        """``changes_since`` on an open repository, its flock held."""
        settled = None
        at = self._tip(repo)
        while at is not None:  # the branch is linear: each commit has one parent
            commit = _read(repo, at, Commit)
            if commit.commit_time < settled_before:
                settled = commit
                break
            at = commit.parents[0] if commit.parents else None
        if settled is None:
            return VaultChanges(commit=None)
        base: Commit | None = None
        if since and since.encode() != settled.id:
            try:
                base = _read(repo, ObjectID(since.encode()), Commit)
            except (KeyError, ValueError, StoreError):  # unknown, malformed, or not a commit
                base = None
        elif since:
            return VaultChanges(commit=since)
        old_tree = base.tree if base is not None else None
        changed: set[int] = set()
        opened: set[int] = set()
        for change in repo.object_store.tree_changes(old_tree, settled.tree):
            (old_path, new_path) = change[0]
            path = (new_path or old_path or b"").decode()
            parts = path.split("/")
            if len(parts) < 3 or parts[0] != "issues" or not _NUMBER.fullmatch(parts[1]):
                continue
            changed.add(int(parts[1]))
            if parts[2] == "meta.json" and old_path is None:
                opened.add(int(parts[1]))
        return VaultChanges(commit=settled.id.decode(), changed=sorted(changed), opened=sorted(opened))

    def commits(self, org_id: str, vault: str) -> int:
        """How many commits the branch has (for tests and the admin)."""
        repo = self._repo(org_id, vault, create=False)
        try:
            with _writing(Path(repo.path)):
                tip = self._tip(repo)
                return 0 if tip is None else sum(1 for _ in repo.get_walker(include=[tip]))
        finally:
            repo.close()

    def pack_vault(self, org_id: str, vault: str, *, threshold: int | None = None) -> int:
        """Pack the vault's loose objects into one git pack when it holds at least
        ``threshold`` of them (default ``WORKFORCE_VAULT_PACK_LOOSE``; 0 or less: never),
        and merge its packs into one once it has more than ``MAX_PACKS``: dulwich's
        ``pack_loose_objects`` and ``repack``, under the vault's writers flock held
        exclusively, so no office writer adds an object and no office reader looks for
        one the packer is moving (every office read holds the flock shared). Waits up to
        ``PACK_WAIT_SECONDS`` for them; a vault that stays busy is packed by a later
        call. Returns the number of objects packed (0: under the threshold, or busy).
        Raises StoreError for a vault that does not exist."""
        threshold = int(settings.WORKFORCE_VAULT_PACK_LOOSE) if threshold is None else threshold
        if threshold <= 0:
            return 0
        repo = self._repo(org_id, vault, create=False)
        try:
            objects = repo.object_store
            if objects.count_loose_objects() < threshold:
                return 0
            with _exclusive(Path(repo.path), wait=PACK_WAIT_SECONDS) as held:
                if not held or objects.count_loose_objects() < threshold:  # busy, or packed meanwhile
                    return 0
                packed = objects.pack_loose_objects()
                if len(objects.packs) > MAX_PACKS:
                    objects.repack()
            logger.info("packed %s loose objects of the vault %s in %s", packed, vault, org_id)
            return packed
        finally:
            repo.close()


def _refuse_unstorable(**texts: Any) -> None:
    """The vault never takes a write the office's index would refuse (``workforce.wire``:
    a NUL, which git also flags in a commit message, or a lone surrogate, which UTF-8
    cannot encode): checked before any object is written, whoever calls.

    Raises:
        Refusal("invalid-input").
    """
    check_storable(texts, label="the mail")


def embedded_store() -> VaultStore:
    """``WORKFORCE_MAIL_STORE``'s default: the embedded vault under ``vault_dir()``."""
    return VaultStore()
