"""Mail and the mailbox basics as an MCP server (spec "Mail versus chat": the human MCP
tool ``mail_send``), built on the official ``mcp`` Python SDK (``MCPServer``).

One tool table, two transports: ``manage.py mcp`` serves it over stdio acting as one
person (``build_server``, named at start-up), and ``serve`` mounts it at ``/mcp`` over the
SDK's Streamable HTTP transport (``mail.mcp_http``), where each HTTP request names its
caller by the REST API's token auth (``http_caller``). Either way a tool runs as that
caller (``McpCaller``) with the REST API's rules and refusals: ``mail_send`` (``to``,
``body``, ``subject``; needs the ``mail.send`` permission with token auth, as ``POST
/api/mail`` does: ``mail.services.do_send_person_mail``), ``agent_chat`` (``worker``,
``message``: a chat turn, as ``POST /api/workers/{worker}/chat``, waited for up to
``WORKFORCE_MCP_CHAT_WAIT_SECONDS``, with progress notifications meanwhile; a turn still
running then is answered as such, and ``agent_chat_reply`` (``requestId``) fetches its
reply later; docs/mcp.md), and a mailbox's ``post``, ``read``, ``fileTask`` and ``readBoard``,
each run as the flow action the HTTP contract runs (``workforce.sessions.do_run_action``),
recorded as a request. A refusal is a tool error whose text is the SDK's ``Error
executing tool <name>: `` and then the refusal's message (``"<reason>: <detail>"``). Each tool's JSON schema comes from its signature.

The tools are plain functions: the SDK runs each call in a worker thread, so the ORM is
called from sync code, and each call closes that thread's connections when it ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
from django.conf import settings
from django.db import connections
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from workforce.api.throttles import principal_wait, throttled
from workforce.models import Request
from workforce.principals import Principal, resolve_principal
from workforce.queries import ACTIVE_STATUSES, access_request
from workforce.refusals import Refusal
from workforce.sessions import do_run_action
from workforce.wire import check_id, check_idempotency_key

from .chat import CHAT_ACTION, do_start_chat
from .queries import thread_wire
from .services import do_send_person_mail

logger = logging.getLogger(__name__)

# The tool that fetches a chat turn's reply agent_chat answered unfinished.
CHAT_REPLY_TOOL = "agent_chat_reply"
# How often a waiting chat tool reports progress, and reads the turn's request (seconds).
PROGRESS_SECONDS = 5.0
POLL_SECONDS = 0.2
# The key of the ASGI scope under which the HTTP mount leaves the request's caller.
CALLER_SCOPE_KEY = "workforce.mcp_caller"
# The schemes an Authorization header may name: DRF's ("Token <key>", as the REST API
# takes it) and the one MCP clients send ("Bearer <key>"), both a DRF token's key.
TOKEN_SCHEMES = ("token", "bearer")
MAILBOX_KIND = "mailbox"


@dataclass
class _Caller:
    """What ``resolve_principal`` reads of an HTTP request: ``user``."""

    user: Any = None


@dataclass(frozen=True)
class McpCaller:
    """Who a tool call acts as: the verified ``principal`` and, with token auth, the
    Django ``user`` its token names (None in development)."""

    principal: Principal
    user: Any = None


def token_user(key: str | None):
    """The active user whose DRF token is ``key``, checked as the REST API's
    ``TokenAuthentication`` checks it.

    Raises:
        Refusal("not-authenticated"): no such token, or its user is inactive.
    """
    try:
        user, _ = TokenAuthentication().authenticate_credentials(key or "")
    except AuthenticationFailed as failed:
        raise Refusal("not-authenticated", f"{failed.detail} Send Authorization: Bearer <your API token>.") from None
    return user


def caller_from(*, token: str | None, user_id: str | None) -> McpCaller:
    """The person ``manage.py mcp`` acts as: with ``WORKFORCE_AUTH=token`` the user whose
    DRF token is ``token``; in development the ``user_id`` given.

    Raises:
        Refusal("not-authenticated"): token auth without a valid token.
        Refusal("invalid-input"): development without a user id.
        Refusal("not-a-member"): a user in no organization.
    """
    if settings.WORKFORCE_AUTH == "none":
        return McpCaller(resolve_principal(_Caller(), user_id))
    if not token:
        raise Refusal("not-authenticated", "the MCP server needs a valid token (--token or WORKFORCE_MCP_TOKEN).")
    user = token_user(token)
    return McpCaller(resolve_principal(_Caller(user), None), user)


def http_caller(authorization: str | None, claimed_user_id: str | None) -> McpCaller:
    """The caller of one request to the HTTP mount, by the REST API's rule
    (``workforce.principals.resolve_principal``): with ``WORKFORCE_AUTH=token`` the user
    whose DRF token the ``Authorization`` header carries (``Token <key>`` or ``Bearer
    <key>``), a ``userId`` (the mount's query parameter) naming anyone else refused; in
    development the caller names itself with ``userId`` and runs in the default
    organization, as a REST write does.

    Raises:
        Refusal("not-authenticated"): token auth and no valid token (401).
        Refusal("principal-mismatch"), Refusal("not-a-member"): as the REST API (403).
        Refusal("invalid-input"): development without a ``userId`` (400).
    """
    if settings.WORKFORCE_AUTH == "none":
        return McpCaller(resolve_principal(_Caller(), claimed_user_id))
    scheme, _, key = (authorization or "").strip().partition(" ")
    if scheme.lower() not in TOKEN_SCHEMES or not key.strip() or " " in key.strip():
        raise Refusal("not-authenticated", "Send Authorization: Bearer <your API token> (or Token <your API token>).")
    user = token_user(key.strip())
    return McpCaller(resolve_principal(_Caller(user), claimed_user_id), user)


def _refusal(refusal: Refusal) -> ToolError:
    return ToolError(refusal.message)


def _action(principal: Principal, mailbox: str, action: str, input: dict) -> dict:
    try:
        row = do_run_action(
            org=principal.org,
            kind=MAILBOX_KIND,
            session_id=mailbox,
            action=action,
            input=input,
            user_id=principal.user_id,
            posted_by=principal.posted_by,
        )
    except Refusal as refusal:
        raise _refusal(refusal) from None
    finally:
        # Each call runs in a worker thread of the SDK: its connections end with the call.
        connections.close_all()
    if row.status == "failed":
        raise ToolError((row.error or {}).get("message") or "internal-error: the action failed")
    return {"requestId": row.request_id, "status": row.status, "output": row.output}


def _idempotency_key(ctx: Context) -> str | None:
    """The ``Idempotency-Key`` header of the HTTP request a tool call came in (the mount
    answers one call per request), as the REST API reads it; None over stdio."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", None)
    key = headers.get("idempotency-key") if headers is not None else None
    try:
        return check_idempotency_key(key)
    except Refusal as refusal:
        raise _refusal(refusal) from None


def _progress(ctx: Context, progress: float, total: float, message: str) -> None:
    """Report progress to the client (``notifications/progress``; nothing when its call
    carried no ``progressToken``), from the worker thread the SDK runs a tool in."""
    try:
        anyio.from_thread.run(ctx.report_progress, progress, total, message)
    except Exception:  # a client gone, or no event loop to report on: the wait goes on
        logger.debug("could not report progress", exc_info=True)


def _wait_for_turn(request: Request, ctx: Context, worker: str) -> Request:
    """``request`` once its turn ended, or as it is after
    ``WORKFORCE_MCP_CHAT_WAIT_SECONDS``: answered within the request timeouts common MCP
    hosts keep (60 s in the TypeScript SDK). Meanwhile a progress notification every
    ``PROGRESS_SECONDS`` (progress: seconds waited, of ``total`` seconds at most), which
    keeps alive a client that resets its timeout on progress."""
    wait = max(0.0, float(settings.WORKFORCE_MCP_CHAT_WAIT_SECONDS))
    start = time.monotonic()
    deadline = start + wait
    next_progress = start + PROGRESS_SECONDS
    while True:
        request.refresh_from_db(fields=["status", "output", "error", "finished_at"])
        now = time.monotonic()
        if request.status not in ACTIVE_STATUSES or now >= deadline:
            return request
        if now >= next_progress:
            _progress(ctx, round(now - start, 1), wait, f"waiting for {worker}'s reply")
            next_progress = now + PROGRESS_SECONDS
        time.sleep(min(POLL_SECONDS, deadline - now))


def _chat_answer(request: Request) -> dict[str, Any]:
    """What ``agent_chat`` and ``agent_chat_reply`` answer (see ``tool_server``); a failed
    turn is a tool error with its message."""
    if request.status == Request.Status.FAILED:
        raise ToolError((request.error or {}).get("message") or "internal-error: the turn failed")
    answer: dict[str, Any] = {
        "requestId": request.request_id,
        "sessionId": request.session.session_id,
        "status": request.status,
        "reply": (request.output or {}).get("reply") if request.status == Request.Status.COMPLETED else None,
    }
    if request.status in ACTIVE_STATUSES:
        answer["next"] = {
            "tool": CHAT_REPLY_TOOL,
            "arguments": {"requestId": request.request_id},
            "http": f"GET /api/requests/{request.request_id}?wait=30",
            "message": "The agent is still answering: call the tool (or the URL) for its reply.",
        }
    return answer


def _scope_caller(ctx: Context) -> McpCaller:
    """The caller the HTTP mount verified for the request this tool call came in."""
    request = ctx.request_context.request
    caller = getattr(request, "scope", {}).get(CALLER_SCOPE_KEY)
    if not isinstance(caller, McpCaller):  # never served unauthenticated: the mount checks first
        raise ToolError("not-authenticated: this request was not authenticated.")
    return caller


def tool_server(caller_of: Callable[[Context], McpCaller]) -> MCPServer:
    """The MCP server: the one tool table both transports serve, each call acting as
    ``caller_of(ctx)`` (``ctx`` the SDK's request context)."""
    server = MCPServer(
        "workforce",
        instructions="Send mail to the office's agents; post to, read and file tasks on its mailboxes.",
    )

    def counted(ctx: Context) -> McpCaller:
        # Every tool call is a write to the API's rates (each is a POST action there).
        caller = caller_of(ctx)
        wait = principal_wait(caller.principal, caller.user)
        if wait is not None:
            raise _refusal(throttled(wait))
        return caller

    def mail_send(to: str, body: str, ctx: Context, subject: str | None = None) -> dict:
        """Send a durable mail to an agent (an issue on its vault, labelled mail:new);
        answers the thread."""
        caller = counted(ctx)
        try:
            thread = do_send_person_mail(
                caller.principal,
                caller.user,
                to=to.strip(),
                subject=subject,
                body=body,
                idempotency_key=_idempotency_key(ctx),
            )
            return thread_wire(thread)
        except Refusal as refusal:
            raise _refusal(refusal) from None
        finally:
            connections.close_all()

    def agent_chat(worker: str, message: str, ctx: Context) -> dict:
        """Chat with an agent (run kind chat). Answers within WORKFORCE_MCP_CHAT_WAIT_SECONDS
        (45 s): status "completed" with the agent's reply, or, while the agent is still
        answering, status "pending" or "running" with reply null and "next": call
        agent_chat_reply with this requestId for the reply."""
        caller = counted(ctx)
        principal = caller.principal
        try:
            request = do_start_chat(
                principal.org,
                user_id=principal.user_id,
                worker=worker,
                message=message,
                posted_by=principal.posted_by,  # the caller the server resolved: never an argument
                idempotency_key=_idempotency_key(ctx),
            )
            return _chat_answer(_wait_for_turn(request, ctx, worker))
        except Refusal as refusal:
            raise _refusal(refusal) from None
        finally:
            connections.close_all()

    def agent_chat_reply(requestId: str, ctx: Context) -> dict:  # noqa: N803  (the answers' key)
        """The reply of a chat turn agent_chat answered unfinished (its requestId): waits
        up to WORKFORCE_MCP_CHAT_WAIT_SECONDS for it, and answers as agent_chat does."""
        principal = counted(ctx).principal
        try:
            check_id(requestId, label="requestId")  # the one input rule (workforce.wire), before a read
            request = access_request(principal.org, requestId, reader=principal.reader)
            if request.action != CHAT_ACTION:
                raise Refusal("request-not-found", f'No chat turn "{requestId}" exists.')
            return _chat_answer(_wait_for_turn(request, ctx, str((request.input or {}).get("worker", "the agent"))))
        except Refusal as refusal:
            raise _refusal(refusal) from None
        finally:
            connections.close_all()

    def post(mailbox: str, body: str, ctx: Context, author: str | None = None) -> dict:
        """Post a line to a mailbox (author: an unverified member label)."""
        return _action(counted(ctx).principal, mailbox, "post", {"body": body, **({"author": author} if author else {})})

    def read(mailbox: str, ctx: Context) -> dict:
        """Read a mailbox's lines inside its history window."""
        return _action(counted(ctx).principal, mailbox, "read", {})

    def file_task(
        mailbox: str, board: str, goal: str, ctx: Context, title: str | None = None, assignee: str | None = None
    ) -> dict:
        """File a row onto a board the mailbox holds."""
        extra = {k: v for k, v in (("title", title), ("assignee", assignee)) if v}
        return _action(counted(ctx).principal, mailbox, "fileTask", {"board": board, "goal": goal, **extra})

    def read_board(mailbox: str, board: str, ctx: Context) -> dict:
        """Read every row on a board the mailbox holds."""
        return _action(counted(ctx).principal, mailbox, "readBoard", {"board": board})

    server.add_tool(mail_send, name="mail_send")
    server.add_tool(agent_chat, name="agent_chat")
    server.add_tool(agent_chat_reply, name=CHAT_REPLY_TOOL)
    server.add_tool(post, name="post")
    server.add_tool(read, name="read")
    server.add_tool(file_task, name="fileTask")
    server.add_tool(read_board, name="readBoard")
    return server


def build_server(*, token: str | None = None, user_id: str | None = None) -> MCPServer:
    """The server ``manage.py mcp`` runs over stdio, acting as the one person
    ``caller_from(token=..., user_id=...)`` names (checked now: a bad token raises
    Refusal before anything is served)."""
    caller = caller_from(token=token, user_id=user_id)
    return tool_server(lambda ctx: caller)


def http_server() -> MCPServer:
    """The server the HTTP mount runs (``mail.mcp_http``): each call acts as the caller
    the mount verified for its HTTP request."""
    return tool_server(_scope_caller)
