"""The office-written header at the top of every mail and reply (spec "Where mail
lives": "The issue body starts with an office-written header (from, to, sent), so the
sender can't be spoofed").

A mail's body on the vault reads::

    From: human:ann@example.org
    To: agent:support.devices
    Sent: 2026-12-01T14:30:00+00:00
    Hops: 0
    Seal: 3f1c…(64 hex digits)

    <what the sender wrote>

The header is the block of ``Key: value`` lines before the first blank line; the
office writes it and the sender's text always comes after it, so a text that imitates
a header is read as text. A reply (an issue comment) carries ``From``, ``Sent`` and
``Seal``.

Anyone with write access to a forge repository can edit an issue's body (its author
stays the office), so the header alone proves nothing. ``Seal`` is an HMAC-SHA256,
keyed by the server's ``SECRET_KEY``, over the header's fields, the vault (organization
and agent), the issue's title and the text (a comment's over its issue's number
instead of the title): a header or text edited after the office wrote it no longer
matches its seal (``issue_sealed``, ``comment_sealed``). The index trusts the office's
own record first (``mail.index``); the seal is what still holds when the database is
rebuilt (``reindex_mail``). See docs/mail.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

FIELDS = ("From", "To", "Sent", "Hops", "In-Reply-To", "Seal")
SEAL_SALT = "workforce.mail.header.seal"


@dataclass(frozen=True)
class Header:
    """What the office wrote above a text: the sender and recipient principals, when it
    was sent (aware datetime), the hop count of a reply notification and the thread it
    answers (``In-Reply-To``; empty for a mail someone sent)."""

    sender: str
    sent: datetime
    to: str = ""
    hops: int = 0
    in_reply_to: str = ""
    seal: str = ""


def _one_line(value: str) -> str:
    return " ".join(str(value).split())


def write_header(header: Header, text: str) -> str:
    """``text`` under ``header``: the header lines, a blank line, then ``text``. The
    values are the office's (principals, a time, a count) and are written on one line
    each."""
    lines = [f"From: {_one_line(header.sender)}"]
    if header.to:
        lines.append(f"To: {_one_line(header.to)}")
    lines.append(f"Sent: {header.sent.isoformat()}")
    if header.to:
        lines.append(f"Hops: {int(header.hops)}")
    if header.in_reply_to:
        lines.append(f"In-Reply-To: {_one_line(header.in_reply_to)}")
    if header.seal:
        lines.append(f"Seal: {_one_line(header.seal)}")
    return "\n".join(lines) + "\n\n" + text


def _canonical_text(text: str) -> str:
    # What a forge may do to a text it stores without anyone editing it: CRLF line
    # ends, trailing blanks trimmed.
    return text.replace("\r\n", "\n").rstrip()


def _seal_input(header: Header, text: str, where: list) -> str:
    fields = [
        _one_line(header.sender),
        _one_line(header.to),
        header.sent.isoformat(),
        int(header.hops),
        _one_line(header.in_reply_to),
    ]
    return json.dumps([*where, *fields, _canonical_text(text)], ensure_ascii=True, separators=(",", ":"))


def _seal(value: str, secret: str) -> str:
    return salted_hmac(SEAL_SALT, value, secret=secret, algorithm="sha256").hexdigest()


def _sealed(header: Header | None, text: str, where: list) -> bool:
    if header is None or not header.seal:
        return False
    value = _seal_input(header, text, where)
    # A rotated SECRET_KEY keeps the old one in SECRET_KEY_FALLBACKS: seals it made still hold.
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return any(constant_time_compare(_seal(value, key), header.seal) for key in keys)


def _issue_where(org_id: str, vault: str, title: str) -> list:
    return ["issue", str(org_id), str(vault), " ".join(str(title).split())]


def _comment_where(org_id: str, vault: str, number: int) -> list:
    return ["comment", str(org_id), str(vault), int(number)]


def seal_issue(header: Header, text: str, *, org_id: str, vault: str, title: str) -> Header:
    """``header`` with its ``Seal`` for an issue titled ``title`` on ``vault`` (an agent's
    slug) of organization ``org_id`` whose text is ``text``."""
    return replace(header, seal=_seal(_seal_input(header, text, _issue_where(org_id, vault, title)), settings.SECRET_KEY))


def seal_comment(header: Header, text: str, *, org_id: str, vault: str, number: int) -> Header:
    """``header`` with its ``Seal`` for a comment with ``text`` on issue ``number`` of
    ``vault`` in ``org_id``."""
    return replace(header, seal=_seal(_seal_input(header, text, _comment_where(org_id, vault, number)), settings.SECRET_KEY))


def issue_sealed(header: Header | None, text: str, *, org_id: str, vault: str, title: str) -> bool:
    """True when ``header`` carries the seal the office wrote for this issue (``title``,
    ``text`` on ``vault`` of ``org_id``): nothing of it was edited since. False for no
    header, no seal, or any change."""
    return _sealed(header, text, _issue_where(org_id, vault, title))


def comment_sealed(header: Header | None, text: str, *, org_id: str, vault: str, number: int) -> bool:
    """True when ``header`` carries the seal the office wrote for this comment on issue
    ``number``."""
    return _sealed(header, text, _comment_where(org_id, vault, number))


def read_header(body: str) -> tuple[Header | None, str]:
    """Split a vault text into the office's header and the sender's text.

    Returns ``(header, text)``; ``(None, body)`` when the text does not start with a
    header the office writes (no ``From:`` and ``Sent:`` in its first block).
    """
    head, sep, rest = body.replace("\r\n", "\n").partition("\n\n")
    values: dict[str, str] = {}
    for line in head.split("\n"):
        key, colon, value = line.partition(": ")
        if not colon or key not in FIELDS or key in values:
            return None, body
        values[key] = value.strip()
    if "From" not in values or "Sent" not in values:
        return None, body
    try:
        sent = datetime.fromisoformat(values["Sent"])
        hops = int(values.get("Hops", "0"))
    except ValueError:
        return None, body
    header = Header(
        sender=values["From"],
        to=values.get("To", ""),
        sent=sent,
        hops=hops,
        in_reply_to=values.get("In-Reply-To", ""),
        seal=values.get("Seal", ""),
    )
    return header, rest if sep else ""
