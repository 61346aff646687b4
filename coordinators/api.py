"""Worker sessions over HTTP (spec 004 "Talking to it", "Changing the delegates"):

- ``POST /api/workers/{worker}/sessions`` ``{"userId", "sessionId"?, "state"?}``: the
  caller's session with a worker (``ensureWorkerSession``); 201 when created, 200 when
  it was there. A state carrying ``delegates`` or ``fallback`` is refused with 400.
- ``GET /api/workers/{worker}/sessions?userId=&filingSessionId=``: the session the
  worker works a coordinator conversation's posts in (``findWorkerSession``); without
  ``filingSessionId``, the caller's own session with the worker. 404 when there is none.

Talk to a coordinator session with the flow action endpoint:
``POST /api/flows/coordinator/{sessionId}/actions/run`` ``{"input": {"message": ...}}``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.api.errors import refusal_response
from workforce.principals import resolve_principal
from workforce.refusals import Refusal

from .queries import find_worker_session
from .services import do_ensure_worker_session


class WorkerSessionBody(serializers.Serializer):
    userId = serializers.CharField(required=False)
    sessionId = serializers.CharField(required=False)
    state = serializers.JSONField(required=False)


class WorkerSessionAnswer(serializers.Serializer):
    sessionId = serializers.CharField()
    flowKind = serializers.CharField()
    worker = serializers.CharField()
    created = serializers.BooleanField(required=False)


class WorkerSessionsView(APIView):
    """Open or find a session with a worker."""

    @extend_schema(
        request=WorkerSessionBody,
        responses={200: WorkerSessionAnswer, 201: WorkerSessionAnswer},
        summary="Open (or reopen) your session with a worker",
    )
    def post(self, request: HttpRequest, worker: str) -> Response:
        body = request.data
        if not isinstance(body, dict):
            return refusal_response(Refusal("invalid-input", "The body must be a JSON object."))
        unknown = sorted(set(body) - {"userId", "sessionId", "state"})
        if unknown:
            return refusal_response(
                Refusal("invalid-input", f"Unknown body keys: {', '.join(unknown)}; send userId, sessionId and state.")
            )
        session_id = body.get("sessionId")
        if session_id is not None and (not isinstance(session_id, str) or "/" in session_id):
            return refusal_response(Refusal("invalid-input", "sessionId must be an id without slashes."))
        principal = resolve_principal(request, body.get("userId"))
        session, created = do_ensure_worker_session(
            principal.org, principal.user_id, worker, session_id=session_id, state=body.get("state")
        )
        data = {"sessionId": session.session_id, "flowKind": session.flow_kind, "worker": worker, "created": created}
        return Response(data, status=201 if created else 200)

    @extend_schema(
        parameters=[OpenApiParameter("filingSessionId", str, description="A coordinator conversation's filingSessionId")],
        responses={200: WorkerSessionAnswer},
        summary="Find the session a worker works in",
    )
    def get(self, request: HttpRequest, worker: str) -> Response:
        principal = resolve_principal(request, request.query_params.get("userId"))
        session = find_worker_session(
            principal.org, principal.user_id, worker=worker, filing_session_id=request.query_params.get("filingSessionId")
        )
        if session is None:
            raise Refusal("session-not-found", f'No session of "{worker}" was found.')
        return Response({"sessionId": session.session_id, "flowKind": session.flow_kind, "worker": worker})
