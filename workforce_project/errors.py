"""The site's 404 and 403 pages (``handler404``, ``handler403``): styled pages with the
site's navigation (``web/templates/404.html``, ``403.html``) everywhere but ``/api/``,
where they stay the API's JSON errors in the contract's shape (docs/pages.md "When a
page is not there")."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.defaults import page_not_found as django_page_not_found
from django.views.defaults import permission_denied as django_permission_denied

from workforce.api.errors import api_not_found
from workforce.api.middleware import refusal_json
from workforce.refusals import Refusal


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: on an ``/api/`` path the JSON 404 ``not-found``
    (``workforce.api.errors.api_not_found``); elsewhere ``404.html``, which shows the
    exception's message (the views' ``Http404`` messages name what was not found), or
    the path when no view took it."""
    if _is_api(request):
        return api_not_found(request)
    message = exception.args[0] if exception.args else ""
    if not isinstance(message, str):  # the URL resolver's: what it tried, not a sentence; the page names the path
        exception = Http404("")
    return django_page_not_found(request, exception, template_name="404.html")


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler403``: on an ``/api/`` path a JSON 403 ``forbidden``; elsewhere
    ``403.html`` with the exception's message."""
    if _is_api(request):
        message = str(exception) or "You may not do this."
        return refusal_json(Refusal("forbidden", message[:500]))
    return django_permission_denied(request, exception, template_name="403.html")
