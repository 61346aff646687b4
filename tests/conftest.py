"""Shared fixtures: small workforce trees in ``tmp_path``, opened mailboxes, personas.

Personas: ``OWNER`` opens the mailboxes (every line's principal), ``MEMBER`` and
``OUTSIDER`` call the API; ``org`` is DEFAULT_ORG_ID and ``other_org`` a second tenant.
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from boards.drains import BOARD_DRAINS
from mailboxes.roster import Roster, load_roster, set_current_roster
from mailboxes.services import do_open_mailboxes
from seats.drains import BOARD_WARNINGS
from workforce import org_cache
from workforce.flows import registry
from workforce.llm import set_model_resolver
from workforce.models import DEFAULT_ORG_ID, Organization
from workforce.runtime import is_booted, mark_booted
from workforce.sessions import do_run_action, ensure_organization

OWNER = "u_owner"
MEMBER = "u_42"
OUTSIDER = "u_outsider"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``root`` (text dedented) and return root."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def mailbox_md(description: str = "A mailbox.", members=("eng.lead", "eng.analyst"), body: str = "The charter.", **extra) -> str:
    """A MAILBOX.md text with frontmatter built from the arguments."""
    lines = ["---", f"description: {description}", f"members: [{', '.join(members)}]"]
    lines += [f"{key}: {value}" for key, value in extra.items()]
    lines += ["---", "", body, ""]
    return "\n".join(lines)


STANDARD_TREE = {
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
        "Where the engineering team posts daily status.", body="Post what you finished."
    ),
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
        "Where the engineering team works incidents.", boards="[followups]", body="Post the timeline here."
    ),
}


def open_mailboxes(root: Path, org: Organization, *, user_id: str = OWNER) -> Roster:
    """Read the tree at ``root``, open its mailboxes in ``org`` as ``user_id`` and serve
    its roster; returns the roster."""
    roster = load_roster(root)
    do_open_mailboxes(org, roster.mailboxes, user_id=user_id, template_ids=roster.template_ids)
    set_current_roster(roster)
    return roster


def hire_tree(root: Path) -> list:
    """Read the workers of the tree at ``root`` (a load error fails the test) and hire
    them all; returns the seats (``hire_workforce``)."""
    from seats.hiring import hire_workforce
    from seats.workers import read_workforce

    workers, errors = read_workforce(root)
    assert errors == []
    return hire_workforce(workers)


def line_up_at_session_lock(monkeypatch, n: int, *, lock: bool = True) -> None:
    """Make ``n`` threads reach their first session row lock at the same moment, so the
    race is real: ``ActionContext.lock_session``, or the session read of an action
    declared ``locks_session`` (``workforce.sessions._open_and_record``, which takes the
    lock in the read it makes anyway). With ``lock=False`` (a control) the lock is left
    out and the row read plainly."""
    from workforce import sessions
    from workforce.models import Session
    from workforce.sessions import ActionContext

    barrier = threading.Barrier(n)
    original = ActionContext.lock_session
    original_open = sessions._open_and_record
    local = threading.local()

    def line_up() -> None:
        if not getattr(local, "waited", False):
            local.waited = True
            barrier.wait(timeout=30)

    def lock_session(self):
        line_up()
        if lock:
            return original(self)
        if not self.locked:
            self.session = Session.objects.get(pk=self.session.pk)
        return self.session

    def open_and_record(request, opening, *, lock: bool):
        if lock:
            line_up()
            lock = lock_wanted
        return original_open(request, opening, lock=lock)

    lock_wanted = lock
    monkeypatch.setattr(ActionContext, "lock_session", lock_session)
    monkeypatch.setattr(sessions, "_open_and_record", open_and_record)


@contextmanager
def wired_by_hand(*kinds: str) -> Iterator[None]:
    """Inside: this process counts as booted (the tests wire kinds by hand). After:
    the facets of each kind in ``kinds`` are put back as they were, the model resolver
    is reset, and the process is booted as it was before."""
    flows = [registry.require(kind) for kind in kinds]
    saved = [dict(flow.facets) for flow in flows]
    was_booted = is_booted()
    mark_booted(True)
    try:
        yield
    finally:
        for flow, facets in zip(flows, saved, strict=False):
            flow.facets.clear()
            flow.facets.update(facets)
        set_model_resolver(None)
        mark_booted(was_booted)


@pytest.fixture
def make_tree(tmp_path):
    """``make_tree(files=STANDARD_TREE) -> root``: a tree in a fresh folder."""
    counter = {"n": 0}

    def _make(files: dict[str, str] | None = None) -> Path:
        counter["n"] += 1
        return write_tree(tmp_path / f"tree{counter['n']}", STANDARD_TREE if files is None else files)

    return _make


@pytest.fixture(autouse=True)
def _restore_mailbox_facets():
    """A test that boots (or wires a route or a notify block by hand) leaves the built-in
    mailbox kind as it found it."""
    flow = registry.get("mailbox")
    saved = {key: flow.facets.get(key) for key in ("notify", "route")} if flow is not None else {}
    yield
    if flow is not None:
        flow.facets.update(saved)


@pytest.fixture(autouse=True)
def _reset_roster():
    """Each test starts from the configured tree and leaves no roster behind."""
    set_current_roster(None)
    yield
    set_current_roster(None)


@pytest.fixture(autouse=True)
def _hired_drains_by_hand():
    """Each test starts with no board drains and warnings set by hand, as a test process
    is configured: a read of them never boots the test process from the configured tree
    (which would replace the roster the test opened). A test of that boot clears them."""
    BOARD_DRAINS.set(())
    BOARD_WARNINGS.set(())
    yield
    BOARD_DRAINS.set(())
    BOARD_WARNINGS.set(())


@pytest.fixture(autouse=True)
def _no_cached_organizations():
    """Each test starts and ends with no cached Organization row: a test's rollback or
    flush removes rows without the signals that evict them (``workforce.org_cache``),
    and a row cached then would outlive its test."""
    org_cache.clear()
    yield
    org_cache.clear()


@pytest.fixture
def org(db):
    return ensure_organization(DEFAULT_ORG_ID)


@pytest.fixture
def other_org(db):
    return ensure_organization("acme")


@pytest.fixture
def open_tree(make_tree, org):
    """``open_tree(files=STANDARD_TREE, user_id=OWNER) -> Roster``: read, bind, open, serve."""

    def _open(files: dict[str, str] | None = None, *, user_id: str = OWNER, in_org=None):
        return open_mailboxes(make_tree(files), in_org or org, user_id=user_id)

    return _open


@pytest.fixture
def act(org):
    """``act(session_id, action, input, user_id=MEMBER, kind="mailbox") -> Request``."""

    def _act(session_id: str, action: str, input=None, *, user_id: str = MEMBER, kind: str = "mailbox", in_org=None, **kw):
        return do_run_action(
            org=in_org or org, kind=kind, session_id=session_id, action=action, input=input or {}, user_id=user_id, **kw
        )

    return _act


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def run_in_threads(fn: Callable[[int], Any], n: int, *, barrier: bool = True, timeout: float = 120) -> list:
    """Run ``fn(i)`` for ``i`` in ``range(n)``, each in its own thread with its own
    database connection (closed when it ends), and return the results in ``i`` order.

    With ``barrier`` (the default) every thread starts ``fn`` at the same moment; pass
    ``barrier=False`` when ``fn`` lines the threads up itself. Each thread is waited for
    up to ``timeout`` seconds. Fails the test (AssertionError) listing what any thread
    raised.
    """
    results: list = [None] * n
    errors: list[BaseException] = []
    start = threading.Barrier(n) if barrier else None

    def run(i: int) -> None:
        try:
            if start is not None:
                start.wait(timeout=30)
            results[i] = fn(i)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not errors, errors
    return results


def pytest_collection_modifyitems(config, items):
    """``@pytest.mark.postgres`` tests run only when DATABASE_URL points at PostgreSQL."""
    import os

    if os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL=postgres://...)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)
