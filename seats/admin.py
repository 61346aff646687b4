"""Seats (editable: a hired worker's row) and deliveries (read-only: the record of who
was handed which post)."""
from django.contrib import admin

from .models import Delivery, Seat


@admin.register(Seat)
class SeatAdmin(admin.ModelAdmin):
    list_display = ("seat_id", "kind", "scope", "organization", "owner_user_id", "model", "updated_at")
    list_filter = ("scope", "kind")
    search_fields = ("seat_id", "description", "owner_user_id")
    ordering = ("seat_id", "scope")
    readonly_fields = ("hired_at", "updated_at", "source")


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ("post_id", "member", "mode", "status", "attempts", "mailbox", "started_at", "finished_at")
    list_filter = ("status", "mode")
    search_fields = ("post_id", "member", "mailbox__session_id")
    ordering = ("-pk",)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
