"""Request hygiene for the API, before any view runs: every answer is JSON in the
contract's shape."""

from __future__ import annotations

from django.http import HttpResponse, HttpResponseBadRequest, JsonResponse

from workforce.refusals import Refusal
from workforce.wire import text_problem

from .outages import database_unavailable, database_unavailable_headers


def refusal_json(refusal: Refusal) -> JsonResponse:
    """A refusal as the contract's error payload, outside DRF (with ``Retry-After`` when
    the refusal names one)."""
    response = JsonResponse({"requestId": None, "status": "failed", "error": refusal.as_error()}, status=refusal.http_status)
    if refusal.retry_after is not None:
        response["Retry-After"] = str(refusal.retry_after)
    return response


def _unstorable_field(request) -> str | None:
    """Why a page's form (urlencoded or multipart) cannot be kept, or None: a field name
    or value with a NUL or a lone surrogate (``workforce.wire.text_problem``)."""
    if request.method != "POST" or request.content_type not in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return None
    for key, values in request.POST.lists():
        for text in (key, *values):
            problem = text_problem(text)
            if problem:
                return f"The form field {key[:40]!r} {problem}."
    return None


class ApiHygieneMiddleware:
    """Refuse a path or query holding text no store can keep (a NUL, a lone surrogate)
    with a 400 ``invalid-input`` instead of a database error: JSON in the contract's
    shape on ``/api/`` paths, plain text on the pages, where a form field holding such
    text is refused the same way (``workforce.wire``: the one input rule; the API's JSON
    bodies are checked by its parser). For ``/api/`` paths, also give a chunked body (no
    Content-Length) its length so DRF reads it instead of seeing an empty body."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        api = request.path.startswith("/api/")
        texts = [request.path, *(v for values in request.GET.lists() for v in values[1]), *request.GET.keys()]
        problem = next((f"The URL {p}." for p in map(text_problem, texts) if p), None)
        if problem is None and not api:
            problem = _unstorable_field(request)
        if problem is not None:
            refusal = Refusal("invalid-input", problem)
            return refusal_json(refusal) if api else HttpResponseBadRequest(refusal.message, content_type="text/plain")
        if api:
            if not request.META.get("CONTENT_LENGTH") and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
                request.META["CONTENT_LENGTH"] = str(len(request.body))
        return self.get_response(request)

    def process_exception(self, request, exception):
        """A view outside DRF (a page included) that could not reach the database: 503
        ``database-unavailable`` with ``Retry-After`` (``unavailable_response``)."""
        return unavailable_response(request, exception)


def unavailable_response(request, exception: BaseException) -> HttpResponse | None:
    """The answer to a request ``exception`` ended when it is the database unreachable
    (``outages.database_unavailable``): on ``/api/`` the same JSON 503 as DRF's views
    (``errors.exception_handler``), on a page a short HTML 503; both with ``Retry-After``.
    None for any other exception."""
    refusal = database_unavailable(exception)
    if refusal is None:
        return None
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = refusal_json(refusal)
    else:
        response = HttpResponse(
            "<!doctype html><title>Service unavailable</title><h1>Service unavailable</h1>"
            "<p>The database did not answer; this page retries shortly.</p>",
            status=503,
            content_type="text/html; charset=utf-8",
        )
    for header, value in database_unavailable_headers().items():
        response[header] = value
    return response
