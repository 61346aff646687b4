"""Inspection of the kernel: organizations, sessions with their requests and items."""
from django.contrib import admin

from .models import Item, Membership, Organization, OrgRecord, Request, Session


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class RequestInline(ReadOnlyInline):
    model = Request
    fields = ("request_id", "action", "status", "user_id", "error", "created_at")
    readonly_fields = fields
    ordering = ("-id",)


class ItemInline(ReadOnlyInline):
    model = Item
    fields = ("seq", "type", "component", "data", "created_at")
    readonly_fields = fields
    ordering = ("-seq",)


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "created_at")
    search_fields = ("id", "name")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "organization")


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ("session_id", "flow_kind", "organization", "user_id", "parent", "created_at")
    list_filter = ("flow_kind", "organization")
    search_fields = ("session_id", "user_id")
    readonly_fields = ("organization", "session_id", "flow_kind", "user_id", "parent", "item_seq", "created_at", "updated_at")
    inlines = [RequestInline, ItemInline]


@admin.register(Request)
class RequestAdmin(admin.ModelAdmin):
    list_display = ("request_id", "session", "action", "status", "user_id", "created_at")
    list_filter = ("status", "action", "internal")
    search_fields = ("request_id", "session__session_id")

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(Item)
class ItemAdmin(admin.ModelAdmin):
    list_display = ("session", "seq", "type", "component", "created_at")
    list_filter = ("type", "component")

    def has_change_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return False


@admin.register(OrgRecord)
class OrgRecordAdmin(admin.ModelAdmin):
    list_display = ("organization", "key", "updated_at")
    search_fields = ("key",)

    def has_change_permission(self, request, obj=None):
        return False
