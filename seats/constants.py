"""The roster's reason codes and sentences (``seats.roster``; spec 004 "Who can be a
delegate"). Plain values, importable before the app registry is ready."""

from __future__ import annotations

NOT_ON_ROSTER = "worker-not-on-roster"  # 404: nobody holds it for you (another user's, or none)
ALREADY_ON_ROSTER = "worker-already-on-roster"  # 409: you already have your own of that id
NOT_YOUR_OWN = "worker-not-your-own"  # 409: firing a standard or the organization's worker
INVALID_WORKER = "invalid-worker"  # 400: the WORKER.md text or the id is refused
OFFICE_HAS_NO_ROSTER = "office-has-no-roster"  # 403: hiring as the principal mailboxes run as
# 409: a dispatched onMailboxPost whose seat is running a turn in that conversation
# (seats.agent.on_mailbox_post). This server's own code: the spec names none for a busy seat.
SEAT_BUSY = "seat-busy"


def office_has_no_roster(user_id: str) -> str:
    """Why the office principal (``WORKFORCE_OPEN_USER``) hires nobody: its own workers
    would be the ones every mailbox it runs reaches."""
    return (
        f'"{user_id}" is the principal the mailboxes run as; a worker of its own would answer in every '
        "mailbox. Hire as yourself. Nothing was written."
    )


def no_worker_on_roster(worker: str) -> str:
    """The spec's sentence for a worker nobody holds, or another user's (004 "Who can
    be a delegate"): ``No worker "<id>" on your roster.``"""
    return f'No worker "{worker}" on your roster.'


def already_on_roster(worker: str) -> str:
    """``"<id>" is already on your roster. Pick another id. Nothing was written.``"""
    return f'"{worker}" is already on your roster. Pick another id. Nothing was written.'
