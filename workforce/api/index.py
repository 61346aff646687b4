"""``GET /api/``: the index of the API's endpoints, read from the URLconf (docs/architecture.md
"The API's schema"), so an endpoint another app adds is listed by itself."""

from __future__ import annotations

import re
from collections.abc import Iterator

from django.urls import URLPattern, URLResolver, get_resolver, reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request as HttpRequest
from rest_framework.response import Response
from rest_framework.views import APIView

from workforce.facets import ACTION_FAMILIES
from workforce.flows import registry

from .errors import api_not_found

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")
_LISTED_METHODS = ("get", "post", "put", "patch", "delete")


def _walk(patterns, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _walk(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern), entry


def _view_class(callback):
    return getattr(callback, "cls", None) or getattr(callback, "view_class", None)


def _summary(view_class, callback) -> str:
    """The first paragraph of the view's docstring, without reST markup."""
    doc = (view_class or callback).__doc__ or ""
    return " ".join(doc.strip().split("\n\n")[0].split()).replace("``", "")


def api_endpoints() -> list[dict]:
    """Every ``/api/`` route of the URLconf, in its order: ``{path, name, methods,
    summary}`` with the path's variables as ``{name}`` (OpenAPI's template). The
    catch-all that answers unknown paths is left out; a route given as a regular
    expression is listed as written."""
    out = []
    for route, pattern in _walk(get_resolver().url_patterns):
        if not route.lstrip("^").startswith("api/") or pattern.callback is api_not_found:
            continue
        path = "/" + _CONVERTER.sub(r"{\1}", route.lstrip("^").rstrip("$"))
        view_class = _view_class(pattern.callback)
        methods = getattr(pattern.callback, "http_methods", None)  # a plain view may say
        if view_class is not None:
            methods = [m.upper() for m in _LISTED_METHODS if m in view_class.http_method_names and hasattr(view_class, m)]
        out.append({"path": path, "name": pattern.name, "methods": methods, "summary": _summary(view_class, pattern.callback)})
    return out


def flow_actions() -> list[dict]:
    """Every public action of every registered kind, and each action family a kind
    declares (``addTask_{boardSuffix}``): ``{kind, action, path, summary}``, the path as
    the schema's per-action operation names it. Internal actions are no client's and are
    left out."""
    out = []
    for kind in registry.kinds():
        flow = registry.require(kind)
        named = [(action.name, action.description) for action in flow.actions.values()]
        named += [(family.template, family.description) for family in ACTION_FAMILIES.get(flow) or ()]
        for name, summary in named:
            path = f"/api/flows/{kind}/{{session_id}}/actions/{name}"
            out.append({"kind": kind, "action": name, "path": path, "summary": summary})
    return out


class ApiIndexView(APIView):
    """The API's endpoints, each kind's actions, its OpenAPI schema and its docs page."""

    schema_user_id = False  # it reads no caller (workforce.api.schema)

    @extend_schema(
        responses={
            200: inline_serializer(
                "ApiIndex",
                {
                    "title": serializers.CharField(),
                    "schema": serializers.URLField(help_text="The OpenAPI schema."),
                    "docs": serializers.URLField(help_text="Swagger UI over the schema."),
                    "actions": inline_serializer(
                        "ApiAction",
                        {
                            "kind": serializers.CharField(),
                            "action": serializers.CharField(help_text="The action's name, or a template of names."),
                            "path": serializers.CharField(help_text="POST here with {userId?, input}."),
                            "summary": serializers.CharField(),
                        },
                        many=True,
                    ),
                    "endpoints": inline_serializer(
                        "ApiEndpoint",
                        {
                            "path": serializers.CharField(help_text="The path, its variables as {name}."),
                            "name": serializers.CharField(allow_null=True),
                            "methods": serializers.ListField(child=serializers.CharField(), allow_null=True),
                            "summary": serializers.CharField(),
                        },
                        many=True,
                    ),
                },
            )
        },
        summary="List the API's endpoints",
        tags=["index"],
    )
    def get(self, request: HttpRequest) -> Response:
        return Response(
            {
                "title": "Workforce server API",
                "schema": request.build_absolute_uri(reverse("schema")),
                "docs": request.build_absolute_uri(reverse("docs")),
                "endpoints": api_endpoints(),
                "actions": flow_actions(),
            }
        )
