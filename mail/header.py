"""The office-written header at the top of every mail and reply (spec "Where mail
lives": "The issue body starts with an office-written header (from, to, sent), so the
sender can't be spoofed").

A mail's body on the vault reads::

    From: human:ann@example.org
    To: agent:support.devices
    Sent: 2026-12-01T14:30:00+00:00
    Hops: 0

    <what the sender wrote>

The header is the block of ``Key: value`` lines before the first blank line; the
office writes it and the sender's text always comes after it, so a text that imitates
a header is read as text. A reply (an issue comment) carries ``From`` and ``Sent``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

FIELDS = ("From", "To", "Sent", "Hops", "In-Reply-To")


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
    return "\n".join(lines) + "\n\n" + text


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
        sender=values["From"], to=values.get("To", ""), sent=sent, hops=hops, in_reply_to=values.get("In-Reply-To", "")
    )
    return header, rest if sep else ""
