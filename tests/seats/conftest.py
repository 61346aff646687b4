"""Fixtures for seats: trees with workers, hired seats, a wired notify block, scripted
models. django-q2 runs ``sync`` here (settings_test), so a post's deliveries run when
its transaction's on-commit callbacks run: wrap posts in ``committed()``."""

from __future__ import annotations

import textwrap

import pytest

from mailboxes.notify import configure_notify, wake_member_seats
from seats.models import Seat
from tests.conftest import MEMBER, OWNER, hire_tree, mailbox_md, open_mailboxes, wired_by_hand, write_tree
from workforce.sessions import do_run_action


def worker_md(description: str = "A worker.", *, body: str = "You help.", **keys) -> str:
    """A WORKER.md: ``description`` plus each keyword as a frontmatter line (values
    written as YAML, e.g. ``tools="[post-to-mailbox]"``), then ``body``."""
    lines = ["---", f"description: {description}"]
    lines += [f"{key}: {value}" for key, value in keys.items()]
    lines += ["---", "", body, ""]
    return "\n".join(lines)


ECHO_POSTER = worker_md(
    "Posts back what it heard.",
    model="embedded/echo",
    tools="[post-to-mailbox]",
    body='Answer in the mailbox.\n/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}',
)
ECHO_LISTENER = worker_md("Only listens.", model="embedded/echo")

SEATS_TREE = {
    "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
        "Where the engineering team posts daily status.", members=("eng.lead", "eng.analyst", "eng.human")
    ),
    "teams/eng/mailboxes/incidents/MAILBOX.md": mailbox_md(
        "Where the engineering team works incidents.", members=("eng.lead", "eng.analyst")
    ),
    "teams/eng/workers/lead/WORKER.md": ECHO_LISTENER,
    "teams/eng/workers/analyst/WORKER.md": ECHO_LISTENER,
}


@pytest.fixture(autouse=True)
def seats_runtime():
    """This process counts as booted (the tests wire kinds by hand), and the mailbox
    kind's facets (its notify block) and the model resolver are put back after each test."""
    with wired_by_hand("mailbox"):
        yield


@pytest.fixture
def wired(make_tree, org):
    """``wired(files=SEATS_TREE, fallback=None, scope="shared") -> list[Seat]``: write the
    tree, open its mailboxes as OWNER, hire its workers and put
    ``wake_member_seats(seats, fallback=...)`` in the mailbox kind's notify facet."""

    def _wire(files: dict[str, str] | None = None, *, fallback=None, extra_seats=()):
        root = make_tree(SEATS_TREE if files is None else files)
        open_mailboxes(root, org)
        seats = hire_tree(root)
        configure_notify("mailbox", wake_member_seats([*seats, *extra_seats], fallback=fallback))
        return seats

    return _wire


@pytest.fixture
def post(org, django_capture_on_commit_callbacks):
    """``post(mailbox_id, body, author=None, user_id=MEMBER) -> Request``: a client post,
    committed, with every delivery it hands out run (sync cluster)."""

    def _post(mailbox_id: str, body: str, *, author: str | None = None, user_id: str = MEMBER, kind="mailbox"):
        payload = {"body": body}
        if author is not None:
            payload["author"] = author
        with django_capture_on_commit_callbacks(execute=True):
            return do_run_action(org=org, kind=kind, session_id=mailbox_id, action="post", input=payload, user_id=user_id)

    return _post


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


__all__ = ["ECHO_LISTENER", "ECHO_POSTER", "SEATS_TREE", "worker_md", "write_tree", "Seat", "OWNER", "MEMBER"]
