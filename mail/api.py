"""Mail over HTTP (spec "How mail becomes work"):

- ``POST /api/mail`` ``{"userId"?, "to", "subject"?, "body"}``: a person sends a mail to
  an agent; 201 with the thread. With ``WORKFORCE_AUTH=token`` the caller needs the
  ``mail.send`` permission (``mail-send-not-permitted``, 403); in development
  (``WORKFORCE_AUTH=none``) anyone may send. The sender is ``human:<email>`` (the
  user's email, or its user name when it has none; the ``userId`` in development).
- ``GET /api/mail?to=&state=&limit=``: the organization's threads, newest first (at most
  ``limit``, default 100).
- ``GET /api/mail/{thread}``: one thread (``<agent>:<number>``) with its messages.
- ``GET /api/mail/{thread}/ledger``: the ledger entries of one thread, in order.
- ``POST /api/workers/{worker}/chat`` ``{"userId"?, "message"}``: a person's chat turn
  with an agent (``mail.chat``): 202 with the turn's request, running; ``GET
  /api/requests/{id}`` gives its reply once the cluster ran it.
- Both POSTs take an ``Idempotency-Key`` header, as the action endpoint does: a retry
  with the same key and body answers the first call (``Idempotent-Replayed: true``),
  another body with the key is 409 ``idempotency-key-reused``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.api.serializers import RequestSerializer
from workforce.api.views import idempotency_key_of, read_page, request_response
from workforce.principals import resolve_principal
from workforce.refusals import Refusal

from .chat import do_start_chat
from .models import Thread
from .queries import access_thread, ledger_wire, list_ledger, list_threads, thread_wire
from .services import do_send_person_mail

BODY_KEYS = {"userId", "to", "subject", "body"}

ThreadAnswer = inline_serializer(
    "MailThread",
    {
        "thread": serializers.CharField(),
        "to": serializers.CharField(),
        "from": serializers.CharField(),
        "subject": serializers.CharField(),
        "state": serializers.CharField(),
        "labels": serializers.ListField(child=serializers.CharField()),
        "hops": serializers.IntegerField(),
        "inReplyTo": serializers.CharField(allow_null=True),
        "sentAt": serializers.DateTimeField(),
        "edited": serializers.BooleanField(),
    },
)


class SendMailBody(serializers.Serializer):
    userId = serializers.CharField(required=False)
    to = serializers.CharField()
    subject = serializers.CharField(required=False)
    body = serializers.CharField()


class MailView(APIView):
    """Send a mail; list the organization's threads."""

    @extend_schema(
        operation_id="mail_send",
        request=SendMailBody,
        responses={201: ThreadAnswer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
        summary="Send a mail to an agent",
    )
    def post(self, request: HttpRequest) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise Refusal("invalid-input", "The body must be a JSON object {to, subject, body}.")
        unknown = sorted(set(body) - BODY_KEYS)
        if unknown:
            raise Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send to, subject and body.")
        if not isinstance(body.get("to"), str) or not body["to"].strip():
            raise Refusal("invalid-input", "to: the id of the agent to mail is required.")
        principal = resolve_principal(request, body.get("userId"))
        thread = do_send_person_mail(
            principal,
            getattr(request, "user", None),
            to=body["to"].strip(),
            subject=body.get("subject"),
            body=body.get("body"),
            idempotency_key=idempotency_key_of(request),
        )
        response = Response(thread_wire(thread), status=201)
        if getattr(thread, "replayed", False):
            response["Idempotent-Replayed"] = "true"
        return response

    @extend_schema(
        operation_id="mail_list",
        parameters=[
            OpenApiParameter("to", str, description="Only mail to this agent"),
            OpenApiParameter("state", str, description="Only threads in this state", enum=list(Thread.State.values)),
            OpenApiParameter("limit", int, description="At most this many threads (1-1000, default 100)"),
        ],
        responses={200: inline_serializer("MailThreadPage", {"threads": serializers.ListField(child=serializers.DictField())})},
        summary="List mail threads",
    )
    def get(self, request: HttpRequest) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        state = request.query_params.get("state") or None
        if state is not None and state not in Thread.State.values:
            raise Refusal("invalid-input", f"state must be one of {', '.join(Thread.State.values)}.")
        qs = list_threads(principal.org, recipient=request.query_params.get("to") or None, state=state)
        rows, _ = read_page(request, lambda n: qs[:n], next_of=lambda t: t.thread_id)
        return Response({"threads": [thread_wire(t) for t in rows]})


class MailThreadView(APIView):
    """One thread with its messages."""

    @extend_schema(operation_id="mail_thread", responses={200: ThreadAnswer}, summary="Read a mail thread")
    def get(self, request: HttpRequest, thread_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        return Response(thread_wire(access_thread(principal.org, thread_id), messages=True))


class MailLedgerView(APIView):
    """The ledger entries of one thread."""

    @extend_schema(
        operation_id="mail_thread_ledger",
        responses={200: inline_serializer("MailLedger", {"entries": serializers.ListField(child=serializers.DictField())})},
        summary="Read a mail thread's ledger",
    )
    def get(self, request: HttpRequest, thread_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        thread = access_thread(principal.org, thread_id)
        entries = [ledger_wire(e) for e in list_ledger(principal.org, thread=thread.thread_id)]
        return Response({"entries": entries})


class ChatBody(serializers.Serializer):
    userId = serializers.CharField(required=False)
    message = serializers.CharField()


class WorkerChatView(APIView):
    """A person's chat with one agent (spec "Mail versus chat")."""

    @extend_schema(
        operation_id="worker_chat",
        request=ChatBody,
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
        responses={202: RequestSerializer},
        summary="Chat with an agent (run kind chat)",
    )
    def post(self, request: HttpRequest, worker: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            raise Refusal("invalid-input", "The body must be a JSON object {message}.")
        unknown = sorted(set(body) - {"userId", "message"})
        if unknown:
            raise Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send userId and message.")
        principal = resolve_principal(request, body.get("userId"))
        row = do_start_chat(
            principal.org,
            user_id=principal.user_id,
            worker=worker,
            message=body.get("message"),
            posted_by=principal.posted_by,  # the caller resolved above: never the body's
            idempotency_key=idempotency_key_of(request),
        )
        return request_response(row, http_request=request)
