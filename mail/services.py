"""Sending, replying to and closing mail (spec "How mail becomes work", "Loop guard"),
and rebuilding the index from the vaults.

Each call writes the vault first (the mail is the issue), then the index and the ledger,
in one database transaction whose commit lets the vault tell the office
(``mail.events``), which admits the mail's run. A refusal is raised before anything is
written.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from seats.models import Seat
from seats.queries import reachable_seats
from workforce.backlog import check_backlog
from workforce.contracts import in_callers_transaction
from workforce.models import Organization
from workforce.principals import Principal
from workforce.refusals import Refusal
from workforce.sessions import ensure_organization
from workforce.wire import check_text

from .constants import (
    AGENT,
    HUMAN,
    LABEL_CLOSED,
    LABEL_NEW,
    LABEL_REPLIED,
    LABEL_WORKING,
    MAIL_CLOSED,
    MAIL_LOOP_GUARD,
    MAIL_REPLIED,
    MAIL_SENT,
    MAX_HOPS,
    SEND_PERMISSION,
)
from .header import Header, seal_comment, seal_issue, write_header
from .index import index_issue
from .ledger import OFFICE, ledger, recorded
from .models import SendKey, Thread
from .queries import office_organization
from .store import MailStore, SharedStore, StoreError, current_store

SUBJECT_MAX = 200

logger = logging.getLogger(__name__)


def human_principal(email_or_user: str) -> str:
    """``human:<email>`` (the user id in development, where callers name themselves)."""
    return f"{HUMAN}:{email_or_user}"


def agent_principal(slug: str) -> str:
    """``agent:<slug>``."""
    return f"{AGENT}:{slug}"


def agent_of(principal: str) -> str | None:
    """The slug of an ``agent:<slug>`` principal; None for anyone else."""
    kind, _, slug = principal.partition(":")
    return slug if kind == AGENT and slug else None


def recipient_seat(org: Organization, slug: str) -> Seat:
    """The hired agent ``slug`` that mail in ``org`` reaches (its organization's seat,
    else a shared one; spec "Waking agent seats").

    Raises:
        Refusal("invalid-input"): ``slug`` holds a NUL or a lone surrogate.
        Refusal("recipient-not-found"): no such agent is hired.
    """
    check_text(slug, label="to")
    seat = reachable_seats(org.pk, settings.WORKFORCE_OPEN_USER, [slug]).get(slug) if isinstance(slug, str) else None
    if seat is None:
        raise Refusal("recipient-not-found", f'No agent "{slug}" is hired here; mail goes to a hired agent\'s vault.')
    return seat


def _store_call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except StoreError as exc:
        raise Refusal("vault-unavailable", str(exc)) from exc


def _subject(subject: object, body: str) -> str:
    if subject is None or subject == "":
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        return (first[: SUBJECT_MAX - 1] + "…") if len(first) > SUBJECT_MAX else first
    if not isinstance(subject, str) or "\n" in subject or len(subject) > SUBJECT_MAX:
        raise Refusal("invalid-input", f"subject must be one line of at most {SUBJECT_MAX} characters.")
    check_text(subject, label="subject")  # before the vault: it never takes what the index refuses
    return subject.strip()


def _body(body: object) -> str:
    if not isinstance(body, str) or not body.strip():
        raise Refusal("invalid-input", "body: what the mail says may not be empty.")
    if len(body) > settings.WORKFORCE_MAX_TEXT_CHARS:
        raise Refusal("invalid-input", f"body: at most {settings.WORKFORCE_MAX_TEXT_CHARS} characters.")
    check_text(body, label="body")  # before the vault: it never takes what the index refuses
    return body


@dataclass(frozen=True)
class _Send:
    """A mail checked and ready to write: everything that can refuse it was decided."""

    sender: str
    to: str
    subject: str
    body: str
    hops: int
    in_reply_to: str
    guarded: bool


def _check_send(org: Organization, *, sender: str, to: str, body: object, subject: object, hops: int, in_reply_to: str):
    body = _body(body)
    subject = _subject(subject, body)
    recipient_seat(org, to)
    return _Send(sender, to, subject, body, hops, in_reply_to, guarded=hops > MAX_HOPS)


@in_callers_transaction
def _write_send(org: Organization, send: _Send, store: MailStore, key: str | None = None) -> Thread:
    """Open the issue, index it and ledger it; call inside a transaction."""
    title = send.subject or "(no subject)"
    header = Header(
        sender=send.sender,
        to=agent_principal(send.to),
        sent=timezone.now().replace(microsecond=0),
        hops=send.hops,
        in_reply_to=send.in_reply_to,
    )
    header = seal_issue(header, send.body, org_id=org.pk, vault=send.to, title=title)
    issue = _store_call(
        store.create_issue,
        org.pk,
        send.to,
        title=title,
        body=write_header(header, send.body),
        labels=[] if send.guarded else [LABEL_NEW],
    )
    thread = index_issue(org, send.to, issue, sent=header)
    to = agent_principal(send.to)
    ledger(org, MAIL_SENT, send.sender, thread.thread_id, key=key, to=to, hops=send.hops, inReplyTo=send.in_reply_to)
    if send.guarded:
        ledger(org, MAIL_LOOP_GUARD, OFFICE, thread.thread_id, hops=send.hops, inReplyTo=send.in_reply_to, maxHops=MAX_HOPS)
    return thread


def do_send_mail(
    org: Organization,
    *,
    sender: str,
    to: str,
    body: object,  # what the caller sent: refused unless non-empty text (_body)
    subject: str | None = None,
    hops: int = 0,
    in_reply_to: str = "",
    store: MailStore | None = None,
    key: str | None = None,
) -> Thread:
    """Send a mail to agent ``to`` (spec "How mail becomes work"): an issue on its vault
    whose body starts with the office's header (``sender``, ``agent:<to>``, the time,
    ``hops``), labelled ``mail:new``, indexed, and ledgered ``mail.sent``.

    A reply notification (``hops`` > 0, ``in_reply_to`` the thread replied on) past
    ``MAX_HOPS`` (3) is delivered without ``mail:new``, so it starts no run, and the
    office ledgers ``mail.loop_guard`` (spec "Loop guard").

    Args:
        sender: the principal, ``human:<email>`` or ``agent:<slug>``: the caller's, never
            the text's.
        subject: one line (default the body's first line).
        key: an agent tool call's key (``mail<run>:mail_send:<n>``): a call that already
            sent answers its thread and sends nothing.

    Raises:
        Refusal("invalid-input"): an empty body, a subject of more than one line.
        Refusal("recipient-not-found"): ``to`` is no hired agent.
        Refusal("vault-unavailable"): the backend failed; nothing was indexed.
    """
    body = _body(body)
    _subject(subject, body)
    done = _thread_of(recorded(org, key))
    if done is not None:
        return done
    send = _check_send(org, sender=sender, to=to, body=body, subject=subject, hops=hops, in_reply_to=in_reply_to)
    store = store or current_store()
    with transaction.atomic():
        return _write_send(org, send, store, key)


def person_sender(user, user_id: str) -> str:
    """The principal a person sends as: ``human:<email>`` of the authenticated ``user``
    (its user name when it has no email) with token auth; ``human:<user_id>`` in
    development (``WORKFORCE_AUTH=none``), where callers name themselves."""
    if settings.WORKFORCE_AUTH != "none" and user is not None and user.is_authenticated:
        return human_principal(user.email or user.get_username())
    return human_principal(user_id)


def do_send_person_mail(
    principal: Principal,
    user: Any,
    *,
    to: str,
    body: object,  # what the caller sent: refused unless non-empty text (do_send_mail)
    subject: str | None = None,
    idempotency_key: str | None = None,
) -> Thread:
    """A person's mail (``POST /api/mail`` and the MCP tool ``mail_send``; spec "How mail
    becomes work": "needs the mail.send permission"): with token auth ``user`` (the
    authenticated Django user) needs the ``mail.send`` permission; in development anyone
    may send. Then ``do_send_mail`` from ``person_sender(user, principal.user_id)``.

    With ``idempotency_key`` (the caller's ``Idempotency-Key``, at most 255 characters;
    one key space per person in the organization, as the action endpoint's) the send is
    made once: a retry with the same key and the same ``to``, ``subject`` and ``body``
    answers the first send's thread (``replayed`` set on it) and writes nothing, also
    when both arrive at once (the key's row is written before the vault, and its unique
    index holds the second send until the first commits).

    Raises:
        Refusal("mail-send-not-permitted"): token auth and no ``mail.send`` permission.
        Refusal("idempotency-key-reused"): the key was used for another mail.
        Refusal("invalid-input"), Refusal("recipient-not-found"), Refusal("vault-unavailable"):
            as ``do_send_mail``.
        Refusal("backlog-full"): past ``WORKFORCE_BACKLOG_LIMIT`` (``workforce.backlog``);
            nothing was sent.
    """
    if settings.WORKFORCE_AUTH != "none" and (user is None or not user.has_perm(SEND_PERMISSION)):
        raise Refusal("mail-send-not-permitted", f"sending mail needs the {SEND_PERMISSION} permission.")
    org, sender = principal.org, person_sender(user, principal.user_id)
    asked = {"to": to, "subject": subject, "body": body}
    if idempotency_key:
        replayed = _replayed_send(org, principal.user_id, idempotency_key, asked)
        if replayed is not None:
            return replayed
    check_backlog()  # a mail wakes its recipient: refused past the bound, before the vault is written
    if not idempotency_key:
        return do_send_mail(org, sender=sender, to=to, subject=subject, body=body)
    send = _check_send(org, sender=sender, to=to, body=body, subject=subject, hops=0, in_reply_to="")
    store = current_store()
    try:
        with transaction.atomic():
            # The key first: a second send with it waits here until this one commits.
            claim = SendKey.objects.create(organization=org, user_id=principal.user_id, key=idempotency_key, input=asked)
            thread = _write_send(org, send, store)
            SendKey.objects.filter(pk=claim.pk).update(thread=thread)
            return thread
    except IntegrityError:
        replayed = _replayed_send(org, principal.user_id, idempotency_key, asked)
        if replayed is None:
            raise
        return replayed


def _replayed_send(org: Organization, user_id: str, key: str, asked: dict[str, Any]) -> Thread | None:
    """The thread a used send ``key`` answers (marked ``replayed``), or None when the key
    is new. Raises Refusal("idempotency-key-reused") when it sent another mail."""
    used = SendKey.objects.select_related("thread").filter(organization=org, user_id=user_id, key=key).first()
    if used is None or used.thread is None:
        return None
    if used.input != asked:
        raise Refusal(
            "idempotency-key-reused",
            f"This Idempotency-Key was already used to send {used.thread.thread_id}; "
            "a retry must repeat the same to, subject and body.",
        )
    thread = used.thread
    thread.replayed = True  # type: ignore[attr-defined]
    return thread


def _check_own(thread: Thread, slug: str) -> None:
    if thread.recipient != slug:
        raise Refusal("thread-not-found", f"No mail {thread.thread_id} in your vault.")


def do_mark_working(org: Organization, thread: Thread, *, store: MailStore | None = None) -> Thread:
    """The recipient opened the mail: its label moves to ``mail:working`` (spec "Where
    mail lives")."""
    store = store or current_store()
    with transaction.atomic():
        issue = _store_call(store.set_labels, org.pk, thread.recipient, thread.number, [LABEL_WORKING])
        return index_issue(org, thread.recipient, issue)


def do_return_mail(org: Organization, thread: Thread, *, store: MailStore | None = None) -> Thread:
    """A mail whose run failed goes back to ``mail:new`` in its vault and the index,
    where the next run or a person finds it (``mail.runs``). Only a mail still marked
    ``mail:working`` moves: one new, replied or closed meanwhile is left as it is.

    Raises:
        Refusal("vault-unavailable"): the vault could not be written (the mail sweep
            tries again).
    """
    if thread.state != Thread.State.WORKING:
        return thread
    store = store or current_store()
    with transaction.atomic():
        issue = _store_call(store.set_labels, org.pk, thread.recipient, thread.number, [LABEL_NEW])
        return index_issue(org, thread.recipient, issue)


def _thread_of(entry) -> Thread | None:
    if entry is None:
        return None
    recipient, _, number = entry.thread.rpartition(":")
    return Thread.objects.filter(organization_id=entry.organization_id, recipient=recipient, number=int(number or 0)).first()


def do_reply_mail(
    org: Organization, thread: Thread, *, author: str, body: str, store: MailStore | None = None, key: str | None = None
) -> Thread:
    """Agent ``author`` (a slug) replies on a mail in its own vault (the ``mail_reply``
    tool): a comment under the office's header, the label ``mail:replied``, ledgered
    ``mail.replied``. When the mail's sender was an agent, the reply is also delivered to
    that agent's inbox as a new mail with one more hop (spec "How mail becomes work",
    "Loop guard").

    Everything that can refuse the reply, its notification included (the sender agent
    no longer reachable, a subject the notification could not carry), is decided before
    the vault is written, so a refusal leaves the vault and the index as they were. A
    database failure after the vault was written is repaired by the vault sweep
    (``mail.repair``), which tells the office what its vault holds.

    Returns the reply notification's thread when one was sent, else the thread replied on.
    ``key`` (``mail<run>:mail_reply:<n>``): a call that already replied answers the thread
    and replies nothing.

    Raises:
        Refusal("thread-not-found"): the thread is not in ``author``'s vault.
        Refusal("mail-closed"): the mail was closed.
        Refusal("recipient-not-found"): the mail's sender was an agent no longer hired here.
        Refusal("invalid-input"), Refusal("vault-unavailable").
    """
    body = _body(body)
    _check_own(thread, author)
    if recorded(org, key) is not None:
        return thread
    if thread.state == Thread.State.CLOSED:
        raise Refusal("mail-closed", f"{thread.thread_id} was closed; nothing was replied.")
    me = agent_principal(author)
    other = agent_of(thread.sender)
    notification = None
    if other is not None:
        notification = _check_send(
            org,
            sender=me,
            to=other,
            subject=_reply_subject(thread.subject),
            body=body,
            hops=thread.hops + 1,
            in_reply_to=thread.thread_id,
        )
    store = store or current_store()
    header = Header(sender=me, sent=timezone.now().replace(microsecond=0))
    header = seal_comment(header, body, org_id=org.pk, vault=author, number=thread.number)
    with transaction.atomic():
        _store_call(store.comment, org.pk, author, thread.number, write_header(header, body))
        issue = _store_call(store.set_labels, org.pk, author, thread.number, [LABEL_REPLIED])
        replied = index_issue(org, author, issue)
        ledger(org, MAIL_REPLIED, me, thread.thread_id, key=key, to=thread.sender)
        if notification is None:
            return replied
        return _write_send(org, notification, store)


def _reply_subject(subject: str) -> str:
    text = subject if subject.lower().startswith("re:") else f"Re: {subject}"
    return text[:SUBJECT_MAX]


def do_close_mail(org: Organization, thread: Thread, *, author: str, store: MailStore | None = None) -> Thread:
    """Agent ``author`` marks a mail in its vault done (the ``mail_close`` tool): the
    label ``mail:closed``, the issue closed, ledgered ``mail.closed``. Closing a closed
    mail does nothing.

    Raises:
        Refusal("thread-not-found"), Refusal("vault-unavailable").
    """
    _check_own(thread, author)
    if thread.state == Thread.State.CLOSED:
        return thread
    store = store or current_store()
    with transaction.atomic():
        _store_call(store.set_labels, org.pk, author, thread.number, [LABEL_CLOSED])
        issue = _store_call(store.close, org.pk, author, thread.number)
        closed = index_issue(org, author, issue)
        ledger(org, MAIL_CLOSED, agent_principal(author), thread.thread_id)
        return closed


@dataclass
class Reindexed:
    """What ``do_reindex_mail`` read: vaults, threads and texts (messages)."""

    vaults: int = 0
    threads: int = 0
    messages: int = 0


def do_reindex_mail(*, store: MailStore | None = None) -> Reindexed:
    """Rebuild the index from the vaults (``manage.py reindex_mail``; spec "Where mail
    lives": "the record survives the office"): every issue of every vault the backend
    holds is indexed again (upserts; an index already there is left as it is). Runs
    and the ledger are the office's own record and are not rebuilt.

    On a shared backend (a forge, ``store.shared``), whose token sees repositories that
    are no vaults, a repository is a vault only in an organization the office has
    (``mail.queries.office_organization``) and when it holds the four mail labels
    (``store.is_vault``); others are left out and no organization is created for them.

    Raises:
        Refusal("vault-unavailable"): the backend could not be read.
    """
    store = store or current_store()
    done = Reindexed()
    shared = store if isinstance(store, SharedStore) and store.shared else None
    for org_id, vault in _store_call(store.list_vaults):
        try:
            if shared is not None:
                org = office_organization(org_id)
                if org is None or not shared.is_vault(org_id, vault):
                    logger.info("reindex_mail left out %s/%s: not one of the office's vaults", org_id, vault)
                    continue
            else:
                org = ensure_organization(org_id)
            issues = store.list_issues(org_id, vault)
        except StoreError:
            # One unreadable vault is logged and the others are rebuilt.
            logger.exception("reindex_mail could not read the vault %s in %s", vault, org_id)
            continue
        done.vaults += 1
        for issue in issues:
            if not issue.by_office:
                logger.warning("reindex_mail left out %s:%s: the office did not create it", vault, issue.number)
                continue
            with transaction.atomic():
                index_issue(org, vault, issue)
            done.threads += 1
            done.messages += 1 + len(issue.comments)
    return done
