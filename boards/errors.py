"""What a task operation answers when it says no.

Task tools never raise: they answer ``{"refused": "<code>: <message>"}`` (the one shape
every tool refuses in, ``workforce.tools.refuse``), the code one of ``ERROR_CODES``.
Services raise ``TaskError`` with the same code; the tools and the mailbox's board
actions turn it into their own answer (a tool result, or a Refusal on the request).
"""

from __future__ import annotations

from workforce.tools import ToolRefusal, refuse

TASK_NOT_FOUND = "task_not_found"
UNKNOWN_ASSIGNEE = "unknown_assignee"
ILLEGAL_STATUS_TRANSITION = "illegal_status_transition"
TASK_TERMINAL = "task_terminal"
INVALID_ARGUMENTS = "invalid_arguments"
TASK_CONFLICT = "task_conflict"
INTERNAL_ERROR = "internal_error"

ERROR_CODES = (
    TASK_NOT_FOUND,
    UNKNOWN_ASSIGNEE,
    ILLEGAL_STATUS_TRANSITION,
    TASK_TERMINAL,
    INVALID_ARGUMENTS,
    TASK_CONFLICT,
    INTERNAL_ERROR,
)


class TaskError(Exception):
    """A task operation's refusal.

    Args:
        code: one of ``ERROR_CODES`` (``task_not_found``, ``unknown_assignee``,
            ``illegal_status_transition``, ``task_terminal``, ``invalid_arguments``,
            ``task_conflict``).
        message: a sentence for the model or person reading it.
    """

    def __init__(self, code: str, message: str):
        self.code = code
        self.message = message
        super().__init__(f"{code}: {message}")

    def as_result(self) -> ToolRefusal:
        """The tool answer: ``{"refused": "<code>: <message>"}``."""
        return refuse(self.code, self.message)
