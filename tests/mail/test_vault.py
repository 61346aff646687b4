"""The embedded vault (spec "Where mail lives"): a real bare git repository per agent
that the git command line reads, written by compare-and-swap so that two writers in two
processes never lose a commit (beside a control that moves the branch blindly and
does)."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import time

import pytest
from dulwich.file import FileLocked
from dulwich.objects import Commit

from mail.constants import LABEL_NEW, LABEL_REPLIED, LABELS
from mail.store import StoreError
from mail.vault import BRANCH, VaultStore


def git(repo, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def test_git_reads_the_vault(store):
    issue = store.create_issue("default", "eng.alpha", title="Printer", body="From: human:ann\n\nIt jams.", labels=[LABEL_NEW])
    store.comment("default", "eng.alpha", issue.number, "From: agent:eng.alpha\n\nOn it.")
    store.set_labels("default", "eng.alpha", issue.number, [LABEL_REPLIED])
    repo = store.path("default", "eng.alpha")
    assert repo.name == "eng.alpha.git" and (repo / "HEAD").exists() and not (repo / ".git").exists()  # bare

    log = git(repo, "log", "--format=%an|%s")
    assert log.splitlines() == [
        "Workforce Office|mail: label #1 mail:replied",
        "Workforce Office|mail: comment on #1",
        "Workforce Office|mail: open an issue: Printer",
    ]
    assert git(repo, "show", "HEAD:issues/000001/body.md") == "From: human:ann\n\nIt jams."
    assert git(repo, "show", "HEAD:issues/000001/comments/000001.md") == "From: agent:eng.alpha\n\nOn it."
    meta = json.loads(git(repo, "show", "HEAD:issues/000001/meta.json"))
    assert meta["labels"] == [LABEL_REPLIED] and meta["title"] == "Printer" and meta["state"] == "open"
    assert meta["comments"][0]["id"] == 1
    labels = json.loads(git(repo, "show", "HEAD:labels.json"))
    assert [label["name"] for label in labels] == list(LABELS) == ["mail:new", "mail:working", "mail:replied", "mail:closed"]
    # The first commit's labels, read from history.
    assert json.loads(git(repo, "show", "HEAD~2:issues/000001/meta.json"))["labels"] == [LABEL_NEW]
    git(repo, "fsck", "--strict")
    assert git(repo, "symbolic-ref", "HEAD").strip() == BRANCH.decode()


def test_issues_read_back_and_close(store):
    store.ensure_vault("default", "eng.beta")
    assert store.list_issues("default", "eng.beta") == []
    first = store.create_issue("default", "eng.beta", title="One", body="b1", labels=[LABEL_NEW])
    second = store.create_issue("default", "eng.beta", title="Two", body="b2", labels=[])
    assert (first.number, second.number) == (1, 2)
    closed = store.close("default", "eng.beta", 1)
    assert closed.state == "closed"
    assert [(i.number, i.state, i.labels) for i in store.list_issues("default", "eng.beta")] == [
        (1, "closed", (LABEL_NEW,)),
        (2, "open", ()),
    ]
    assert store.list_vaults() == [("default", "eng.beta")]
    with pytest.raises(StoreError):
        store.get_issue("default", "eng.beta", 3)
    with pytest.raises(StoreError):
        store.comment("default", "nobody", 1, "x")
    with pytest.raises(StoreError):
        store.path("default", "../etc")


class PausingVault(VaultStore):
    """Waits between reading the branch tip and moving it, so writers overlap."""

    def _files(self, repo, tip):
        files = super()._files(repo, tip)
        time.sleep(0.003)
        return files


class BlindVault(PausingVault):
    """The control: moves the branch to its commit whatever the tip became meanwhile."""

    def _change(self, org_id, vault, message, mutate):
        repo = self._repo(org_id, vault, create=True)
        try:
            tip = self._tip(repo)
            files = self._files(repo, tip)
            result = mutate(files)
            commit = Commit()
            commit.tree = files.tree()
            commit.parents = [tip] if tip is not None else []
            commit.author = commit.committer = b"Control <control@invalid>"
            commit.author_time = commit.commit_time = int(time.time())
            commit.author_timezone = commit.commit_timezone = 0
            commit.message = message.encode()
            repo.object_store.add_object(commit)  # unique: its author time and parent
            while True:
                try:
                    repo.refs[BRANCH] = commit.id
                    return result, commit.id
                except FileLocked:
                    time.sleep(0.001)
        finally:
            repo.close()


WRITERS = 4
EACH = 12


def _write(kind: str, root: str, writer: int, start) -> None:
    store = (BlindVault if kind == "blind" else PausingVault)(root, notify=False)
    start.wait()
    for n in range(EACH):
        store.comment("default", "eng.alpha", 1, f"writer {writer} comment {n}")
        if n % 4 == 0:
            store.create_issue("default", "eng.alpha", title=f"w{writer}-{n}", body="x", labels=[])


def race(kind: str, root) -> VaultStore:
    store = VaultStore(root, notify=False)
    store.create_issue("default", "eng.alpha", title="Shared", body="x", labels=[LABEL_NEW])
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(WRITERS)
    procs = [ctx.Process(target=_write, args=(kind, str(root), w, start)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return store


def test_two_writers_in_processes_never_lose_a_commit(tmp_path):
    store = race("cas", tmp_path / "cas")
    issues = store.list_issues("default", "eng.alpha")
    comments = issues[0].comments
    assert len(comments) == WRITERS * EACH
    assert sorted(c.id for c in comments) == list(range(1, WRITERS * EACH + 1))
    assert sorted(c.body for c in comments) == sorted(f"writer {w} comment {n}" for w in range(WRITERS) for n in range(EACH))
    extra = WRITERS * len(range(0, EACH, 4))
    assert [i.number for i in issues] == list(range(1, 2 + extra))  # no number taken twice
    assert store.commits("default", "eng.alpha") == 1 + WRITERS * EACH + extra
    repo = store.path("default", "eng.alpha")
    assert len(git(repo, "log", "--format=%H").split()) == 1 + WRITERS * EACH + extra
    git(repo, "fsck", "--strict")


def test_control_a_blind_branch_move_loses_commits(tmp_path):
    store = race("blind", tmp_path / "blind")
    issues = store.list_issues("default", "eng.alpha")
    assert len(issues[0].comments) < WRITERS * EACH
