"""Transcript lines, read-only: the transcript is the durable record."""
from django.contrib import admin

from .models import Line, Route, RouteLedger


@admin.register(Line)
class LineAdmin(admin.ModelAdmin):
    list_display = ("session", "seq", "author", "seat_authored", "principal", "short_body")
    list_filter = ("seat_authored",)
    search_fields = ("session__session_id", "body", "author")
    ordering = ("session", "-seq")

    @admin.display(description="body")
    def short_body(self, obj):
        return obj.body[:80]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class _ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(RouteLedger)
class RouteLedgerAdmin(_ReadOnly):
    """A mailbox's route ledger (mailboxRouteLedger): its last 20 lines and last client post."""

    list_display = ("session", "last_seq", "last_post", "updated_at")
    search_fields = ("session__session_id",)


@admin.register(Route)
class RouteAdmin(_ReadOnly):
    """Where each routed client post went, and why."""

    list_display = ("session", "post", "member", "by", "reason", "delivery", "decided_at")
    list_filter = ("by", "reason")
    search_fields = ("session__session_id", "member", "post__body")
