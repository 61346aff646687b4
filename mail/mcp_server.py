"""Mail and the mailbox basics as an MCP server (spec "Mail versus chat": the human MCP
tool ``mail_send``), built on the official ``mcp`` Python SDK (``MCPServer``).

The tools act as one person, the server's caller, with the REST API's rules and
refusals: ``mail_send`` (``to``, ``body``, ``subject``; needs the ``mail.send``
permission with token auth, as ``POST /api/mail`` does), ``agent_chat`` (``worker``,
``message``: a chat turn, as ``POST /api/workers/{worker}/chat``, waited for up to the
turn's deadline), and a mailbox's ``post``,
``read``, ``fileTask`` and ``readBoard``, each run as the flow action the HTTP contract
runs (``workforce.sessions.do_run_action``), recorded as a request. A refusal is a tool
error whose text is the refusal's message (``"<reason>: <detail>"``). Each tool's JSON
schema comes from its signature. ``manage.py mcp`` serves it over stdio.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connections
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.authtoken.models import Token

from workforce.models import Request
from workforce.principals import Principal, resolve_principal
from workforce.refusals import Refusal
from workforce.sessions import do_run_action

from .chat import do_start_chat
from .constants import SEND_PERMISSION
from .queries import thread_wire
from .services import do_send_mail, human_principal

MAILBOX_KIND = "mailbox"


@dataclass
class _Caller:
    """What ``resolve_principal`` reads of an HTTP request: ``user``."""

    user: Any = None


def caller_from(*, token: str | None, user_id: str | None) -> tuple[Principal, Any]:
    """The person the server acts as: with ``WORKFORCE_AUTH=token`` the user whose DRF
    token is ``token``; in development the ``user_id`` given.

    Raises:
        Refusal("not-authenticated"): token auth without a valid token.
        Refusal("invalid-input"): development without a user id.
        Refusal("not-a-member"): a user in no organization.
    """
    if settings.WORKFORCE_AUTH == "none":
        return resolve_principal(_Caller(), user_id), None
    row = Token.objects.select_related("user").filter(key=token or "").first()
    if row is None or not row.user.is_active:
        raise Refusal("not-authenticated", "the MCP server needs a valid token (--token or WORKFORCE_MCP_TOKEN).")
    return resolve_principal(_Caller(row.user), None), row.user


def _refusal(refusal: Refusal) -> ToolError:
    return ToolError(refusal.message)


def _action(principal: Principal, mailbox: str, action: str, input: dict) -> dict:
    try:
        row = do_run_action(
            org=principal.org, kind=MAILBOX_KIND, session_id=mailbox, action=action, input=input, user_id=principal.user_id
        )
    except Refusal as refusal:
        raise _refusal(refusal) from None
    finally:
        # Each call runs in a worker thread of the SDK: its connections end with the call.
        connections.close_all()
    if row.status == "failed":
        raise ToolError((row.error or {}).get("message") or "internal-error: the action failed")
    return {"requestId": row.request_id, "status": row.status, "output": row.output}


def build_server(*, token: str | None = None, user_id: str | None = None) -> MCPServer:
    """The MCP server acting as the caller ``caller_from(token=..., user_id=...)`` names
    (checked now: a bad token raises Refusal before anything is served)."""
    principal, user = caller_from(token=token, user_id=user_id)
    sender = human_principal(user.email or user.get_username()) if user is not None else human_principal(principal.user_id)
    server = MCPServer(
        "workforce",
        instructions="Send mail to the office's agents; post to, read and file tasks on its mailboxes.",
    )

    def mail_send(to: str, body: str, subject: str | None = None) -> dict:
        """Send a durable mail to an agent (an issue on its vault, labelled mail:new);
        answers the thread."""
        try:
            if user is not None and not user.has_perm(SEND_PERMISSION):
                raise Refusal("mail-send-not-permitted", f"sending mail needs the {SEND_PERMISSION} permission.")
            return thread_wire(do_send_mail(principal.org, sender=sender, to=to, subject=subject, body=body))
        except Refusal as refusal:
            raise _refusal(refusal) from None
        finally:
            connections.close_all()

    def agent_chat(worker: str, message: str) -> dict:
        """Chat with an agent (run kind chat): its reply, once its turn ran."""
        try:
            request = do_start_chat(principal.org, user_id=principal.user_id, worker=worker, message=message)
            deadline = time.monotonic() + float(settings.WORKFORCE_TURN_TIMEOUT) + 5
            while True:
                request.refresh_from_db()
                if request.status not in (Request.Status.PENDING, Request.Status.RUNNING) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            session_id = request.session.session_id
        except Refusal as refusal:
            raise _refusal(refusal) from None
        finally:
            connections.close_all()
        if request.status == Request.Status.FAILED:
            raise ToolError((request.error or {}).get("message") or "internal-error: the turn failed")
        reply = (request.output or {}).get("reply")
        return {"requestId": request.request_id, "sessionId": session_id, "status": request.status, "reply": reply}

    def post(mailbox: str, body: str, author: str | None = None) -> dict:
        """Post a line to a mailbox (author: an unverified member label)."""
        return _action(principal, mailbox, "post", {"body": body, **({"author": author} if author else {})})

    def read(mailbox: str) -> dict:
        """Read a mailbox's lines inside its history window."""
        return _action(principal, mailbox, "read", {})

    def file_task(mailbox: str, board: str, goal: str, title: str | None = None, assignee: str | None = None) -> dict:
        """File a row onto a board the mailbox holds."""
        extra = {k: v for k, v in (("title", title), ("assignee", assignee)) if v}
        return _action(principal, mailbox, "fileTask", {"board": board, "goal": goal, **extra})

    def read_board(mailbox: str, board: str) -> dict:
        """Read every row on a board the mailbox holds."""
        return _action(principal, mailbox, "readBoard", {"board": board})

    server.add_tool(mail_send, name="mail_send")
    server.add_tool(agent_chat, name="agent_chat")
    server.add_tool(post, name="post")
    server.add_tool(read, name="read")
    server.add_tool(file_task, name="fileTask")
    server.add_tool(read_board, name="readBoard")
    return server
