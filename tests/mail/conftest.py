"""Fixtures for mail: each test gets its own vault folder, a tree of agents hired as
seats, and ``send``/``committed`` helpers that run what a commit hands the (sync)
cluster, the way a real one would."""

from __future__ import annotations

import pytest

from mail.services import do_send_mail, human_principal
from mail.store import set_store
from mail.vault import VaultStore
from tests.conftest import hire_tree, wired_by_hand

PERSON = human_principal("ann@example.org")

# embedded/scripted: the tests ask these agents for tool calls in the mail and chat they
# get (a /tool line), which embedded/echo never follows.
ECHO_REPLIER = """---
description: Replies to every mail with what it heard.
model: embedded/scripted
capabilities:
  mail.send: ["*"]
run:
  triggers: [mail]
---

Answer every mail.
/tool mail_reply {"thread": "{mailbox}", "body": "{heard}"}
"""

ECHO_READER = """---
description: Reads its mail and answers nothing.
model: embedded/echo
run:
  triggers: [mail]
---

Read the mail.
"""

NO_TRIGGERS = """---
description: Takes no mail runs.
model: embedded/echo
---

Read the mail.
"""

SENDER = """---
description: Mails the agents it is asked to, and only eng.beta.
model: embedded/scripted
capabilities:
  mail.send: [eng.beta]
run:
  triggers: [mail]
---

Do what the mail asks.
"""

MAIL_TREE = {
    "teams/eng/workers/alpha/WORKER.md": ECHO_REPLIER,
    "teams/eng/workers/beta/WORKER.md": ECHO_REPLIER,
    "teams/eng/workers/reader/WORKER.md": ECHO_READER,
    "teams/eng/workers/idle/WORKER.md": NO_TRIGGERS,
    "teams/eng/workers/sender/WORKER.md": SENDER,
}


@pytest.fixture(autouse=True)
def vaults(settings, tmp_path):
    """This test's vault folder (``WORKFORCE_VAULT_DIR``), with the store built anew."""
    settings.WORKFORCE_VAULT_DIR = str(tmp_path / "vaults")
    set_store(None)
    yield tmp_path / "vaults"
    set_store(None)


@pytest.fixture(autouse=True)
def agent_runtime():
    """This process counts as booted, and the agent kind's facets and the model resolver
    are put back after each test."""
    with wired_by_hand("agent"):
        yield


@pytest.fixture
def store(vaults) -> VaultStore:
    """A vault store on this test's folder that tells nobody of its changes."""
    return VaultStore(vaults, notify=False)


@pytest.fixture
def agents(make_tree, org):
    """``agents(files=MAIL_TREE) -> seats``: write the tree and hire its workers."""

    def _hire(files: dict[str, str] | None = None):
        return hire_tree(make_tree(MAIL_TREE if files is None else files))

    return _hire


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """``committed(fn, *args, **kwargs)``: call ``fn`` and run every on-commit callback it
    leaves (the vault telling the office, the tasks it enqueues, and theirs)."""

    def _run(fn, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return fn(*args, **kwargs)

    return _run


@pytest.fixture
def send(org, committed):
    """``send(to, body, subject=None, sender=PERSON) -> Thread``, committed and run."""

    def _send(to: str, body: str, *, subject: str | None = None, sender: str = PERSON, in_org=None):
        return committed(do_send_mail, in_org or org, sender=sender, to=to, body=body, subject=subject)

    return _send
