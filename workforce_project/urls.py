"""URL map: the HTTP contract (docs/api.md), the schema, and the admin."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from boards.api import BoardTasksView
from coordinators.api import WorkerSessionsView
from mail.api import MailLedgerView, MailThreadView, MailView, WorkerChatView
from mail.mcp_http import protected_resource_metadata
from mail.webhook import forge_webhook
from mailboxes.api import (
    BoardListView,
    MailboxListView,
    ProjectDetailView,
    ProjectListView,
    ProjectMembersView,
    SeatMailboxesView,
    TranscriptView,
)
from seats.api import ToolServersView, WorkerDetailView, WorkerForkView, WorkersView
from workforce.api.errors import api_not_found
from workforce.api.index import ApiIndexView
from workforce.api.views import (
    FlowActionView,
    RequestCancelView,
    RequestDetailView,
    SessionItemsView,
    SessionRequestsView,
    SessionRunsView,
    SessionStreamView,
)
from workforce.logins import throttled_login

urlpatterns = [
    # RFC 9728: the MCP mount's metadata, at the well-known path and its form for /mcp.
    path(".well-known/oauth-protected-resource", protected_resource_metadata, name="mcp-resource-metadata"),
    path(".well-known/oauth-protected-resource/mcp", protected_resource_metadata),
    path("api/", ApiIndexView.as_view(), name="api-index"),
    path("api/boards", BoardListView.as_view(), name="boards"),
    path("api/flows/<str:kind>/<str:session_id>/actions/<str:action>", FlowActionView.as_view(), name="flow-action"),
    path("api/requests/<str:request_id>", RequestDetailView.as_view(), name="request-detail"),
    path("api/requests/<str:request_id>/cancel", RequestCancelView.as_view(), name="request-cancel"),
    path("api/sessions/<str:session_id>/items", SessionItemsView.as_view(), name="session-items"),
    path("api/sessions/<str:session_id>/requests", SessionRequestsView.as_view(), name="session-requests"),
    path("api/sessions/<str:session_id>/stream", SessionStreamView.as_view(), name="session-stream"),
    path("api/sessions/<str:session_id>/runs", SessionRunsView.as_view(), name="session-runs"),
    path("api/mailboxes/<str:mailbox_id>/transcript", TranscriptView.as_view(), name="mailbox-transcript"),
    path("api/mailboxes", MailboxListView.as_view(), name="mailbox-list"),
    path("api/seats/<str:seat_id>/mailboxes", SeatMailboxesView.as_view(), name="seat-mailboxes"),
    path("api/projects", ProjectListView.as_view(), name="project-list"),
    path("api/projects/<str:project_id>", ProjectDetailView.as_view(), name="project-detail"),
    path("api/projects/<str:project_id>/members", ProjectMembersView.as_view(), name="project-members"),
    path("api/boards/<str:board_id>/tasks", BoardTasksView.as_view(), name="board-tasks"),
    path("api/workers/<str:worker>/sessions", WorkerSessionsView.as_view(), name="worker-sessions"),
    # A person's own roster (seats.api): list and hire, read and fire, fork.
    path("api/workers", WorkersView.as_view(), name="workers"),
    path("api/workers/<str:worker>", WorkerDetailView.as_view(), name="worker-detail"),
    path("api/workers/<str:worker>/fork", WorkerForkView.as_view(), name="worker-fork"),
    path("api/workers/<str:worker>/chat", WorkerChatView.as_view(), name="worker-chat"),
    path("api/tool-servers", ToolServersView.as_view(), name="tool-servers"),
    path("api/mail", MailView.as_view(), name="mail"),
    path("api/mail/webhook", forge_webhook, name="mail-webhook"),
    path("api/mail/<str:thread_id>", MailThreadView.as_view(), name="mail-thread"),
    path("api/mail/<str:thread_id>/ledger", MailLedgerView.as_view(), name="mail-thread-ledger"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # The admin's login, throttled per username and per address (workforce.logins), ahead of the admin's own route.
    path("admin/login/", throttled_login(admin.site.login)),
    path("admin/", admin.site.urls),
    path("", include("web.urls")),  # the pages (docs/pages.md "The pages")
    # Last: any other /api/ path answers a JSON 404, never Django's HTML page.
    re_path(r"^api/", api_not_found),
]

# An unhandled error on an /api/ path answers JSON too (Django's HTML page elsewhere).
handler500 = "workforce.api.errors.server_error"
# Not found and not allowed: the site's styled pages, JSON on /api/ (workforce_project.errors).
handler404 = "workforce_project.errors.page_not_found"
handler403 = "workforce_project.errors.permission_denied"
