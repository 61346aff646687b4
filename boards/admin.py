"""Board rows in the admin, read-only: by mailbox, by status, with their change records."""

from django.contrib import admin

from workforce.admin import ReadOnlyAdmin, ReadOnlyInline

from .models import BoardTask, TaskChange, TaskDep
from .naming import split_board_id


class MailboxFilter(admin.SimpleListFilter):
    """Rows by the mailbox that holds their board (the ledger id before its last dot)."""

    title = "mailbox"
    parameter_name = "mailbox"

    def lookups(self, request, model_admin):
        mailboxes = set()
        for board_id in BoardTask.objects.values_list("board_id", flat=True).distinct():
            try:
                mailboxes.add(split_board_id(board_id)[0])
            except ValueError:
                continue
        return [(m, m) for m in sorted(mailboxes)]

    def queryset(self, request, queryset):
        if self.value():
            # Board names hold no dot, so "<mailbox>." prefixes exactly that mailbox's boards.
            return queryset.filter(board_id__startswith=f"{self.value()}.")
        return queryset


class TaskChangeInline(ReadOnlyInline):
    model = TaskChange
    fields = ("kind", "from_status", "to_status", "actor", "run", "data", "at")
    readonly_fields = fields
    ordering = ("id",)


@admin.register(BoardTask)
class BoardTaskAdmin(ReadOnlyAdmin):
    list_display = ("task_id", "board_id", "status", "assignee", "priority", "attempts", "max_attempts", "run", "created_at")
    list_filter = (MailboxFilter, "status", "board_id", "organization")
    search_fields = ("task_id", "board_id", "title", "goal", "assignee", "run")
    ordering = ("board_id", "id")
    inlines = [TaskChangeInline]


@admin.register(TaskChange)
class TaskChangeAdmin(ReadOnlyAdmin):
    list_display = ("task", "kind", "from_status", "to_status", "actor", "run", "at")
    list_filter = ("kind", "board_id")
    search_fields = ("task__task_id", "board_id", "actor", "run")
    ordering = ("-id",)


@admin.register(TaskDep)
class TaskDepAdmin(ReadOnlyAdmin):
    list_display = ("task", "depends_on")
