"""The request every page sees: django-htmx's ``HtmxMiddleware`` (in ``MIDDLEWARE``) sets
``request.htmx`` on each one."""

from __future__ import annotations

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails


class HtmxHttpRequest(HttpRequest):
    """An ``HttpRequest`` with ``htmx`` (truthy when the request came from htmx, with its
    ``HX-*`` headers read), as the middleware leaves it. For annotations only."""

    htmx: HtmxDetails
