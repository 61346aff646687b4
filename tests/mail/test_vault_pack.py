"""Packing the embedded vault (``VaultStore.pack_vault``, run by the mail sweep through
``mail.repair.do_pack_vaults``): each mail writes about 37 loose objects; past
``WORKFORCE_VAULT_PACK_LOOSE`` they go into a git pack (and the packs are merged past
``MAX_PACKS``), under the vault's writers flock held exclusively, ``git fsck --strict``
clean, every issue read back as before; with writers and readers at work, nothing is
lost and no read fails."""

from __future__ import annotations

import threading

from mail.constants import LABEL_NEW, LABEL_REPLIED
from mail.repair import do_pack_vaults
from mail.vault import VaultStore
from tests.mail.test_vault import git, live_writer  # noqa: F401  (live_writer: a fixture)


def loose(store: VaultStore, vault: str = "eng.alpha") -> int:
    return int(dict(line.split(": ") for line in git(store.path("default", vault), "count-objects", "-v").splitlines())["count"])


def packs(store: VaultStore, vault: str = "eng.alpha") -> int:
    return len(list((store.path("default", vault) / "objects" / "pack").glob("*.pack")))


def mails(store: VaultStore, n: int, vault: str = "eng.alpha") -> None:
    """``n`` mails as the office writes them: opened, commented on, labelled."""
    for i in range(n):
        issue = store.create_issue("default", vault, title=f"Mail {i}", body=f"From: human:ann\n\nText {i}", labels=[LABEL_NEW])
        store.comment("default", vault, issue.number, f"From: agent:{vault}\n\nReply {i}")
        store.set_labels("default", vault, issue.number, [LABEL_REPLIED])


def test_the_sweep_packs_a_vault_past_the_threshold_and_git_reads_it(store, settings):
    settings.WORKFORCE_VAULT_PACK_LOOSE = 50
    mails(store, 3)
    mails(store, 1, vault="eng.beta")
    assert loose(store) >= 50 and loose(store, "eng.beta") < 50
    before = store.list_issues("default", "eng.alpha")
    packed = do_pack_vaults(store=store)
    assert list(packed) == ["default/eng.alpha"] and packed["default/eng.alpha"] >= 50
    assert loose(store) == 0 and packs(store) == 1
    assert loose(store, "eng.beta") > 0 and packs(store, "eng.beta") == 0  # under the threshold: left loose
    repo = store.path("default", "eng.alpha")
    git(repo, "fsck", "--strict")
    assert store.list_issues("default", "eng.alpha") == before
    assert len(git(repo, "log", "--format=%H").split()) == store.commits("default", "eng.alpha") == 3 * 3
    # Writing goes on over the pack; the next pass packs what came since.
    mails(store, 4)
    assert [i.number for i in store.list_issues("default", "eng.alpha")] == [1, 2, 3, 4, 5, 6, 7]
    assert do_pack_vaults(store=store)["default/eng.alpha"] > 0
    assert loose(store) == 0 and packs(store) == 2
    git(repo, "fsck", "--strict")


def test_past_max_packs_the_packs_are_merged_into_one(store, monkeypatch):
    monkeypatch.setattr("mail.vault.MAX_PACKS", 2)
    for _ in range(3):
        mails(store, 1)
        assert store.pack_vault("default", "eng.alpha", threshold=1) > 0
    assert packs(store) == 1 and loose(store) == 0
    git(store.path("default", "eng.alpha"), "fsck", "--strict")
    assert [i.title for i in store.list_issues("default", "eng.alpha")] == ["Mail 0", "Mail 0", "Mail 0"]


def test_a_vault_with_an_office_reader_or_writer_at_work_is_left_for_later(store, live_writer, monkeypatch):
    monkeypatch.setattr("mail.vault.PACK_WAIT_SECONDS", 0.2)
    mails(store, 1)
    holder = live_writer(store.path("default", "eng.alpha"))  # holds the writers flock, as a write or read does
    assert store.pack_vault("default", "eng.alpha", threshold=1) == 0
    assert packs(store) == 0 and loose(store) > 0
    holder.kill()
    holder.wait()
    assert store.pack_vault("default", "eng.alpha", threshold=1) > 0 and loose(store) == 0


def test_zero_never_packs(store, settings):
    settings.WORKFORCE_VAULT_PACK_LOOSE = 0
    mails(store, 1)
    assert do_pack_vaults(store=store) == {} and packs(store) == 0


def test_packing_while_the_office_writes_and_reads_loses_nothing(store):
    """Three writers and two readers at work while a packer packs again and again (a
    threshold of one object): the packer gets its turn, every comment lands, every read
    answers, git fsck is clean."""
    writers, each = 3, 12
    store.create_issue("default", "eng.alpha", title="Busy", body="From: human:ann\n\nbusy", labels=[LABEL_NEW])
    done = threading.Event()
    errors: list[BaseException] = []
    packed: list[int] = []
    reads = [0]

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        return run

    def write(w: int) -> None:
        for n in range(each):
            store.comment("default", "eng.alpha", 1, f"From: agent:eng.alpha\n\nwriter {w} comment {n}")

    def read() -> None:
        while not done.is_set():
            issues = store.list_issues("default", "eng.alpha")
            assert issues[0].title == "Busy"
            store.get_issue("default", "eng.alpha", 1)
            reads[0] += 1

    def pack() -> None:
        while not done.is_set():
            packed.append(store.pack_vault("default", "eng.alpha", threshold=1))

    # Two readers, one always at work: the packer still gets its turn (its gate).
    background = [threading.Thread(target=guarded(read)) for _ in range(2)] + [threading.Thread(target=guarded(pack))]
    workers = [threading.Thread(target=guarded(lambda w=w: write(w))) for w in range(writers)]
    for t in background + workers:
        t.start()
    for t in workers:
        t.join(timeout=300)
    done.set()
    for t in background:
        t.join(timeout=60)
    assert not errors, errors
    assert sum(1 for p in packed if p) >= 1 and reads[0] >= 1
    comments = store.list_issues("default", "eng.alpha")[0].comments
    assert sorted(c.body.rpartition("\n")[2] for c in comments) == sorted(
        f"writer {w} comment {n}" for w in range(writers) for n in range(each)
    )
    git(store.path("default", "eng.alpha"), "fsck", "--strict")
