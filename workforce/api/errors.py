"""Refusals and DRF errors rendered as the contract's error payload (README "Run it")."""
from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from workforce.refusals import Refusal


def refusal_response(refusal: Refusal, *, request_id: str | None = None, **extra) -> Response:
    """``{"requestId", "status": "failed", "error": {"reason", "message"}}`` at the
    reason's status. ``requestId`` is null when no request could be recorded."""
    return Response(
        {"requestId": request_id, **extra, "status": "failed", "error": refusal.as_error()},
        status=refusal.http_status,
    )


def exception_handler(exc, context):
    """DRF's handler, with Refusal and DRF's own errors in the contract's shape."""
    if isinstance(exc, Refusal):
        return refusal_response(exc)
    if isinstance(exc, RequestDataTooBig):
        return refusal_response(Refusal("payload-too-large", "The body is larger than this server accepts."))
    if isinstance(exc, exceptions.ParseError):
        return refusal_response(Refusal("invalid-input", f"The body is not valid JSON: {exc.detail}"))
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        response = drf_exception_handler(exc, context)
        response.data = {"requestId": None, "status": "failed", "error": Refusal("not-authenticated", str(exc.detail)).as_error()}
        return response
    response = drf_exception_handler(exc, context)
    if response is not None and isinstance(exc, exceptions.APIException):
        reason = {
            404: "not-found", 405: "method-not-allowed", 406: "not-acceptable", 415: "unsupported-media-type", 403: "forbidden"
        }.get(
            response.status_code, "invalid-input"
        )
        response.data = {"requestId": None, "status": "failed", "error": {"reason": reason, "message": f"{reason}: {exc.detail}"}}
    return response


def api_not_found(request, *args, **kwargs):
    """Any ``/api/`` path no view answers: a JSON 404 in the contract's shape."""
    from .middleware import refusal_json

    return refusal_json(Refusal("not-found", f"No API endpoint at {request.path[:200]}."))
