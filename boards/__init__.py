"""Boards: task rows a mailbox holds, filed by people and agents, drained by seats.

``mailbox_board(mailbox_id, name)`` is importable from here (it needs no models); the
rest lives in ``services`` (write), ``queries`` (read), ``tools`` (the eight task
tools), ``drains`` (hire-time warnings) and ``tasks`` (django-q2 entries).
"""

from .naming import MailboxBoard, mailbox_board

__all__ = ["MailboxBoard", "mailbox_board"]
