"""The URLs of the pages' forms (``web.actions``), added to the pages' URLs in the
``web`` namespace (``web/urls.py``)."""

from django.urls import path

from . import actions

urlpatterns = [
    path("mail/send", actions.mail_send, name="mail-send"),
    path("mail/desk/<str:agent>/chat", actions.desk_chat_post, name="desk-chat"),
    path("boards/<str:board_id>/file", actions.board_file, name="board-file"),
    path("boards/<str:board_id>/tasks/<str:task_id>", actions.board_task, name="board-task"),
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
]
