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

        from django.db.models import Q

        from workforce.holders import register_leased

        from .models import BoardTask, TaskStatus

        register_reasons(REASONS)
        # A drain that died lets go of its row at once (workforce.holders): its lease
        # lapses now and the next drain claims it as a lapsed row.
        register_leased(BoardTask, held=Q(status=TaskStatus.IN_PROGRESS, claim_token__isnull=False))
