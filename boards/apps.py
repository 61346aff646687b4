from django.apps import AppConfig

from workforce.refusals import register_reasons

from .errors import INVALID_ARGUMENTS, TASK_NOT_FOUND, UNKNOWN_ASSIGNEE

# HTTP statuses of the task codes a mailbox's board actions refuse with; the other task
# codes (illegal_status_transition, task_terminal, task_conflict) are conflicts: 409.
REASONS = {TASK_NOT_FOUND: 404, UNKNOWN_ASSIGNEE: 400, INVALID_ARGUMENTS: 400}


class BoardsConfig(AppConfig):
    name = "boards"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        register_reasons(REASONS)
