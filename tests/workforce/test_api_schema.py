"""The OpenAPI schema (``GET /api/schema/``, docs/architecture.md "The API's schema"): valid
OpenAPI 3, each kind's action its own operation and input component, the error body on
every 4xx with the reason codes registered at that status, 401/413/415, the token
security scheme and the query parameters."""

from __future__ import annotations

import pytest
from django.test import override_settings
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema
from openapi_spec_validator import validate as validate_openapi
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from workforce.api.authentication import BearerTokenAuthentication
from workforce.flows import Action, FlowKind, registry
from workforce.refusals import _statuses, register_reason, registered_reasons

MAILBOX_ACTIONS = "/api/flows/mailbox/{session_id}/actions/"
COORDINATOR_ACTIONS = "/api/flows/coordinator/{session_id}/actions/"
BOARD_TOOLS = ("addTask", "assignTask", "updateTask", "listTasks", "completeTask", "failTask", "blockTask", "cancelTask")
METHODS = ("get", "post", "put", "patch", "delete")


def build_schema() -> dict:
    """The schema as ``GET /api/schema/`` serves it (its JSON, parsed)."""
    return SchemaGenerator().get_schema(request=None, public=True)


@pytest.fixture
def schema(db):
    return build_schema()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def resolve(schema: dict, ref: dict) -> dict:
    name = ref["$ref"].rsplit("/", 1)[1]
    return schema["components"]["schemas"][name]


def input_component(schema: dict, path: str) -> dict:
    body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert set(body["properties"]) == {"userId", "input"} and body["additionalProperties"] is False
    return resolve(schema, body["properties"]["input"])


def test_the_served_schema_is_valid_openapi_and_generates_without_a_warning(client, db):
    GENERATOR_STATS.reset()
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    served = response.json()
    assert not GENERATOR_STATS, "drf-spectacular warned or failed while generating the schema"
    assert served["openapi"].startswith("3.0")
    validate_schema(served)  # drf-spectacular's own check, against the OpenAPI 3.0 JSON Schema
    validate_openapi(served)  # openapi-spec-validator: refs resolve, parameters match the templates


def test_each_mailbox_action_has_its_own_operation_and_input(schema):
    post = input_component(schema, MAILBOX_ACTIONS + "post")
    assert post["properties"]["body"] == {"type": "string", "maxLength": 32000}
    assert post["required"] == ["body"] and set(post["properties"]) == {"body", "author"}
    assert post["additionalProperties"] is False  # an undeclared key is invalid-input
    read = input_component(schema, MAILBOX_ACTIONS + "read")
    assert read["additionalProperties"] is False and set(read["properties"]) == {"after"}  # accepted, ignored
    file_task = input_component(schema, MAILBOX_ACTIONS + "fileTask")
    assert file_task["required"] == ["board", "goal"]
    assert {"title", "context", "assignee", "priority", "maxAttempts", "labels", "input", "author"} <= set(
        file_task["properties"]
    )
    assert file_task["properties"]["labels"]["type"] == "array"
    assert input_component(schema, MAILBOX_ACTIONS + "readBoard")["required"] == ["board"]
    ids = {op["operationId"] for _, _, op in operations(schema)}
    assert {"mailbox_post", "mailbox_read", "mailbox_fileTask", "mailbox_readBoard"} <= ids
    # Internal actions are no client's: not in the schema.
    assert MAILBOX_ACTIONS + "seatPost" not in schema["paths"] and MAILBOX_ACTIONS + "answer" not in schema["paths"]


def test_the_board_tools_are_documented_as_action_families(schema):
    for tool in BOARD_TOOLS:
        path = MAILBOX_ACTIONS + tool + "_{boardSuffix}"
        parameters = {p["name"]: p for p in schema["paths"][path]["post"]["parameters"]}
        assert parameters["boardSuffix"]["in"] == "path" and parameters["boardSuffix"]["required"] is True
        component = input_component(schema, path)
        assert component["additionalProperties"] is False
    add = input_component(schema, MAILBOX_ACTIONS + "addTask_{boardSuffix}")
    assert add["required"] == ["goal"] and add["properties"]["maxAttempts"]["minimum"] == 1
    assign = input_component(schema, MAILBOX_ACTIONS + "assignTask_{boardSuffix}")
    # The tool's ["string", "null"] is written as OpenAPI 3.0 writes it.
    assert assign["properties"]["assignee"]["type"] == "string" and assign["properties"]["assignee"]["nullable"] is True
    assert "required" not in input_component(schema, MAILBOX_ACTIONS + "listTasks_{boardSuffix}")


def test_each_coordinator_action_has_its_own_input(schema):
    assert input_component(schema, COORDINATOR_ACTIONS + "run")["required"] == ["message"]
    assert set(input_component(schema, COORDINATOR_ACTIONS + "addDelegate")["properties"]) == {"worker", "note"}
    assert input_component(schema, COORDINATOR_ACTIONS + "removeDelegate")["required"] == ["worker"]
    assert input_component(schema, COORDINATOR_ACTIONS + "setFallback")["properties"]["worker"]["nullable"] is True
    assert input_component(schema, COORDINATOR_ACTIONS + "listDelegates")["properties"] == {}


def test_the_generic_action_operation_stays_for_kinds_registered_later(schema):
    assert "post" in schema["paths"]["/api/flows/{kind}/{session_id}/actions/{action}"]


class ProbeInput(serializers.Serializer):
    depth = serializers.IntegerField(min_value=1)


def test_a_kind_registered_by_another_app_appears_by_itself(db):
    registry.register(
        FlowKind("probe", actions={"sound": Action("sound", lambda ctx, data: {}, ProbeInput, description="Sound.")})
    )
    try:
        schema = build_schema()
    finally:
        registry.unregister("probe")
    component = input_component(schema, "/api/flows/probe/{session_id}/actions/sound")
    assert component["properties"]["depth"]["minimum"] == 1 and component["required"] == ["depth"]
    assert "/api/flows/probe/{session_id}/actions/sound" not in build_schema()["paths"]


def test_every_operation_documents_the_error_body_per_status(schema):
    for path, method, operation in operations(schema):
        statuses = {400, 401, 403, 404, 406, 409, 503} | ({413, 415} if method == "post" else set())
        documented = {int(code) for code in operation["responses"] if code.isdigit()}
        assert statuses <= documented, (path, method, statuses - documented)
        for status in statuses:
            content = operation["responses"][str(status)]["content"]["application/json"]["schema"]
            assert content == {"$ref": f"#/components/schemas/Error{status}"}, (path, method, status)


def test_the_error_bodies_carry_the_reason_codes_registered_at_their_status(schema):
    reasons = registered_reasons()
    for status in (400, 401, 403, 404, 406, 413, 415, 503):
        error = schema["components"]["schemas"][f"Error{status}"]
        assert error["required"] == ["requestId", "status", "error"]
        assert error["properties"]["status"]["enum"] == ["failed"]
        reason = error["properties"]["error"]["properties"]["reason"]
        assert reason["enum"] == sorted(code for code, s in reasons.items() if s == status), status
    # The apps' registries, not only the kernel's.
    enum_404 = schema["components"]["schemas"]["Error404"]["properties"]["error"]["properties"]["reason"]["enum"]
    assert {"mailbox-not-bound", "board-not-declared", "task_not_found", "coordinator-not-found", "session-not-found"} <= set(
        enum_404
    )
    assert (
        "author-not-a-member"
        in schema["components"]["schemas"]["Error403"]["properties"]["error"]["properties"]["reason"]["enum"]
    )
    assert schema["components"]["schemas"]["Error401"]["properties"]["error"]["properties"]["reason"]["enum"] == [
        "not-authenticated",
        "webhook-signature-invalid",  # mail's forge webhook
    ]
    assert schema["components"]["schemas"]["Error413"]["properties"]["error"]["properties"]["reason"]["enum"] == [
        "payload-too-large"
    ]
    assert schema["components"]["schemas"]["Error415"]["properties"]["error"]["properties"]["reason"]["enum"] == [
        "unsupported-media-type"
    ]
    # 409 is open: a code nobody registered answers 409 too; the registered ones are named.
    reason_409 = schema["components"]["schemas"]["Error409"]["properties"]["error"]["properties"]["reason"]
    assert "enum" not in reason_409 and "mailbox-is-a-template" in reason_409["description"]


def test_a_reason_an_app_registers_later_is_in_the_schema(db):
    register_reason("probe-went-missing", 404)
    try:
        schema = build_schema()
    finally:
        _statuses.pop("probe-went-missing")
    assert (
        "probe-went-missing" in schema["components"]["schemas"]["Error404"]["properties"]["error"]["properties"]["reason"]["enum"]
    )


def test_the_real_refusals_have_the_documented_shape(client, schema):
    answer = client.post(
        "/api/flows/mailbox/nowhere/actions/post", {"userId": "u_42", "input": {"body": "hi"}}, content_type="application/json"
    )
    assert answer.status_code == 404
    body = answer.json()
    error = schema["components"]["schemas"]["Error404"]
    assert set(error["required"]) <= set(body) and body["status"] == "failed"
    assert body["error"]["reason"] in error["properties"]["error"]["properties"]["reason"]["enum"]
    wrong_type = client.post("/api/flows/mailbox/nowhere/actions/post", "body=hi", content_type="text/plain")
    assert wrong_type.status_code == 415 and wrong_type.json()["error"]["reason"] == "unsupported-media-type"


def _parameters(schema: dict, path: str, method: str = "get") -> dict:
    return {(p["in"], p["name"]): p for p in schema["paths"][path][method].get("parameters", [])}


def test_the_query_parameters_are_documented(schema):
    assert {("query", n) for n in ("mailbox", "status", "limit", "offset", "userId")} <= set(_parameters(schema, "/api/boards"))
    assert _parameters(schema, "/api/boards")[("query", "status")]["schema"]["enum"]
    assert {("query", n) for n in ("itemTypes", "after", "limit", "userId")} <= set(
        _parameters(schema, "/api/sessions/{session_id}/items")
    )
    assert {("query", n) for n in ("includeResultOutput", "limit", "userId")} <= set(
        _parameters(schema, "/api/sessions/{session_id}/requests")
    )
    assert {("query", n) for n in ("after", "limit", "userId")} <= set(
        _parameters(schema, "/api/mailboxes/{mailbox_id}/transcript")
    )
    assert {("query", n) for n in ("status", "assignee", "after", "limit", "userId")} <= set(
        _parameters(schema, "/api/boards/{board_id}/tasks")
    )
    assert ("query", "userId") in _parameters(schema, "/api/requests/{request_id}")
    assert ("header", "Idempotency-Key") in _parameters(schema, MAILBOX_ACTIONS + "post", "post")
    assert ("query", "userId") not in _parameters(schema, "/api/")  # the index reads no caller
    # Every GET under /api/ except the index says who may call it.
    for path, method, operation in operations(schema):
        if method == "get" and path != "/api/":
            assert ("query", "userId") in {(p["in"], p["name"]) for p in operation.get("parameters", [])}, path


def test_the_token_scheme_is_declared_without_authentication(schema):
    scheme = schema["components"]["securitySchemes"]["tokenAuth"]
    assert scheme["type"] == "apiKey" and scheme["in"] == "header" and scheme["name"] == "Authorization"
    assert "WORKFORCE_AUTH=token" in scheme["description"]
    assert "security" not in schema  # nothing is required of a caller in development


def test_with_token_authentication_every_operation_requires_the_token(db, monkeypatch):
    # Authentication classes are read when the views are defined: patch them as
    # WORKFORCE_AUTH=token sets them (workforce_project.settings REST_FRAMEWORK).
    monkeypatch.setattr(
        APIView, "authentication_classes", [TokenAuthentication, BearerTokenAuthentication, SessionAuthentication]
    )
    monkeypatch.setattr(APIView, "permission_classes", [IsAuthenticated])
    GENERATOR_STATS.reset()
    with override_settings(WORKFORCE_AUTH="token"):
        schema = build_schema()
    assert not GENERATOR_STATS, "drf-spectacular warned while generating the schema"  # the Bearer class has its extension
    validate_openapi(schema)
    assert schema["security"] == [{"tokenAuth": []}]
    assert schema["components"]["securitySchemes"]["tokenAuth"]["name"] == "Authorization"
    for path, method, operation in operations(schema):
        assert operation["security"].count({"tokenAuth": []}) == 1 and {} not in operation["security"], (path, method)
        assert "401" in operation["responses"]
