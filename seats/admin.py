"""Seats (editable: a hired worker's row)."""

from django.contrib import admin

from .models import Seat


@admin.register(Seat)
class SeatAdmin(admin.ModelAdmin):
    list_display = ("seat_id", "kind", "scope", "organization", "owner_user_id", "model", "updated_at")
    list_filter = ("scope", "kind")
    search_fields = ("seat_id", "description", "owner_user_id")
    ordering = ("seat_id", "scope")
    readonly_fields = ("hired_at", "updated_at", "source", "forked_from")
