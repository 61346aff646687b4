"""Inspection of the mail index and ledger: read-only (the mail itself is on the vaults)."""

from django.contrib import admin

from .models import LedgerEntry, MailRun, Message, Thread, WebhookDelivery


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    readonly_fields = ("position", "author", "body", "sent_at")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Thread)
class ThreadAdmin(ReadOnly):
    list_display = ("__str__", "organization", "sender", "subject", "state", "hops", "sent_at", "edited")
    list_filter = ("state", "organization")
    search_fields = ("recipient", "sender", "subject")
    inlines = [MessageInline]


@admin.register(MailRun)
class MailRunAdmin(ReadOnly):
    list_display = ("pk", "thread", "recipient", "status", "attempts", "error_text", "created_at", "finished_at")
    list_filter = ("status",)

    @admin.display(description="error")
    def error_text(self, obj: MailRun) -> str:
        """The run's (last) failure, ``<reason>: <sentence>``: a model's under ``model-error``."""
        error = obj.error or {}
        return str(error.get("message") or error.get("reason") or "")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnly):
    list_display = ("pk", "event", "principal", "thread", "organization", "at")
    list_filter = ("event", "organization")
    search_fields = ("thread", "principal")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ("delivery", "event", "action", "repository", "received_at")
