"""Inspection of coordinator conversations: delegates, posts, rounds, deliveries and
answers, read-only (design.md §2: ledgers and transcripts read-only)."""
from django.contrib import admin

from .models import Answer, Conversation, Delegate, DelegatedPost, Job, Post, Round


class ReadOnlyAdmin(admin.ModelAdmin):
    ordering = ("-pk",)

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class DelegateInline(admin.TabularInline):
    model = Delegate
    extra = 0
    can_delete = False
    fields = ("position", "worker", "note", "added_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    list_display = ("session", "worker", "fallback", "rr_last_worker", "copied_at")
    search_fields = ("session__session_id", "worker")
    inlines = [DelegateInline]


@admin.register(Post)
class PostAdmin(ReadOnlyAdmin):
    list_display = ("post_id", "conversation", "author", "route_by", "route_worker", "created_at")
    search_fields = ("post_id", "author", "text")


@admin.register(Round)
class RoundAdmin(ReadOnlyAdmin):
    list_display = ("post", "number", "status", "opened_at", "deadline_at", "closed_at", "closed_by")
    list_filter = ("status", "closed_by")


@admin.register(DelegatedPost)
class DelegatedPostAdmin(ReadOnlyAdmin):
    list_display = ("post", "round", "worker", "status", "reported", "attempts", "started_at", "finished_at")
    list_filter = ("status", "reported", "round")
    search_fields = ("post__post_id", "worker")


@admin.register(Answer)
class AnswerAdmin(ReadOnlyAdmin):
    list_display = ("post", "round", "worker", "goes_further", "created_at")
    list_filter = ("goes_further", "round")


@admin.register(Job)
class JobAdmin(ReadOnlyAdmin):
    list_display = ("post", "round", "kind", "status", "attempts", "finished_at")
    list_filter = ("kind", "status")
