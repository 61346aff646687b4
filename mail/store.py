"""Where mail lives: the ``MailStore`` interface (spec "Where mail lives"; see
``docs/architecture.md``, "Mail").

A mail is an issue on the recipient's vault, created by the office; its state is one of
four labels and its thread is the issue's comments. A backend speaks the subset of a
forge's issue API the office needs (``MailStore``); the embedded backend is
``mail.vault.VaultStore`` (a bare git repository per agent).

Every change a backend makes is told back to the office as a ``StoreEvent``, the same
shape a forge's issue webhook carries, through the one listener ``set_event_listener``
installs (``mail.events.tell_office_safely``, around ``do_handle_store_event``, which the
forge's webhook, ``mail.webhook``, calls too): the office's logic is one code path
whichever backend wrote the change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol, runtime_checkable

from django.conf import settings
from django.utils.module_loading import import_string

from workforce.runtime import Slot


@dataclass(frozen=True)
class Comment:
    """One comment on an issue: its id (1, 2, ... on a vault), body and time."""

    id: int
    body: str
    created_at: datetime
    # False when the backend knows someone other than the office wrote this text (a
    # hand-made commit on a vault): its header is then not the office's.
    by_office: bool = True


@dataclass(frozen=True)
class Issue:
    """A snapshot of one issue on a vault: ``number`` (1, 2, ... per vault), ``title``,
    ``body`` (the office's header, then the sender's text), ``labels`` (names),
    ``state`` (``open`` or ``closed``), when it was created, and its comments in order.
    ``by_office`` is False when the backend knows the body was written by someone other
    than the office (spec "Where mail lives": a mail is an issue "created by the
    office"): such an issue is no mail, and the office neither indexes it nor runs it
    (``mail.events.do_handle_store_event``)."""

    number: int
    title: str
    body: str
    labels: tuple[str, ...]
    state: str
    created_at: datetime
    comments: tuple[Comment, ...] = ()
    by_office: bool = True


@dataclass(frozen=True)
class StoreEvent:
    """What a vault tells the office about one change (a forge's issue webhook):

    Attributes:
        action: ``opened``, ``commented``, ``edited``, ``label_updated`` or ``closed``; ``synced``
            when the vault sweep (``mail.repair``) tells an issue the office missed.
        org_id: the organization whose vault changed; vault: the agent's slug.
        issue: the issue after the change.
        delivery: an id unique to this change (a commit id, a webhook's delivery id),
            so a change told twice is acted on once.
    """

    action: str
    org_id: str
    vault: str
    issue: Issue
    delivery: str = ""
    extra: dict = field(default_factory=dict)


class MailStore(Protocol):
    """The issue API a mail backend offers (spec "Where mail lives"). ``org_id`` and
    ``vault`` (the recipient agent's slug) name the vault; numbers are per vault.
    Methods raise ``StoreError`` when the backend cannot do what was asked."""

    def ensure_vault(self, org_id: str, vault: str) -> None:
        """Create the vault when it is missing, with the four mail labels."""

    def create_issue(self, org_id: str, vault: str, *, title: str, body: str, labels: list[str]) -> Issue:
        """Open an issue with ``labels``; returns it with its number."""

    def comment(self, org_id: str, vault: str, number: int, body: str) -> Issue:
        """Add a comment; returns the issue after it."""

    def set_labels(self, org_id: str, vault: str, number: int, labels: list[str]) -> Issue:
        """Replace the issue's labels; returns the issue after it."""

    def close(self, org_id: str, vault: str, number: int) -> Issue:
        """Close the issue; returns it."""

    def get_issue(self, org_id: str, vault: str, number: int) -> Issue:
        """One issue with its comments (``StoreError`` when there is none)."""

    def list_issues(self, org_id: str, vault: str) -> list[Issue]:
        """Every issue of a vault, by number, with its comments."""

    def list_vaults(self) -> list[tuple[str, str]]:
        """Every vault the backend holds, as ``(org_id, vault)`` pairs."""


@runtime_checkable
class SharedStore(Protocol):
    """A backend whose token sees repositories that are not the office's vaults (a
    forge: ``mail.forgejo.ForgejoStore``, ``shared`` True): ``is_vault`` says which are."""

    shared: bool

    def is_vault(self, org_id: str, vault: str) -> bool:
        """True when ``org_id``'s repository ``vault`` is one of the office's vaults."""


class StoreError(Exception):
    """A mail backend could not do what was asked (a missing issue, a forge that
    refused)."""


# Process state lives in the runtime object (docs/architecture.md "Process state"):
# the office's listener, installed by ``MailConfig.ready``, and the backend, built on
# first use from ``WORKFORCE_MAIL_STORE``.
EVENT_LISTENER: Slot[Callable[[StoreEvent], None] | None] = Slot("mail.event-listener", empty=lambda: None)
STORE: Slot[MailStore] = Slot("mail.store", load=lambda: import_string(settings.WORKFORCE_MAIL_STORE)())


def set_event_listener(listener: Callable[[StoreEvent], None] | None) -> None:
    """Install the office's handler of store events (``MailConfig.ready``)."""
    EVENT_LISTENER.set(listener)


def tell_office(event: StoreEvent) -> None:
    """Hand ``event`` to the office's listener (nothing when none is installed)."""
    listener = EVENT_LISTENER.get()
    if listener is not None:
        listener(event)


def current_store() -> MailStore:
    """The configured backend (``WORKFORCE_MAIL_STORE``, a dotted path to a factory;
    default the embedded vault), built once per process."""
    return STORE.get()


def set_store(store: MailStore | None) -> None:
    """Use ``store`` in this process (None: build the configured one again on next use)."""
    if store is None:
        STORE.clear()
    else:
        STORE.set(store)
