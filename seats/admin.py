"""Seats (editable: a hired worker's row) and deliveries (read-only: the record of who
was handed which post)."""
from django.contrib import admin

from workforce.admin import LedgerAdmin

from .models import Delivery, Seat


@admin.register(Seat)
class SeatAdmin(admin.ModelAdmin):
    list_display = ("seat_id", "kind", "scope", "organization", "owner_user_id", "model", "updated_at")
    list_filter = ("scope", "kind")
    search_fields = ("seat_id", "description", "owner_user_id")
    ordering = ("seat_id", "scope")
    readonly_fields = ("hired_at", "updated_at", "source")


@admin.register(Delivery)
class DeliveryAdmin(LedgerAdmin):
    list_display = ("post_id", "member", "mode", "status", "attempts", "mailbox", "started_at", "finished_at")
    list_filter = ("status", "mode")
    search_fields = ("post_id", "member", "mailbox__session_id")
