"""Inspection of the kernel: organizations, sessions with their requests and items.

Also the read-only pieces every app's admin uses (ledgers and transcripts are
read-only): ``ReadOnlyAdminMixin``/``ReadOnlyAdmin``, ``LedgerAdmin`` and
``ReadOnlyInline``.
"""

from django.contrib import admin

from .models import Item, Membership, Organization, OrgRecord, Request, Session


class ReadOnlyAdminMixin(admin.options.BaseModelAdmin):
    """A ModelAdmin nobody can add to, change or delete from: its pages only show.

    With ``all_fields_readonly = True`` the change page shows every field of the model
    (the ones Django would leave off a form too, like ids and timestamps).
    """

    all_fields_readonly = False

    def get_readonly_fields(self, request, obj=None):
        if self.all_fields_readonly:
            return [f.name for f in self.model._meta.fields]
        return super().get_readonly_fields(request, obj)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """``ReadOnlyAdminMixin`` on a plain ModelAdmin."""


class LedgerAdmin(ReadOnlyAdmin):
    """A ledger's rows: read-only, newest first, every field shown."""

    ordering = ("-pk",)
    all_fields_readonly = True


class ReadOnlyInline(admin.TabularInline):
    """A tabular inline that shows rows only: none added, changed or deleted through
    it. Give it ``fields`` and the same ``readonly_fields``."""

    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class RequestInline(ReadOnlyInline):
    show_change_link = True
    model = Request
    fields = ("request_id", "action", "status", "user_id", "error", "created_at")
    readonly_fields = fields
    ordering = ("-id",)


class ItemInline(ReadOnlyInline):
    show_change_link = True
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
    """Every request; a failed run is found under ``status: failed`` with its error (the
    model's, under ``model-error``) in the list."""

    list_display = ("request_id", "session", "action", "status", "error_text", "user_id", "created_at")
    list_filter = ("status", "action", "internal")
    search_fields = ("request_id", "session__session_id")

    @admin.display(description="error")
    def error_text(self, obj: Request) -> str:
        """The error's message (``<reason>: <sentence>``), or nothing."""
        error = obj.error or {}
        return str(error.get("message") or error.get("reason") or "")

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
