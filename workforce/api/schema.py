"""The OpenAPI schema of the HTTP contract (docs/architecture.md "The API's schema").

drf-spectacular builds it from the URLconf and the views' serializers; this module adds
what the URLconf cannot say:

- each public action of each registered kind as its own operation
  (``POST /api/flows/mailbox/{session_id}/actions/post``), its input a component of its
  own (``MailboxPostInput``), from the action's input serializer, and each action family
  a kind declares (``ACTION_FAMILIES``: the board tools, ``addTask_{boardSuffix}``) the
  same way from its JSON Schema. The generic ``{kind}/{action}`` operation stays for
  kinds registered later. Built from the registry when the schema is asked for, so a kind
  or action another app registers appears by itself.
- the error body on every operation's 4xx (and 503), per status, with the reason codes
  registered at that status (``workforce.refusals.registered_reasons``: the kernel's and
  every app's ``register_reasons``);
- the ``userId`` query parameter of the reads (the caller without authentication);
- the token security scheme, also when this server runs without authentication.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.views import APIView

from workforce.facets import ACTION_FAMILIES
from workforce.flows import Action, ActionFamily, registry
from workforce.refusals import UNREGISTERED_STATUS, registered_reasons

from .authentication import BearerTokenAuthentication
from .serializers import RequestSerializer

if TYPE_CHECKING:  # pragma: no cover
    from .views import FlowActionView

# The statuses every /api/ operation can answer with the error body, and those only an
# operation that takes a body can (the body too large, not JSON).
ERROR_STATUSES = (400, 401, 403, 404, 406, 409, 429, 503)
BODY_ERROR_STATUSES = (413, 415)
BODY_METHODS = {"POST", "PUT", "PATCH"}

STATUS_MEANINGS = {
    400: "The input, a query parameter or the userId is not acceptable.",
    401: "No valid credentials (only when the server runs with WORKFORCE_AUTH=token).",
    403: "The caller may not do this (not a member, another user's userId, the author is not a member).",
    404: "No such object in the caller's organization (another organization's, or another user's private conversation, reads the same).",
    406: "The Accept header asks for a format the API does not answer (it answers JSON).",
    409: "The object's state refuses the call.",
    413: "The body is larger than the server accepts.",
    415: "The body is not application/json.",
    429: "Too many calls from this user or organization (WORKFORCE_THROTTLE_*); retry after Retry-After seconds.",
    503: "The database or the dispatcher is unavailable, or the backlog is full (backlog-full); "
    "retry (Retry-After says when, for the database and the backlog).",
}

USER_ID_DESCRIPTION = (
    "Without authentication (WORKFORCE_AUTH=none) the caller names itself; a read that names nobody "
    "reads as nobody. With authentication it must be the authenticated caller, or it is refused (403)."
)


def error_component_name(status: int) -> str:
    return f"Error{status}"


def error_schema(status: int) -> dict:
    """The contract's error body at HTTP ``status``: ``{requestId, status: "failed",
    error: {reason, message}}``, ``reason`` one of the codes registered at ``status``.

    At 409 the codes are listed but not closed: a code nobody registered answers 409."""
    codes = sorted(code for code, code_status in registered_reasons().items() if code_status == status)
    reason: dict[str, Any] = {"type": "string"}
    if status == UNREGISTERED_STATUS:
        reason["description"] = (
            f"One of {', '.join(codes)}, or any other code no app registered (a state conflict)."
            if codes
            else "Any code no app registered (a state conflict)."
        )
    elif codes:
        reason["enum"] = codes
    return {
        "type": "object",
        "description": f"{STATUS_MEANINGS.get(status, 'Refused.')} The reason codes at {status}: {', '.join(codes) or 'none'}.",
        "properties": {
            "requestId": {
                "type": "string",
                "nullable": True,
                "description": "The failed request recorded on the session (an action call); null when none was recorded.",
            },
            "status": {"type": "string", "enum": ["failed"]},
            "error": {
                "type": "object",
                "properties": {
                    "reason": reason,
                    "message": {"type": "string", "description": '"<reason>: <detail>"'},
                },
                "required": ["reason", "message"],
            },
        },
        "required": ["requestId", "status", "error"],
    }


class WorkforceAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema (``DEFAULT_SCHEMA_CLASS``) with every ``/api/``
    operation's error bodies and, on reads, the ``userId`` query parameter. A view sets
    ``schema_user_id = False`` when it reads no caller (the index)."""

    def get_operation(self, path, path_regex, path_prefix, method, registry):  # noqa: D102
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None or not path.startswith("/api/"):
            return operation
        if method.upper() == "GET" and getattr(self.view, "schema_user_id", True):
            parameters = operation.setdefault("parameters", [])
            if not any(p.get("name") == "userId" and p.get("in") == "query" for p in parameters):
                parameters.append(
                    {
                        "name": "userId",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "string"},
                        "description": USER_ID_DESCRIPTION,
                    }
                )
        statuses = set(ERROR_STATUSES)
        if method.upper() in BODY_METHODS:
            statuses |= set(BODY_ERROR_STATUSES)
        responses = operation.setdefault("responses", {})
        statuses |= {int(code) for code in responses if code.isdigit() and int(code) >= 400}
        for status in sorted(statuses):
            component = ResolvedComponent(
                name=error_component_name(status),
                type=ResolvedComponent.SCHEMA,
                object=error_component_name(status),
                schema=error_schema(status),
            )
            registry.register_on_missing(component)
            declared = responses.get(str(status), {}).get("description")
            description = declared if declared and declared != "No response body" else STATUS_MEANINGS.get(status, "Refused.")
            responses[str(status)] = {"description": description, "content": {"application/json": {"schema": component.ref}}}
        return operation


# ----------------------------------------------------------------------------- per-action operations


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def openapi30(schema: Any) -> Any:
    """A JSON Schema written for tools (``"type": ["string", "null"]``) as OpenAPI 3.0
    writes it (``"type": "string", "nullable": true``); everything else as it is."""
    if isinstance(schema, list):
        return [openapi30(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: openapi30(value) for key, value in schema.items()}
    kind = out.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) == 1:
            out["type"] = others[0]
            if "null" in kind:
                out["nullable"] = True
        else:
            out.pop("type")
    if out.get("required") == []:
        out.pop("required")  # OpenAPI 3.0 wants a non-empty list or none
    return out


class ActionSchema(WorkforceAutoSchema):
    """The schema of one action's operation: the body ``{userId?, input}`` with ``input``
    the action's own component. Each documented action has a subclass of its own that
    sets ``target`` and ``component`` (drf-spectacular makes its instances itself, with
    no arguments)."""

    target: ClassVar[Action | ActionFamily]  # the action or action family documented
    component: ClassVar[str]  # the name of its input's schema component

    def _get_request_body(self, direction="request"):
        target = self.target
        name = self.component
        if isinstance(target, ActionFamily):
            schema = openapi30(target.input_schema)
            schema.setdefault("additionalProperties", False)
            component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
            self.registry.register_on_missing(component)
            input_required = bool(schema.get("required"))
        elif target.input_serializer is not None:
            named = type(name, (target.input_serializer,), {"__doc__": target.input_serializer.__doc__})
            component = self.resolve_serializer(named, direction)
            component.schema.setdefault("additionalProperties", False)
            for extra in sorted(target.allow_extra):
                component.schema.setdefault("properties", {})[extra] = {"description": "Accepted and ignored."}
            input_required = bool(component.schema.get("required"))
        else:
            properties = {extra: {"description": "Accepted and ignored."} for extra in sorted(target.allow_extra)}
            schema = {
                "type": "object",
                "description": f"{target.name} takes no input: send {{}} or leave input out.",
                "properties": properties,
                "additionalProperties": False,
            }
            component = ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
            self.registry.register_on_missing(component)
            input_required = False
        body = {
            "type": "object",
            "properties": {
                "userId": {"type": "string", "description": USER_ID_DESCRIPTION},
                "input": component.ref,
            },
            "additionalProperties": False,
        }
        if input_required:
            body["required"] = ["input"]
        return {"content": {"application/json": {"schema": body}}, "required": input_required}


def _action_endpoint(base_view: type[FlowActionView], kind: str, target: Action | ActionFamily) -> tuple[str, str, str, Any]:
    """One ``(path, route, method, callback)`` endpoint for drf-spectacular: a subclass of
    the flow action view documenting ``kind``'s action ``target``."""
    if isinstance(target, ActionFamily):
        name = target.template
        route_name = target.template.replace("{" + target.parameter + "}", f"<str:{target.parameter}>")
        component = f"{_camel(kind)}{_camel(target.template.split('{')[0])}ToolInput"
        description = target.description
        parameters = [OpenApiParameter(target.parameter, str, OpenApiParameter.PATH, description=target.parameter_description)]
        operation_id = f"{kind}_{target.template.split('{')[0].rstrip('_')}_board"
    else:
        name = target.name
        route_name = target.name
        component = f"{_camel(kind)}{_camel(target.name)}Input"
        description = target.description
        parameters = []
        operation_id = f"{kind}_{target.name}"
    parameters.append(OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False))

    def post(self, request, session_id, **kwargs):
        action = target.template.format(**kwargs) if isinstance(target, ActionFamily) else target.name
        return base_view.post(self, request, kind=kind, session_id=session_id, action=action)

    post.__doc__ = description
    decorated = extend_schema(
        operation_id=operation_id,
        summary=description or f"{kind}: {name}",
        description=f"{description}\n\nThe request is recorded on the session; its answer is the request (202) or the refusal.",
        parameters=parameters,
        responses={202: RequestSerializer},
        tags=[f"{kind} actions"],
    )(post)
    view_class = type(
        f"{_camel(kind)}{_camel(name)}ActionView",
        (base_view,),
        {
            "post": decorated,
            "schema": type(f"{_camel(kind)}{_camel(name)}Schema", (ActionSchema,), {"target": target, "component": component})(),
            "__doc__": description,
        },
    )
    if not issubclass(view_class, APIView):  # it is: a subclass of base_view
        raise TypeError(f"{base_view!r} is not an APIView")
    route = f"api/flows/{kind}/<str:session_id>/actions/{route_name}"
    path = "/" + re.sub(r"<str:(\w+)>", r"{\1}", route)
    return path, route, "POST", view_class.as_view()


def action_endpoints(endpoints: list) -> list:
    """drf-spectacular ``PREPROCESSING_HOOKS`` entry: beside the generic flow action
    endpoint, one endpoint per public action and action family of every registered kind."""
    out = []
    for endpoint in endpoints:
        out.append(endpoint)
        _, _, method, callback = endpoint
        base_view = getattr(callback, "cls", None)
        if method != "POST" or base_view is None or not getattr(base_view, "documents_flow_actions", False):
            continue
        for kind in registry.kinds():
            flow = registry.require(kind)
            for action in flow.actions.values():
                out.append(_action_endpoint(base_view, kind, action))
            for family in ACTION_FAMILIES.get(flow) or ():
                out.append(_action_endpoint(base_view, kind, family))
    return out


TOKEN_SCHEME = {
    "type": "apiKey",
    "in": "header",
    "name": "Authorization",
    "description": (
        'DRF token authentication: "Authorization: Token <key>" or "Authorization: Bearer <key>". Required '
        "when the server runs with WORKFORCE_AUTH=token (tokens are made in the admin); with WORKFORCE_AUTH=none "
        "the caller names itself with userId instead and no token is read."
    ),
}


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """``tokenAuth`` covers the Bearer form too (the scheme is the whole ``Authorization``
    header and ``TOKEN_SCHEME`` names both keywords), so the Bearer class adds no scheme and
    no requirement of its own. Without this, drf-spectacular's own token extension would
    match the subclass and register a second ``tokenAuth`` for it (a warning, and the
    requirement listed twice in every operation's ``security``)."""

    target_class = BearerTokenAuthentication
    name: list[str] = []  # no scheme of its own

    def get_security_requirement(self, auto_schema) -> list:
        """No requirement: the operation's ``tokenAuth`` is ``TokenAuthentication``'s."""
        return []

    def get_security_definition(self, auto_schema) -> list:
        """No definition (one per name, and it has none)."""
        return []


def security_schemes(result: dict, generator, request, public) -> dict:
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry: the token scheme is always in the
    schema (``tokenAuth``), with a description of when it applies."""
    schemes = result.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["tokenAuth"] = {**schemes.get("tokenAuth", {}), **TOKEN_SCHEME}
    if settings.WORKFORCE_AUTH == "token":
        result["security"] = [{"tokenAuth": []}]
    return result
