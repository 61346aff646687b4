"""Transcript lines, routes and deliveries, read-only: the transcript is the durable
record, and a delivery the record of who was handed which post. Projects and their
members are edited here (a project written here readies no talk session: its members
reach the room through ``join``); room lines, talk listings and the inventory are
read-only."""

from django.contrib import admin

from workforce.admin import LedgerAdmin, ReadOnlyAdmin

from .models import (
    Delivery,
    InventoryMailbox,
    InventoryMembership,
    InventorySeat,
    Line,
    Project,
    ProjectMember,
    RoomLine,
    Route,
    RouteLedger,
    TalkListing,
)


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


class ProjectMemberInline(admin.TabularInline):
    model = ProjectMember
    extra = 1
    fields = ("user_id", "added_by", "added_at")
    readonly_fields = ("added_at",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    """A project and the people who can read and post in its room."""

    list_display = ("project_id", "organization", "title", "status", "owner_user_id", "created_at")
    list_filter = ("status", "organization")
    search_fields = ("project_id", "title", "owner_user_id")
    inlines = [ProjectMemberInline]


@admin.register(TalkListing)
class TalkListingAdmin(ReadOnlyAdmin):
    """The one talk session each project lists for each member."""

    list_display = ("project", "user_id", "session", "created_at")
    search_fields = ("project__project_id", "user_id", "session__session_id")


@admin.register(RoomLine)
class RoomLineAdmin(ReadOnlyAdmin):
    """A room's lines: people's posts and the seats' answers."""

    list_display = ("project", "seq", "user_id", "author", "seat_authored", "short_body")
    list_filter = ("seat_authored",)
    search_fields = ("project__project_id", "body", "author", "user_id")
    ordering = ("project", "-seq")

    @admin.display(description="body")
    def short_body(self, obj):
        return obj.body[:80]


@admin.register(InventoryMailbox)
class InventoryMailboxAdmin(ReadOnlyAdmin):
    list_display = ("mailbox_id", "organization", "kind", "opened_at", "retired_at")
    list_filter = ("organization", "kind")
    search_fields = ("mailbox_id",)


@admin.register(InventorySeat)
class InventorySeatAdmin(ReadOnlyAdmin):
    list_display = ("seat_id", "organization", "kind", "hired")
    search_fields = ("seat_id",)


@admin.register(InventoryMembership)
class InventoryMembershipAdmin(ReadOnlyAdmin):
    list_display = ("seat_id", "mailbox_id", "organization")
    search_fields = ("seat_id", "mailbox_id")
