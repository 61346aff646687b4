"""The ``mail`` sweep (``workforce.sweepers``): mail runs and chat turns a crashed worker
or a lossy broker dropped, mail the office was never told of (a vault ahead of the
index: ``mail.repair``), and the embedded vaults' loose objects packed as they grow."""

from __future__ import annotations

from dataclasses import dataclass, field

from .chat import do_sweep_chats
from .forge_repair import do_sweep_forge
from .repair import do_pack_vaults, do_sweep_vaults
from .runs import do_sweep_mail


@dataclass
class MailSweep:
    """What one sweep did: the threads whose vault it told the office of again (the
    index had missed them), then the mail runs and chat turns it enqueued again, by
    primary key."""

    vaults: list[str] = field(default_factory=list)
    mail: list[int] = field(default_factory=list)
    chat: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        """True when the sweep did anything (the sweeper logs it then)."""
        return bool(self.vaults or self.mail or self.chat)


def do_sweep_mail_and_chats() -> MailSweep:
    """Run ``mail.repair.do_sweep_vaults`` and ``mail.forge_repair.do_sweep_forge``
    (first, so a mail they index is admitted now), ``mail.repair.do_pack_vaults``,
    ``mail.runs.do_sweep_mail`` and ``mail.chat.do_sweep_chats``."""
    vaults = do_sweep_vaults() + do_sweep_forge()
    # Packed after the repair: the repair reads the history the packer compacts.
    do_pack_vaults()
    return MailSweep(vaults=vaults, mail=do_sweep_mail(), chat=do_sweep_chats())
