"""Request hygiene for the API, before any view runs: every answer is JSON in the
contract's shape."""
from __future__ import annotations

from django.http import JsonResponse

from workforce.refusals import Refusal
from workforce.wire import text_problem


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
