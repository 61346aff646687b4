"""Refusals and DRF errors rendered as the contract's error payload (docs/api.md)."""

from __future__ import annotations

import sys

from django.core.exceptions import RequestDataTooBig
from django.views.csrf import csrf_failure as django_csrf_failure
from django.views.decorators.csrf import csrf_exempt
from django.views.defaults import server_error as django_server_error
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from workforce.refusals import Refusal

from .middleware import refusal_json, unavailable_response
from .outages import database_unavailable, database_unavailable_headers
from .throttles import retry_after


def refusal_response(refusal: Refusal, *, request_id: str | None = None, **extra) -> Response:
    """``{"requestId", "status": "failed", "error": {"reason", "message"}}`` at the
    reason's status. ``requestId`` is null when no request could be recorded; a refusal
    with ``retry_after`` carries ``Retry-After``."""
    response = Response(
        {"requestId": request_id, **extra, "status": "failed", "error": refusal.as_error()},
        status=refusal.http_status,
    )
    if refusal.retry_after is not None:
        response["Retry-After"] = str(refusal.retry_after)
    return response


# Seconds a client is told to wait when the database refused a connection.
def exception_handler(exc, context):
    """DRF's handler, with Refusal and DRF's own errors in the contract's shape."""
    if isinstance(exc, Refusal):
        return refusal_response(exc)
    unavailable = database_unavailable(exc)
    if unavailable is not None:
        response = refusal_response(unavailable)
        for header, value in database_unavailable_headers().items():
            response[header] = value
        return response
    if isinstance(exc, exceptions.Throttled):
        seconds = retry_after(exc.wait)  # type: ignore[attr-defined]  # the DRF stubs leave out Throttled.wait (set by __init__)
        response = refusal_response(
            Refusal("throttled", f"Too many calls from this user or organization; retry in {seconds} s (Retry-After).")
        )
        response["Retry-After"] = seconds
        return response
    if isinstance(exc, RequestDataTooBig):
        return refusal_response(Refusal("payload-too-large", "The body is larger than this server accepts."))
    if isinstance(exc, exceptions.ParseError):
        return refusal_response(Refusal("invalid-input", f"The body is not valid JSON: {exc.detail}"))
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        denied = drf_exception_handler(exc, context)
        if denied is not None:  # always, for an APIException
            denied.data = {
                "requestId": None,
                "status": "failed",
                "error": Refusal("not-authenticated", str(exc.detail)).as_error(),
            }
        return denied
    handled = drf_exception_handler(exc, context)
    if handled is not None and isinstance(exc, exceptions.APIException):
        reason = {
            404: "not-found",
            405: "method-not-allowed",
            406: "not-acceptable",
            415: "unsupported-media-type",
            403: "forbidden",
        }.get(handled.status_code, "invalid-input")
        handled.data = {"requestId": None, "status": "failed", "error": {"reason": reason, "message": f"{reason}: {exc.detail}"}}
    return handled


@csrf_exempt  # it changes nothing: a POST with no CSRF token gets the 404, not Django's HTML 403
def api_not_found(request, *args, **kwargs):
    """Any ``/api/`` path no view answers, by any method: a JSON 404 in the contract's shape."""
    return refusal_json(Refusal("not-found", f"No API endpoint at {request.path[:200]}."))


def csrf_failure(request, reason: str = ""):
    """``CSRF_FAILURE_VIEW``: on an ``/api/`` path a JSON 403 ``forbidden`` in the
    contract's shape (DRF's session authentication answers the same); elsewhere (the
    admin) Django's own page."""
    if not request.path.startswith("/api/"):
        return django_csrf_failure(request, reason=reason)
    return refusal_json(Refusal("forbidden", f"CSRF Failed: {reason} Send the X-CSRFToken header, or use token auth."))


def server_error(request, *args, **kwargs):
    """``handler500``: on an ``/api/`` path a JSON 500 ``internal-error`` that names no
    exception (the log has it); elsewhere Django's own page. An exception that is the
    database unreachable, raised outside a view (a middleware reading the session), is
    the 503 ``database-unavailable`` a view's would be (``middleware.unavailable_response``)."""
    exception = sys.exc_info()[1]
    unavailable = None if exception is None else unavailable_response(request, exception)
    if unavailable is not None:
        return unavailable
    if not request.path.startswith("/api/"):
        return django_server_error(request)
    return refusal_json(Refusal("internal-error", "The server failed to answer; the error is in its log."))
