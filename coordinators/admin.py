"""Inspection of coordinator conversations: delegates, posts, rounds, deliveries and
answers, read-only (ledgers and transcripts are never edited by hand)."""

from django.contrib import admin

from workforce.admin import LedgerAdmin, ReadOnlyInline

from .models import Answer, Conversation, Delegate, DelegatedPost, Job, Post, Round


class DelegateInline(ReadOnlyInline):
    model = Delegate
    fields = ("position", "worker", "note", "added_at")
    readonly_fields = fields


@admin.register(Conversation)
class ConversationAdmin(LedgerAdmin):
    list_display = ("session", "worker", "fallback", "rr_last_worker", "copied_at")
    search_fields = ("session__session_id", "worker")
    inlines = [DelegateInline]


@admin.register(Post)
class PostAdmin(LedgerAdmin):
    list_display = ("post_id", "conversation", "author", "route_by", "route_worker", "created_at")
    search_fields = ("post_id", "author", "text")


@admin.register(Round)
class RoundAdmin(LedgerAdmin):
    list_display = ("post", "number", "status", "opened_at", "deadline_at", "closed_at", "closed_by")
    list_filter = ("status", "closed_by")


@admin.register(DelegatedPost)
class DelegatedPostAdmin(LedgerAdmin):
    list_display = ("post", "round", "worker", "status", "reported", "attempts", "started_at", "finished_at")
    list_filter = ("status", "reported", "round")
    search_fields = ("post__post_id", "worker")


@admin.register(Answer)
class AnswerAdmin(LedgerAdmin):
    list_display = ("post", "round", "worker", "goes_further", "created_at")
    list_filter = ("goes_further", "round")


@admin.register(Job)
class JobAdmin(LedgerAdmin):
    list_display = ("post", "round", "kind", "status", "attempts", "finished_at")
    list_filter = ("kind", "status")
