"""Request hygiene for the API, before any view runs: every answer is JSON in the
contract's shape."""

from __future__ import annotations

from django.http import JsonResponse

from workforce.refusals import Refusal
from workforce.wire import text_problem

from .outages import database_unavailable, database_unavailable_headers


def refusal_json(refusal: Refusal) -> JsonResponse:
    """A refusal as the contract's error payload, outside DRF."""
    return JsonResponse({"requestId": None, "status": "failed", "error": refusal.as_error()}, status=refusal.http_status)


class ApiHygieneMiddleware:
    """For ``/api/`` paths: refuse a path or query holding text no store can keep (a NUL,
    a lone surrogate) with a 400 instead of a database error, and give a chunked body
    (no Content-Length) its length so DRF reads it instead of seeing an empty body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            texts = [request.path, *(v for values in request.GET.lists() for v in values[1]), *request.GET.keys()]
            for text in texts:
                problem = text_problem(text)
                if problem:
                    return refusal_json(Refusal("invalid-input", f"The URL {problem}."))
            if not request.META.get("CONTENT_LENGTH") and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                request.META["CONTENT_LENGTH"] = str(len(request.body))
        return self.get_response(request)

    def process_exception(self, request, exception):
        """A view outside DRF that could not get a database connection: the same JSON 503
        ``database-unavailable`` as DRF's views (``errors.exception_handler``)."""
        if not request.path.startswith("/api/"):
            return None
        refusal = database_unavailable(exception)
        if refusal is None:
            return None
        response = refusal_json(refusal)
        for header, value in database_unavailable_headers().items():
            response[header] = value
        return response
