"""The kernel's HTTP contract (docs/api.md): thin views, one service call each."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import get_script_prefix, reverse
from django.utils.http import RFC3986_SUBDELIMS
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.cancelling import do_cancel_request
from workforce.principals import access_held, resolve_principal
from workforce.queries import (
    ACTIVE_STATUSES,
    access_request,
    access_session,
    list_active_runs,
    list_failed_runs,
    list_item_rows,
    list_items,
    list_requests,
)
from workforce.refusals import Refusal, http_status_for
from workforce.sessions import do_run_action
from workforce.streams import carried_item, item_events, release_connection
from workforce.wire import check_idempotency_key

from .errors import refusal_response
from .serializers import (
    ActionCallSerializer,
    CancelCallSerializer,
    FailedRunPageSerializer,
    ItemPageSerializer,
    RefusalSerializer,
    RequestAnswerSerializer,
    RequestPageSerializer,
    RequestSerializer,
    RunPageSerializer,
    RunsAnswerSerializer,
    item_wire,
    request_wire,
)

T = TypeVar("T")

MAX_WAIT_SECONDS = 30  # GET /api/requests/{id}?wait=S waits at most this long
LARGEST_WHOLE = 10**18 - 1  # the largest whole-number query parameter (18 digits)


def int_param(request: HttpRequest, name: str, default: int, *, minimum: int = 0, maximum: int | None = None) -> int:
    """The whole-number query parameter ``name`` (``default`` when absent or empty).

    Args:
        request: the HTTP request.
        name: the query parameter.
        default: its value when absent or empty.
        minimum: the smallest value accepted.
        maximum: the largest value accepted; without one, ``LARGEST_WHOLE`` (18 digits,
            so that a cursor plus one still fits a 64-bit column).

    Raises:
        Refusal("invalid-input"): not a whole number, or outside ``minimum``..``maximum``
            (a whole number too large says so, with the bound).
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not (raw.isascii() and raw.isdigit()):
        raise Refusal("invalid-input", f"{name} must be a whole number, not {raw[:40]!r}.")
    # The length is checked before int(): a digit string of any length is a whole number,
    # and converting a huge one costs time (Python refuses past 4,300 digits).
    value = int(raw) if len(raw.lstrip("0")) <= 18 else LARGEST_WHOLE + 1
    if maximum is None and value > LARGEST_WHOLE:
        raise Refusal("invalid-input", f"{name} must be at most {LARGEST_WHOLE}.")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
        raise Refusal("invalid-input", f"{name} must be {bound}.")
    return value


def read_page(
    request: HttpRequest,
    fetch: Callable[[int], Iterable[T]],
    *,
    next_of: Callable[[T], Any],
    default_limit: int = 100,
    max_limit: int = 1000,
) -> tuple[list[T], Any]:
    """One page of a list read over HTTP, sized by the ``limit`` query parameter.

    Args:
        request: the HTTP request (its ``limit``: 1 to ``max_limit``, default
            ``default_limit``).
        fetch: ``fetch(n)`` gives at most ``n`` rows in page order; it is asked for one
            more than the page holds, to learn whether another page follows.
        next_of: the cursor of a row (``after=`` for the next page).

    Returns:
        ``(rows, next)``: at most ``limit`` rows, and ``next_of`` of the last one when
        more rows follow, else None.

    Raises:
        Refusal("invalid-input"): ``limit`` is not a whole number in range.
    """
    limit = int_param(request, "limit", default_limit, minimum=1, maximum=max_limit)
    rows = list(fetch(limit + 1))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, next_of(rows[-1]) if more else None


_MARK = "__arg__"


@functools.lru_cache(maxsize=32)
def _route_halves(name: str, prefix: str) -> tuple[str, str]:
    """The path of the one-argument route ``name`` under script prefix ``prefix``, split
    around its argument."""
    head, _, tail = reverse(name, args=[_MARK]).partition(_MARK)
    return head, tail


def route_path(name: str, arg: str) -> str:
    """``reverse(name, args=[arg])`` for a route with one ``<str:...>`` argument, from a
    template made once: an action's answer names three routes, and ``reverse`` matched
    its patterns anew each time (a fifth of the answer's CPU). The argument is quoted as
    ``reverse`` quotes it; one ``reverse`` refuses (an empty one, one with a ``/``) still
    goes to it and raises ``NoReverseMatch``."""
    if not arg or "/" in arg:
        return reverse(name, args=[arg])
    head, tail = _route_halves(name, get_script_prefix())
    return f"{head}{quote(arg, safe=RFC3986_SUBDELIMS + '/~:@')}{tail}"


def request_response(request_row, *, http_request: HttpRequest, created: bool = True) -> Response:
    """A recorded request as the contract's answer: 202 (or the refusal's status) with
    ``Location`` pointing at ``GET /api/requests/{id}``."""
    data = request_wire(request_row)
    if request_row.status == "failed" and request_row.error:
        status = http_status_for(request_row.error.get("reason", ""))
    else:
        status = 202 if created else 200
    location = http_request.build_absolute_uri(route_path("request-detail", request_row.request_id))
    if request_row.status != "failed":
        data["links"] = request_links(request_row, http_request=http_request, location=location)
    response = Response(data, status=status)
    response["Location"] = location
    if getattr(request_row, "replayed", False):
        response["Idempotent-Replayed"] = "true"
    return response


def request_links(request_row, *, http_request: HttpRequest, location: str) -> dict:
    """Where to follow an action that did not fail (its 202 and ``GET
    /api/requests/{id}`` carry them): ``{request, wait, runs, stream}``: the request
    itself, the same waiting up to 30 s for it to finish, the runs it started that have
    not finished (a post's seat turns: ``runs?status=active&startedBy=<id>``), and the
    session's live stream."""
    session_id = request_row.session.session_id
    runs = http_request.build_absolute_uri(route_path("session-runs", session_id))
    # Without authentication a read names its reader with ?userId=: the links carry the
    # request's own user, so they open as given (a private conversation's too).
    # Encoded once and joined (what urlencode of each link's parameters gives).
    user = urlencode({"userId": request_row.user_id}) if settings.WORKFORCE_AUTH == "none" and request_row.user_id else ""
    started_by = urlencode({"status": "active", "startedBy": request_row.request_id})
    return {
        "request": f"{location}?{user}" if user else location,
        "wait": f"{location}?wait={MAX_WAIT_SECONDS}" + (f"&{user}" if user else ""),
        "runs": f"{runs}?{started_by}" + (f"&{user}" if user else ""),
        "stream": http_request.build_absolute_uri(route_path("session-stream", session_id)) + (f"?{user}" if user else ""),
    }


def idempotency_key_of(request: HttpRequest) -> str | None:
    """The request's ``Idempotency-Key`` header (None when absent or empty).

    Raises:
        Refusal("invalid-input"): longer than 255 characters (what a request keeps), or
            holding a control character (``workforce.wire.check_idempotency_key``).
    """
    return check_idempotency_key(request.headers.get("Idempotency-Key"))


class FlowActionView(APIView):
    """Run an action of a flow kind on a session."""

    # The schema documents each registered kind's actions beside this generic operation
    # (workforce.api.schema.action_endpoints).
    documents_flow_actions = True

    @extend_schema(
        request=ActionCallSerializer,
        responses={
            202: RequestAnswerSerializer,
            400: OpenApiResponse(description="invalid-input"),
            403: None,
            404: None,
            409: None,
            503: None,
        },
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
        summary="Run an action (post, read, ...) on a session",
    )
    def post(self, request: HttpRequest, kind: str, session_id: str, action: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            return refusal_response(Refusal("invalid-input", "The body must be a JSON object."))
        unknown = sorted(set(body) - {"userId", "input"})
        if unknown:
            return refusal_response(Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send userId and input."))
        principal = resolve_principal(request, body.get("userId"))
        try:
            key = idempotency_key_of(request)
        except Refusal as refusal:
            return refusal_response(refusal)
        row = do_run_action(
            org=principal.org,
            kind=kind,
            session_id=session_id,
            action=action,
            input=body.get("input", {}),
            user_id=principal.user_id,
            idempotency_key=key,
            posted_by=principal.posted_by,  # who the server resolved: a body can't name it
        )
        return request_response(row, http_request=request)


class RequestDetailView(APIView):
    """One request: status, output or error; ``?wait=S`` waits up to S seconds (at most
    30) for it to finish."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "wait",
                int,
                description=f"Seconds (0-{MAX_WAIT_SECONDS}) to wait for the request to finish before answering; "
                "it answers at once when it has, and with the request still pending or running when the time is up",
            )
        ],
        responses={200: RequestAnswerSerializer, 404: OpenApiResponse(description="request-not-found")},
        summary="Read one request",
    )
    def get(self, request: HttpRequest, request_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        wait = int_param(request, "wait", 0, maximum=MAX_WAIT_SECONDS)
        row = access_request(principal.org, request_id, reader=principal.reader)
        deadline = time.monotonic() + wait
        while row.status in ACTIVE_STATUSES and (left := deadline - time.monotonic()) > 0:
            release_connection()
            time.sleep(min(float(settings.WORKFORCE_STREAM_POLL_SECONDS), left))
            row.refresh_from_db(fields=["status", "output", "error", "finished_at"])
        data = RequestSerializer(row).data
        if row.status != "failed":  # the links its 202 gave
            location = request.build_absolute_uri(route_path("request-detail", row.request_id))
            data["links"] = request_links(row, http_request=request, location=location)
        return Response(data)


class RequestCancelView(APIView):
    """Cancel a running request (its owner only)."""

    @extend_schema(
        request=CancelCallSerializer,
        responses={
            200: RequestSerializer,
            400: OpenApiResponse(RefusalSerializer, description="invalid-input"),
            403: OpenApiResponse(
                RefusalSerializer, description="not-request-owner: a request you may read that runs as someone else"
            ),
            404: OpenApiResponse(RefusalSerializer, description="request-not-found: no such request, or one you may not read"),
            409: OpenApiResponse(RefusalSerializer, description="request-finished: it already completed or failed"),
        },
        summary="Cancel a running request",
        description=(
            "Marks a running request (a routed post's fan-out, a seat's turn, a delegate's run, a board "
            "row's run) aborted at once; the work stops at its next safe point. Cancelling an aborted "
            "request again answers it unchanged."
        ),
    )
    def post(self, request: HttpRequest, request_id: str) -> Response:
        body = request.data if request.data is not None else {}
        if not isinstance(body, dict):
            return refusal_response(Refusal("invalid-input", "The body must be a JSON object."))
        unknown = sorted(set(body) - {"userId"})
        if unknown:
            return refusal_response(Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send userId."))
        principal = resolve_principal(request, body.get("userId") or request.query_params.get("userId"))
        try:
            row = do_cancel_request(principal.org, request_id, user_id=principal.user_id)
        except Refusal as refusal:
            known = request_id if refusal.reason != "request-not-found" else None
            return refusal_response(refusal, request_id=known)
        return Response(RequestSerializer(row).data, status=200)


class SessionItemsView(APIView):
    """A session's items in order, after a sequence number."""

    @extend_schema(
        parameters=[
            OpenApiParameter("itemTypes", str, description="Comma-separated item types, e.g. component"),
            OpenApiParameter("after", int, description="Only items with seq above this"),
            OpenApiParameter("limit", int, description="At most this many (1-1000, default 500)"),
        ],
        responses={200: ItemPageSerializer},
        summary="List a session's items",
    )
    def get(self, request: HttpRequest, session_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_session(principal.org, session_id, reader=principal.reader)
        types = [t for t in request.query_params.get("itemTypes", "").split(",") if t]
        after = int_param(request, "after", 0)
        limit = int_param(request, "limit", 500, minimum=1, maximum=1000)
        items = list(list_items(session, item_types=types or None, after=after, limit=limit))
        payload = {"sessionId": session.session_id, "items": items, "next": items[-1].seq if items else after}
        return Response(ItemPageSerializer(payload).data)


class SessionRequestsView(APIView):
    """A session's requests, newest last."""

    @extend_schema(
        parameters=[
            OpenApiParameter("includeResultOutput", bool, description="Include each request's output"),
            OpenApiParameter("limit", int, description="At most this many, the newest (1-1000, default 500)"),
        ],
        responses={200: RequestPageSerializer},
        summary="List a session's requests",
    )
    def get(self, request: HttpRequest, session_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_session(principal.org, session_id, reader=principal.reader)
        include = request.query_params.get("includeResultOutput", "false").lower() in {"1", "true", "yes"}
        limit = int_param(request, "limit", 500, minimum=1, maximum=1000)
        rows = list_requests(session, limit=limit)
        data = RequestSerializer(rows, many=True, context={"include_output": include}).data
        return Response({"sessionId": session.session_id, "requests": data})


class EventStreamRenderer(BaseRenderer):
    """Lets a client that asks for ``text/event-stream`` (an ``EventSource``) reach the
    stream view; its refusals are still answered as JSON (``SessionStreamView``)."""

    media_type = "text/event-stream"
    format = "event-stream"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return JSONRenderer().render(data)


def stream_cursor(request: HttpRequest) -> int:
    """Where a stream starts: ``Last-Event-ID`` (a reconnecting ``EventSource`` sends the
    last ``id:`` it saw) before the ``after`` query parameter, 0 without either.

    Raises:
        Refusal("invalid-input"): the header is not a whole number.
    """
    last = request.headers.get("Last-Event-ID")
    if last is None or last.strip() == "":
        return int_param(request, "after", 0)
    last = last.strip()
    if not (last.isascii() and last.isdigit()) or len(last) > 18:
        raise Refusal("invalid-input", f"Last-Event-ID must be a whole number, not {last[:40]!r}.")
    return int(last)


def stream_reader(session_pk: int, item_types: list[str] | None) -> Callable[[int, int], list[tuple[int, dict]]]:
    """A session stream's ``read(cursor, limit)`` (``workforce.streams.item_events``):
    the items past ``cursor`` as ``(seq, ItemSerializer's dict)`` pairs, in one statement
    compiled once per process (``list_item_rows``, ``item_wire``); the connection is
    handed back after each read.

    Args:
        session_pk: the session the stream's caller was allowed to read (``access_session``
            when it opened): the read is of its items only.
        item_types: the ``itemTypes`` asked for (None: every type).
    """
    types = tuple(item_types or ())

    def read(cursor: int, limit: int) -> list[tuple[int, dict]]:
        try:
            return [(row[0], item_wire(row)) for row in list_item_rows(session_pk, item_types=types, after=cursor, limit=limit)]
        finally:
            release_connection()  # an open stream holds no connection between reads

    return read


def stream_carried(item_types: list[str] | None) -> Callable[[int, str], dict | None]:
    """A session stream's ``carried(seq, text)`` (``workforce.streams.item_events``): the
    item a note carried as ``stream_reader``'s read gives it (``item_wire``), or None
    when it is not of ``item_types`` (None: every type)."""
    types = frozenset(item_types or ())

    def carried(seq: int, text: str) -> dict | None:
        type_, component, data, request_id, created_at = carried_item(text)
        if types and type_ not in types:
            return None
        return item_wire((seq, type_, component, data, request_id, created_at))

    return carried


class SessionStreamView(APIView):
    """A session's items as server-sent events, live, resumable with Last-Event-ID.

    Read under the items endpoint's rule (``access_session``: another organization's
    session, or another user's private conversation, is 404); ``workforce.streams``
    does the work."""

    renderer_classes = [JSONRenderer, EventStreamRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("itemTypes", str, description="Comma-separated item types, e.g. component"),
            OpenApiParameter("after", int, description="Start after this seq (Last-Event-ID wins when sent)"),
            OpenApiParameter("Last-Event-ID", str, OpenApiParameter.HEADER, required=False, description="Resume after this seq"),
        ],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                description="`id: <seq>` and `data: <item JSON>` per item (the items endpoint's item shape), "
                "then each new item as it is stored; `: heartbeat` comments every 15 s when idle."
            ),
            404: OpenApiResponse(description="session-not-found"),
            503: OpenApiResponse(description="too-many-streams"),
        },
        summary="Stream a session's items (server-sent events)",
    )
    def get(self, request: HttpRequest, session_id: str) -> StreamingHttpResponse | HttpResponse:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_session(principal.org, session_id, reader=principal.reader)
        types = [t for t in request.query_params.get("itemTypes", "").split(",") if t] or None
        after = stream_cursor(request)

        if request.method == "HEAD":  # the stream's headers, and no stream to hold open
            head = HttpResponse(content_type="text/event-stream")
            head["Cache-Control"] = "no-cache"
            return head
        read = stream_reader(session.pk, types)
        # Access is checked again while it is open (an account moved, a token deleted).
        held = access_held(request, principal, lambda: access_session(principal.org, session_id, reader=principal.reader))
        events = item_events(session.pk, after=after, read=read, carried=stream_carried(types), still_allowed=held)
        response = StreamingHttpResponse(events, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a proxy in front must not buffer it
        return response

    def finalize_response(self, request, response, *args, **kwargs):
        if isinstance(response, Response):  # a refusal: JSON, whatever the client accepts
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


class SessionRunsView(APIView):
    """The runs a session's work started that have not finished (its busy seats and
    delegates; ``workforce.queries.list_active_runs``), or, with ``status=failed``, the
    runs that failed on it and its child sessions with their errors
    (``workforce.queries.list_failed_runs``)."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status",
                str,
                enum=["active", "failed"],
                description="`active` (the default): not finished, oldest first; `failed`: failed, newest first, with their errors",
            ),
            OpenApiParameter("startedBy", str, description="Only the runs this request started (a post's request id)"),
            OpenApiParameter("limit", int, description="At most this many (1-1000, default 100)"),
        ],
        responses={
            200: RunsAnswerSerializer,
            404: OpenApiResponse(description="session-not-found"),
        },
        summary="List the runs a session started that have not finished, or that failed",
    )
    def get(self, request: HttpRequest, session_id: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"), require_user=False)
        session = access_session(principal.org, session_id, reader=principal.reader)
        status = request.query_params.get("status") or "active"
        if status not in ("active", "failed"):
            raise Refusal("invalid-input", f'status must be "active" or "failed", not {status[:40]!r}.')
        started_by = request.query_params.get("startedBy") or None
        limit = int_param(request, "limit", 100, minimum=1, maximum=1000)
        if status == "failed":
            failed = list_failed_runs(session, reader=principal.reader, started_by=started_by, limit=limit)
            return Response(FailedRunPageSerializer({"sessionId": session.session_id, "runs": failed}).data)
        runs = list_active_runs(session, reader=principal.reader, started_by=started_by, limit=limit)
        return Response(RunPageSerializer({"sessionId": session.session_id, "runs": runs}).data)
