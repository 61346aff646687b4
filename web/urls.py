"""The pages' URLs (README "The pages"), mounted at the site's root."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import actions, views

app_name = "web"

urlpatterns = [
    path("", views.home, name="home"),
    path("who", views.who, name="who"),
    path("accounts/login/", auth_views.LoginView.as_view(template_name="web/login.html"), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(next_page="web:home"), name="logout"),
    path("mailboxes/<str:mailbox_id>/", views.mailbox, name="mailbox"),
    path("mailboxes/<str:mailbox_id>/events", views.mailbox_events, name="mailbox-events"),
    path("mailboxes/<str:mailbox_id>/busy", views.mailbox_busy, name="mailbox-busy"),
    path("mailboxes/<str:mailbox_id>/post", views.mailbox_post, name="mailbox-post"),
    path("boards/<str:board_id>/", views.board, name="board"),
    path("boards/<str:board_id>/events", views.board_events, name="board-events"),
    path("boards/<str:board_id>/file", actions.board_file, name="board-file"),
    path("boards/<str:board_id>/tasks/<str:task_id>", actions.board_task, name="board-task"),
    path("sessions/<str:session_id>/", views.conversation, name="conversation"),
    path("sessions/<str:session_id>/events", views.conversation_events, name="conversation-events"),
    path("sessions/<str:session_id>/post", views.conversation_post, name="conversation-post"),
    path("sessions/<str:session_id>/delegates", actions.conversation_delegates, name="conversation-delegates"),
    path("sessions/<str:session_id>/busy", actions.conversation_busy, name="conversation-busy"),
    path("conversations/new", actions.conversation_start, name="conversation-start"),
    path("projects/new", actions.project_create, name="project-create"),
    path("projects/<str:project_id>/members", actions.project_member, name="project-member"),
    path("roster/", actions.roster, name="roster"),
    path("roster/hire", actions.roster_hire, name="roster-hire"),
    path("roster/<str:worker>/fork", actions.roster_fork, name="roster-fork"),
    path("roster/<str:worker>/fire", actions.roster_fire, name="roster-fire"),
    path("requests/<str:request_id>/cancel", actions.request_cancel, name="request-cancel"),
    path("projects/<str:project_id>/", views.room, name="room"),
    path("projects/<str:project_id>/events", views.room_events, name="room-events"),
    path("projects/<str:project_id>/post", views.room_post, name="room-post"),
    path("mail/", views.mail, name="mail"),
    path("mail/send", actions.mail_send, name="mail-send"),
    path("mail/desk/<str:agent>/", views.mail_desk_page, name="mail-desk"),
    path("mail/desk/<str:agent>/chat", actions.desk_chat_post, name="desk-chat"),
    path("mail/<str:thread_id>/", views.mail_thread, name="mail-thread"),
]
