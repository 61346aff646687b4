"""Seats (editable: a hired worker's row) and their turn slots (read-only)."""

from django.contrib import admin

from .models import Seat, ToolCallEntry, TurnSlot


@admin.register(Seat)
class SeatAdmin(admin.ModelAdmin):
    list_display = ("seat_id", "kind", "scope", "organization", "owner_user_id", "model", "updated_at")
    list_filter = ("scope", "kind")
    search_fields = ("seat_id", "description", "owner_user_id")
    ordering = ("seat_id", "scope")
    readonly_fields = ("hired_at", "updated_at", "source", "forked_from")


@admin.register(TurnSlot)
class TurnSlotAdmin(admin.ModelAdmin):
    """Which seat runs a turn in which session now (read-only: the slot is the rule's)."""

    list_display = ("seat_id", "session", "claim_token", "lease_until", "taken_at")
    search_fields = ("seat_id", "session__session_id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(ToolCallEntry)
class ToolCallEntryAdmin(admin.ModelAdmin):
    """Every tool-server call a seat made (read-only: a ledger); filter by seat, server or event."""

    list_display = ("at", "event", "seat_id", "server", "tool", "request_id", "organization")
    list_filter = ("event", "server", "seat_id")
    search_fields = ("seat_id", "server", "tool", "request_id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
