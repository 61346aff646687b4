"""Transcript lines, routes and deliveries, read-only: the transcript is the durable
record, and a delivery the record of who was handed which post."""

from django.contrib import admin

from workforce.admin import LedgerAdmin, ReadOnlyAdmin

from .models import Delivery, Line, Route, RouteLedger


@admin.register(Line)
class LineAdmin(ReadOnlyAdmin):
    list_display = ("session", "seq", "author", "seat_authored", "principal", "short_body")
    list_filter = ("seat_authored",)
    search_fields = ("session__session_id", "body", "author")
    ordering = ("session", "-seq")

    @admin.display(description="body")
    def short_body(self, obj):
        return obj.body[:80]


@admin.register(RouteLedger)
class RouteLedgerAdmin(ReadOnlyAdmin):
    """A mailbox's route ledger (mailboxRouteLedger): its last 20 lines and last client post."""

    list_display = ("session", "last_seq", "last_post", "updated_at")
    search_fields = ("session__session_id",)


@admin.register(Route)
class RouteAdmin(ReadOnlyAdmin):
    """Where each routed client post went, and why."""

    list_display = ("session", "post", "member", "by", "reason", "delivery", "decided_at")
    list_filter = ("by", "reason")
    search_fields = ("session__session_id", "member", "post__body")


@admin.register(Delivery)
class DeliveryAdmin(LedgerAdmin):
    list_display = ("post_id", "member", "mode", "status", "attempts", "mailbox", "started_at", "finished_at")
    list_filter = ("status", "mode")
    search_fields = ("post_id", "member", "mailbox__session_id")
