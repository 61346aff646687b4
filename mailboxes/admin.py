"""Transcript lines, read-only: the transcript is the durable record."""
from django.contrib import admin

from .models import Line


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
