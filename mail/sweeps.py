"""The ``mail`` sweep (``workforce.sweepers``): mail runs and chat turns a crashed worker
or a lossy broker dropped, and mail the office was never told of."""

from __future__ import annotations

from dataclasses import dataclass, field

from .chat import do_sweep_chats
from .runs import do_sweep_mail


@dataclass
class MailSweep:
    """What one sweep enqueued again: mail runs and chat turns, by primary key."""

    mail: list[int] = field(default_factory=list)
    chat: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        """True when the sweep did anything (the sweeper logs it then)."""
        return bool(self.mail or self.chat)


def do_sweep_mail_and_chats() -> MailSweep:
    """Run ``mail.runs.do_sweep_mail`` and ``mail.chat.do_sweep_chats``."""
    return MailSweep(mail=do_sweep_mail(), chat=do_sweep_chats())
