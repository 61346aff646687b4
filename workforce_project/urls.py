"""URL map: the HTTP contract (README "Run it"), the schema, and the admin."""

from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from boards.api import BoardTasksView
from coordinators.api import WorkerSessionsView
from mailboxes.api import TranscriptView
from workforce.api.errors import api_not_found
from workforce.api.views import (
    FlowActionView,
    RequestDetailView,
    SessionItemsView,
    SessionRequestsView,
    SessionRunsView,
    SessionStreamView,
)

urlpatterns = [
    path("api/flows/<str:kind>/<str:session_id>/actions/<str:action>", FlowActionView.as_view(), name="flow-action"),
    path("api/requests/<str:request_id>", RequestDetailView.as_view(), name="request-detail"),
    path("api/sessions/<str:session_id>/items", SessionItemsView.as_view(), name="session-items"),
    path("api/sessions/<str:session_id>/requests", SessionRequestsView.as_view(), name="session-requests"),
    path("api/sessions/<str:session_id>/stream", SessionStreamView.as_view(), name="session-stream"),
    path("api/sessions/<str:session_id>/runs", SessionRunsView.as_view(), name="session-runs"),
    path("api/mailboxes/<str:mailbox_id>/transcript", TranscriptView.as_view(), name="mailbox-transcript"),
    path("api/boards/<str:board_id>/tasks", BoardTasksView.as_view(), name="board-tasks"),
    path("api/workers/<str:worker>/sessions", WorkerSessionsView.as_view(), name="worker-sessions"),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("admin/", admin.site.urls),
    path("", include("web.urls")),  # the pages (README "The pages")
    # Last: any other /api/ path answers a JSON 404, never Django's HTML page.
    re_path(r"^api/", api_not_found),
]

# An unhandled error on an /api/ path answers JSON too (Django's HTML page elsewhere).
handler500 = "workforce.api.errors.server_error"
