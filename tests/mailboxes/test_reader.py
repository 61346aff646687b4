"""read_mailboxes_directory (spec: "Mailboxes on disk", "Upgrading from channels" Files)."""

import errno
import os
from pathlib import Path

import pytest

from mailboxes.reader import MailboxManifest, read_mailboxes_directory
from workforce.tree import NAME_RULE, LoadError, RecordError, WorkforceRootError, read_record_file, walk

GOOD = "---\ndescription: Where the team posts daily status.\n---\nPost what you finished.\n"


def write(root: Path, rel: str, content: str | bytes = GOOD) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


def box(root: Path, team: str, name: str, content: str | bytes = GOOD) -> Path:
    return write(root, f"teams/{team}/mailboxes/{name}/MAILBOX.md", content)


def pairs(errors):
    return [(error.kind, error.path) for error in errors]


def only_error(root):
    mailboxes, errors = read_mailboxes_directory(root)
    assert len(errors) == 1, errors
    return mailboxes, errors[0]


# ---------------------------------------------------------------- the good tree


def test_good_tree(tmp_path):
    box(
        tmp_path,
        "engineering",
        "standup",
        "---\ndescription: Where the engineering team posts daily status.\n"
        "members: [engineering.lead, engineering.analyst]\n---\n\n"
        "Post what you finished, what you're on, and what's blocking you.\n",
    )
    box(tmp_path, "engineering", "incidents", "---\ndescription: Incidents.\nrouting: {mode: fit}\n---\nBe brief.")
    box(tmp_path, "marketing", "standup")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == []
    assert [m.id for m in mailboxes] == ["engineering.incidents", "engineering.standup", "marketing.standup"]
    standup = mailboxes[1]
    assert standup == MailboxManifest(
        id="engineering.standup",
        declared={
            "description": "Where the engineering team posts daily status.",
            "members": ["engineering.lead", "engineering.analyst"],
        },
        body="\nPost what you finished, what you're on, and what's blocking you.\n",
    )
    assert mailboxes[0].declared == {"description": "Incidents.", "routing": {"mode": "fit"}}
    assert mailboxes[0].body == "Be brief."


def test_root_as_str_and_path(tmp_path):
    box(tmp_path, "eng", "standup")
    assert read_mailboxes_directory(str(tmp_path)) == read_mailboxes_directory(tmp_path)


def test_declared_exactly_as_written(tmp_path):
    box(
        tmp_path,
        "eng",
        "standup",
        "---\ndescription: x\nmember: [eng.lead]\nmode: 0755\nquiet: no\nswitch: on\nat: 1:30\n"
        "since: 2024-01-02\nloud: true\nratio: 1.5\ncount: 3\nflowKind: custom\n---\nbody\n",
    )
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == []
    assert mailboxes[0].declared == {
        "description": "x",
        "member": ["eng.lead"],
        "mode": "0755",
        "quiet": "no",
        "switch": "on",
        "at": "1:30",
        "since": "2024-01-02",
        "loud": True,
        "ratio": 1.5,
        "count": 3,
        "flowKind": "custom",
    }


def test_bom_and_crlf(tmp_path):
    box(tmp_path, "eng", "standup", b"\xef\xbb\xbf---\r\ndescription: Daily.\r\n---\r\nLine one.\r\nLine two.\r\n")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == []
    assert mailboxes[0].declared == {"description": "Daily."}
    assert mailboxes[0].body == "Line one.\r\nLine two.\r\n"


def test_non_string_description_is_accepted_here(tmp_path):
    box(tmp_path, "eng", "standup", "---\ndescription: 42\n---\n")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == [] and mailboxes[0].declared == {"description": 42} and mailboxes[0].body == ""


def test_unknown_keys_and_member_typo_land_in_declared(tmp_path):
    box(tmp_path, "eng", "standup", "---\ndescription: d\nmember: [eng.lead]\nid: nope\ninstructions: hi\n---\nbody\n")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == []
    assert mailboxes[0].declared == {"description": "d", "member": ["eng.lead"], "id": "nope", "instructions": "hi"}


def test_load_error_to_dict():
    error = LoadError("mailbox-load-failed", "teams/eng/mailboxes/x", "boom")
    assert error.to_dict() == {"kind": "mailbox-load-failed", "path": "teams/eng/mailboxes/x", "message": "boom"}


# ---------------------------------------------------------------- structure that is fine


def test_missing_teams_folder(tmp_path):
    (tmp_path / "org").mkdir()
    assert read_mailboxes_directory(tmp_path) == ([], [])


def test_empty_root(tmp_path):
    assert read_mailboxes_directory(tmp_path) == ([], [])


def test_team_without_mailboxes_folder(tmp_path):
    write(tmp_path, "teams/eng/workers/lead/WORKER.md", "---\ndescription: x\n---\n")
    (tmp_path / "teams" / "empty").mkdir()
    box(tmp_path, "ops", "pager")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == [] and [m.id for m in mailboxes] == ["ops.pager"]


def test_loose_files_are_passed_over(tmp_path):
    box(tmp_path, "eng", "standup")
    write(tmp_path, "teams/README.md", "# teams\n")
    write(tmp_path, "teams/.DS_Store", b"\x00\x01")
    write(tmp_path, "teams/eng/.DS_Store", b"\x00")
    write(tmp_path, "teams/eng/notes.txt", "x")
    write(tmp_path, "teams/eng/mailboxes/README.md", "# mailboxes\n")
    write(tmp_path, "teams/eng/mailboxes/.DS_Store", b"\x00")
    write(tmp_path, "teams/eng/mailboxes/standup/notes.md", "extra file next to MAILBOX.md")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == [] and [m.id for m in mailboxes] == ["eng.standup"]


# ---------------------------------------------------------------- the root


def test_root_missing_raises(tmp_path):
    with pytest.raises(WorkforceRootError, match="cannot be read"):
        read_mailboxes_directory(tmp_path / "nope")


def test_root_is_a_file_raises(tmp_path):
    write(tmp_path, "file.txt", "x")
    with pytest.raises(WorkforceRootError, match="not a folder"):
        read_mailboxes_directory(tmp_path / "file.txt")


def test_root_symlink_raises(tmp_path):
    real = tmp_path / "real"
    box(real, "eng", "standup")
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    with pytest.raises(WorkforceRootError, match="symbolic link"):
        read_mailboxes_directory(tmp_path / "link")
    with pytest.raises(WorkforceRootError, match="symbolic link"):
        read_mailboxes_directory(str(tmp_path / "link") + "/")


def test_unlistable_root_raises(tmp_path, monkeypatch):
    real = walk.list_dir_nofollow

    def deny(path, rel):
        if rel == "":
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(path, rel)

    monkeypatch.setattr(walk, "list_dir_nofollow", deny)
    with pytest.raises(WorkforceRootError, match="cannot be read"):
        read_mailboxes_directory(tmp_path)


# ---------------------------------------------------------------- symlinks at every level


def test_symlinked_teams_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    box(elsewhere, "eng", "standup")
    root = tmp_path / "root"
    root.mkdir()
    (root / "teams").symlink_to(elsewhere / "teams", target_is_directory=True)
    mailboxes, error = only_error(root)
    assert mailboxes == []
    assert (error.kind, error.path) == ("unreadable-slot", "teams")
    assert "symbolic link" in error.message


def test_symlinked_team_folder(tmp_path):
    box(tmp_path / "elsewhere", "eng", "standup")
    box(tmp_path, "ops", "pager")
    (tmp_path / "teams" / "eng").symlink_to(tmp_path / "elsewhere" / "teams" / "eng", target_is_directory=True)
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["ops.pager"]
    assert (error.kind, error.path) == ("unreadable-slot", "teams/eng")
    assert "symbolic link" in error.message


def test_symlinked_mailboxes_folder(tmp_path):
    box(tmp_path / "elsewhere", "eng", "standup")
    (tmp_path / "teams" / "eng").mkdir(parents=True)
    (tmp_path / "teams" / "eng" / "mailboxes").symlink_to(
        tmp_path / "elsewhere" / "teams" / "eng" / "mailboxes", target_is_directory=True
    )
    box(tmp_path, "ops", "pager")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["ops.pager"]
    assert (error.kind, error.path) == ("unreadable-slot", "teams/eng/mailboxes")


def test_symlinked_mailbox_folder(tmp_path):
    box(tmp_path / "elsewhere", "eng", "standup")
    box(tmp_path, "eng", "incidents")
    (tmp_path / "teams" / "eng" / "mailboxes" / "standup").symlink_to(
        tmp_path / "elsewhere" / "teams" / "eng" / "mailboxes" / "standup", target_is_directory=True
    )
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.incidents"]
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/eng/mailboxes/standup")
    assert "symbolic link" in error.message


def test_symlinked_mailbox_file(tmp_path):
    target = write(tmp_path, "elsewhere/MAILBOX.md")
    folder = tmp_path / "teams" / "eng" / "mailboxes" / "standup"
    folder.mkdir(parents=True)
    (folder / "MAILBOX.md").symlink_to(target)
    box(tmp_path, "eng", "incidents")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.incidents"]
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/eng/mailboxes/standup")
    assert "teams/eng/mailboxes/standup/MAILBOX.md is a symbolic link" in error.message


def test_dangling_symlinked_mailbox_file(tmp_path):
    folder = tmp_path / "teams" / "eng" / "mailboxes" / "standup"
    folder.mkdir(parents=True)
    (folder / "MAILBOX.md").symlink_to(tmp_path / "missing.md")
    _, error = only_error(tmp_path)
    assert error.kind == "mailbox-load-failed" and "symbolic link" in error.message


# ---------------------------------------------------------------- folders that cannot be listed


def _deny_listing(monkeypatch, denied_rel):
    real = walk.list_dir_nofollow

    def deny(path, rel):
        if rel == denied_rel:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(path, rel)

    monkeypatch.setattr(walk, "list_dir_nofollow", deny)


@pytest.mark.parametrize("denied", ["teams", "teams/eng", "teams/eng/mailboxes"])
def test_unlistable_structural_folder(tmp_path, monkeypatch, denied):
    box(tmp_path, "eng", "standup")
    box(tmp_path, "ops", "pager")
    _deny_listing(monkeypatch, denied)
    mailboxes, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("unreadable-slot", denied)
    assert "cannot be listed" in error.message and "Permission denied" in error.message
    assert [m.id for m in mailboxes] == ([] if denied == "teams" else ["ops.pager"])


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can list a chmod 000 folder")
@pytest.mark.parametrize("denied", ["teams", "teams/eng", "teams/eng/mailboxes"])
def test_chmod_000_structural_folder(tmp_path, denied):
    box(tmp_path, "eng", "standup")
    box(tmp_path, "ops", "pager")
    folder = tmp_path / denied
    folder.chmod(0)
    try:
        _, error = only_error(tmp_path)
    finally:
        folder.chmod(0o755)
    assert (error.kind, error.path) == ("unreadable-slot", denied)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_chmod_000_mailbox_file(tmp_path):
    path = box(tmp_path, "eng", "standup")
    path.chmod(0)
    try:
        _, error = only_error(tmp_path)
    finally:
        path.chmod(0o644)
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/eng/mailboxes/standup")
    assert "teams/eng/mailboxes/standup/MAILBOX.md cannot be read" in error.message


def test_structural_names_that_are_files(tmp_path):
    write(tmp_path, "teams/eng/mailboxes", "not a folder")
    box(tmp_path, "ops", "pager")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["ops.pager"]
    assert (error.kind, error.path) == ("unreadable-slot", "teams/eng/mailboxes")
    assert "not a folder" in error.message


def test_teams_is_a_file(tmp_path):
    write(tmp_path, "teams", "not a folder")
    _, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("unreadable-slot", "teams")


# ---------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["Stand Up", "stand.up", "con", "a" * 65, "double--hyphen", "Standup"])
def test_bad_mailbox_folder_name(tmp_path, name):
    box(tmp_path, "eng", name)
    box(tmp_path, "eng", "daily-standup")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.daily-standup"]
    assert (error.kind, error.path) == ("mailbox-load-failed", f"teams/eng/mailboxes/{name}")
    assert f'"{name}"' in error.message
    if name == "con":
        assert "reserved device name" in error.message
    else:
        assert NAME_RULE in error.message


def test_stand_up_message(tmp_path):
    box(tmp_path, "eng", "Stand Up")
    _, error = only_error(tmp_path)
    assert error.message == (
        'Mailbox folder "Stand Up" breaks the name rule: lowercase letters, digits and single hyphens, at most 64 characters.'
    )


def test_bad_team_folder_name_reports_each_mailbox(tmp_path):
    box(tmp_path, "Eng Team", "standup")
    box(tmp_path, "Eng Team", "incidents")
    box(tmp_path, "ops", "pager")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert [m.id for m in mailboxes] == ["ops.pager"]
    assert pairs(errors) == [
        ("mailbox-load-failed", "teams/Eng Team/mailboxes/incidents"),
        ("mailbox-load-failed", "teams/Eng Team/mailboxes/standup"),
    ]
    for error in errors:
        assert 'Team folder "Eng Team" breaks the name rule' in error.message
        assert NAME_RULE in error.message


def test_bad_team_and_mailbox_name_in_one_message(tmp_path):
    box(tmp_path, "Eng", "Stand Up")
    _, error = only_error(tmp_path)
    assert 'Team folder "Eng"' in error.message and 'Mailbox folder "Stand Up"' in error.message


# ---------------------------------------------------------------- the MAILBOX.md


def test_missing_mailbox_file(tmp_path):
    write(tmp_path, "teams/engineering/mailboxes/lounge/notes.md", "hello")
    box(tmp_path, "engineering", "standup")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["engineering.standup"]
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/engineering/mailboxes/lounge")
    assert error.message.startswith(
        'Mailbox folder "lounge" has no MAILBOX.md. A mailbox folder declares one mailbox, and every mailbox is a MAILBOX.md.'
    )


def test_empty_mailbox_folder(tmp_path):
    (tmp_path / "teams" / "eng" / "mailboxes" / "lounge").mkdir(parents=True)
    _, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/eng/mailboxes/lounge")
    assert "has no MAILBOX.md" in error.message


def test_lowercase_mailbox_md_is_not_the_record(tmp_path):
    write(tmp_path, "teams/eng/mailboxes/lounge/mailbox.md")
    if (tmp_path / "teams/eng/mailboxes/lounge/MAILBOX.md").exists():
        pytest.skip("case-insensitive file system")
    _, error = only_error(tmp_path)
    assert "has no MAILBOX.md" in error.message


def test_mailbox_file_is_a_folder(tmp_path):
    (tmp_path / "teams/eng/mailboxes/standup/MAILBOX.md").mkdir(parents=True)
    _, error = only_error(tmp_path)
    assert error.kind == "mailbox-load-failed"
    assert "teams/eng/mailboxes/standup/MAILBOX.md is not a regular file" in error.message


FILE = "teams/eng/mailboxes/standup/MAILBOX.md"


@pytest.mark.parametrize(
    "content, words",
    [
        ("Just a charter, no frontmatter.\n", ["carries no frontmatter", "line 1"]),
        ("", ["carries no frontmatter"]),
        ("---\ndescription: x\nPost here.\n", ["frontmatter block is not closed"]),
        ("---\ndescription: a\ndescription: b\n---\n", ['duplicate key "description"', "line 3"]),
        ("---\n- description\n- members\n---\n", ["a list, not a mapping", "line 2"]),
        ("---\nhello\n---\n", ['a string ("hello"), not a mapping']),
        ("---\ndescription: [\n---\n", ["not valid YAML"]),
        ("---\nmembers: [eng.lead]\n---\nbody\n", ["declares no description"]),
        ("---\n---\nbody\n", ["declares no description"]),
        ("---\ndescription:\n---\n", ["description: with no value"]),
        ("---\ndescription: ~\n---\n", ["description: with no value"]),
        ("---\ndescription: ''\n---\n", ["empty description"]),
        ("---\ndescription: '   '\n---\n", ["empty description"]),
        (b"---\ndescription: caf\xe9\n---\n", ["not valid UTF-8", "line 2"]),
    ],
)
def test_bad_mailbox_file(tmp_path, content, words):
    box(tmp_path, "eng", "standup", content)
    box(tmp_path, "eng", "incidents")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.incidents"]
    assert (error.kind, error.path) == ("mailbox-load-failed", "teams/eng/mailboxes/standup")
    assert FILE in error.message
    for word in words:
        assert word in error.message


def test_missing_description_message_names_key(tmp_path):
    box(tmp_path, "eng", "standup", "---\nmembers: []\n---\n")
    _, error = only_error(tmp_path)
    assert error.message.startswith(f"{FILE} declares no description.")
    assert "description" in error.message


def test_system_is_a_refused_declaration(tmp_path):
    box(tmp_path, "eng", "standup", "---\ndescription: d\nsystem: You are a bot.\n---\nbody\n")
    box(tmp_path, "eng", "incidents")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.incidents"]
    assert (error.kind, error.path) == ("refused-declaration", "teams/eng/mailboxes/standup")
    assert "system:" in error.message and FILE in error.message
    assert "charter" in error.message and "body" in error.message


def test_system_without_value_is_still_refused(tmp_path):
    box(tmp_path, "eng", "standup", "---\ndescription: d\nsystem:\n---\n")
    _, error = only_error(tmp_path)
    assert error.kind == "refused-declaration"


def test_system_and_no_description_reports_both(tmp_path):
    box(tmp_path, "eng", "standup", "---\nsystem: x\n---\n")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert mailboxes == []
    assert pairs(errors) == [
        ("mailbox-load-failed", "teams/eng/mailboxes/standup"),
        ("refused-declaration", "teams/eng/mailboxes/standup"),
    ]


# ---------------------------------------------------------------- pre-rename records


def test_channel_records_in_channels_folder(tmp_path):
    write(tmp_path, "teams/eng/channels/standup/CHANNEL.md", "---\ndescription: old\n---\n")
    write(tmp_path, "teams/eng/channels/incidents/CHANNEL.md", "not even frontmatter")
    write(tmp_path, "teams/eng/channels/README.md", "loose")
    box(tmp_path, "eng", "pager")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.pager"]
    assert pairs(errors) == [
        ("pre-rename-record", "teams/eng/channels/incidents/CHANNEL.md"),
        ("pre-rename-record", "teams/eng/channels/standup/CHANNEL.md"),
    ]
    assert "teams/eng/mailboxes/incidents/MAILBOX.md" in errors[0].message
    assert "teams/eng/mailboxes/standup/MAILBOX.md" in errors[1].message


def test_channels_folder_without_records(tmp_path):
    (tmp_path / "teams" / "eng" / "channels").mkdir(parents=True)
    _, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("pre-rename-record", "teams/eng/channels")
    assert "teams/eng/mailboxes/" in error.message and "MAILBOX.md" in error.message


def test_channels_folder_with_only_loose_things(tmp_path):
    write(tmp_path, "teams/eng/channels/standup/notes.md", "x")
    write(tmp_path, "teams/eng/channels/CHANNEL.md", "x")
    _, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("pre-rename-record", "teams/eng/channels")


def test_symlinked_channels_folder_is_reported_not_followed(tmp_path):
    write(tmp_path, "elsewhere/standup/CHANNEL.md", "x")
    (tmp_path / "teams" / "eng").mkdir(parents=True)
    (tmp_path / "teams" / "eng" / "channels").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _, error = only_error(tmp_path)
    assert (error.kind, error.path) == ("pre-rename-record", "teams/eng/channels")


def test_channel_file_inside_mailbox_folder_without_mailbox_file(tmp_path):
    write(tmp_path, "teams/eng/mailboxes/standup/CHANNEL.md", "---\ndescription: old\n---\n")
    box(tmp_path, "eng", "incidents")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.incidents"]
    assert (error.kind, error.path) == ("pre-rename-record", "teams/eng/mailboxes/standup/CHANNEL.md")
    assert "teams/eng/mailboxes/standup/MAILBOX.md" in error.message


def test_channel_file_next_to_mailbox_file(tmp_path):
    box(tmp_path, "eng", "standup")
    write(tmp_path, "teams/eng/mailboxes/standup/CHANNEL.md", "old")
    mailboxes, error = only_error(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.standup"]
    assert (error.kind, error.path) == ("pre-rename-record", "teams/eng/mailboxes/standup/CHANNEL.md")


def test_old_files_are_not_read(tmp_path, monkeypatch):
    write(tmp_path, "teams/eng/channels/standup/CHANNEL.md", b"\xff\xfe not utf-8")
    write(tmp_path, "teams/eng/mailboxes/lounge/CHANNEL.md", b"\xff")
    opened = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(walk.os, "open", spy)
    _, errors = read_mailboxes_directory(tmp_path)
    assert [e.kind for e in errors] == ["pre-rename-record", "pre-rename-record"]
    assert not [p for p in opened if p.endswith("CHANNEL.md")]


# ---------------------------------------------------------------- everything together


def test_failures_do_not_stop_other_mailboxes_and_errors_are_sorted(tmp_path):
    box(tmp_path, "eng", "standup")
    box(tmp_path, "eng", "Bad Name")
    box(tmp_path, "eng", "nodesc", "---\nmembers: []\n---\n")
    write(tmp_path, "teams/eng/mailboxes/lounge/README.md", "x")
    box(tmp_path, "ops", "pager")
    box(tmp_path, "ops", "sys", "---\ndescription: d\nsystem: x\n---\n")
    write(tmp_path, "teams/ops/channels/old/CHANNEL.md", "x")
    box(tmp_path, "zeta", "talk")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.standup", "ops.pager", "zeta.talk"]
    assert pairs(errors) == [
        ("mailbox-load-failed", "teams/eng/mailboxes/Bad Name"),
        ("mailbox-load-failed", "teams/eng/mailboxes/lounge"),
        ("mailbox-load-failed", "teams/eng/mailboxes/nodesc"),
        ("pre-rename-record", "teams/ops/channels/old/CHANNEL.md"),
        ("refused-declaration", "teams/ops/mailboxes/sys"),
    ]
    assert all(e.path.startswith("teams/") and "\\" not in e.path for e in errors)


# ---------------------------------------------------------------- the shared helper


def test_read_record_file(tmp_path):
    folder = tmp_path / "teams" / "eng" / "workers" / "lead"
    write(tmp_path, "teams/eng/workers/lead/WORKER.md", "---\ndescription: Lead.\n---\nYou lead.\n")
    assert read_record_file(folder, "teams/eng/workers/lead", "WORKER.md") == ({"description": "Lead."}, "You lead.\n")
    assert read_record_file(folder, "teams/eng/workers/lead", "MISSING.md") is None


def test_read_record_file_failure_uses_given_kind(tmp_path):
    folder = tmp_path / "w"
    write(tmp_path, "w/WORKER.md", "no frontmatter")
    with pytest.raises(RecordError) as info:
        read_record_file(folder, "org/workers/w", "WORKER.md", kind="worker-load-failed")
    assert info.value.error.kind == "worker-load-failed"
    assert info.value.error.path == "org/workers/w"
    assert "org/workers/w/WORKER.md" in info.value.error.message


def test_os_and_editor_droppings_are_passed_over_folders_and_files_alike(tmp_path):
    box(tmp_path, "eng", "standup")
    for rel in (
        "teams/eng/mailboxes/.DS_Store/x",
        "teams/eng/mailboxes/__MACOSX/standup/._MAILBOX.md",
        "teams/eng/mailboxes/.idea/workspace.xml",
        "teams/.git/HEAD",
        "teams/eng/.vscode/settings.json",
    ):
        write(tmp_path, rel, "x")
    for rel in (
        "teams/eng/mailboxes/._standup",
        "teams/eng/mailboxes/standup~",
        "teams/eng/mailboxes/.standup.swp",
        "teams/eng/mailboxes/.#standup",
        "teams/eng/mailboxes/#standup#",
        "teams/eng/mailboxes/Thumbs.db",
    ):
        write(tmp_path, rel, b"\x00")
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert errors == [] and [m.id for m in mailboxes] == ["eng.standup"]


def test_a_hidden_folder_that_is_no_dropping_is_still_a_badly_named_mailbox(tmp_path):
    box(tmp_path, "eng", "standup")
    write(tmp_path, "teams/eng/mailboxes/.standup/MAILBOX.md", GOOD)
    mailboxes, errors = read_mailboxes_directory(tmp_path)
    assert [m.id for m in mailboxes] == ["eng.standup"]
    assert pairs(errors) == [("mailbox-load-failed", "teams/eng/mailboxes/.standup")]
