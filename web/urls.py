"""The pages' URLs (docs/pages.md "The pages"), mounted at the site's root."""

from django.contrib.auth import views as auth_views
from django.urls import path

from workforce.logins import throttled_login

from . import views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("who", views.who, name="who"),
    # Failed logins are throttled per username and per address (workforce.logins).
    path("accounts/login/", throttled_login(auth_views.LoginView.as_view(template_name="web/login.html")), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="web:home"), name="logout"),
    path("mailboxes/<str:mailbox_id>/", views.mailbox, name="mailbox"),
    path("mailboxes/<str:mailbox_id>/events", views.mailbox_events, name="mailbox-events"),
    path("mailboxes/<str:mailbox_id>/busy", views.mailbox_busy, name="mailbox-busy"),
    path("mailboxes/<str:mailbox_id>/post", views.mailbox_post, name="mailbox-post"),
    path("boards/<str:board_id>/", views.board, name="board"),
    path("boards/<str:board_id>/events", views.board_events, name="board-events"),
    path("sessions/<str:session_id>/", views.conversation, name="conversation"),
    path("sessions/<str:session_id>/events", views.conversation_events, name="conversation-events"),
    path("sessions/<str:session_id>/post", views.conversation_post, name="conversation-post"),
    path("projects/<str:project_id>/", views.room, name="room"),
    path("projects/<str:project_id>/events", views.room_events, name="room-events"),
    path("projects/<str:project_id>/post", views.room_post, name="room-post"),
    path("mail/", views.mail, name="mail"),
    path("mail/desk/<str:agent>/", views.mail_desk_page, name="mail-desk"),
    path("mail/<str:thread_id>/", views.mail_thread, name="mail-thread"),
]

# The pages' forms (web/actions.py), each a POST that runs the API's service.
from .action_urls import urlpatterns as action_urlpatterns  # noqa: E402

urlpatterns += action_urlpatterns
