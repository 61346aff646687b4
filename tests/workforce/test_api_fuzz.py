"""A bounded property-based pass over the OpenAPI schema (schemathesis): every operation,
fed inputs generated from its own schema, answers without a server error (no 5xx), and
with a status, a content type and a body the schema documents for it.

Bounded so it stays well under a minute per database: a few examples per operation,
derandomized (the same cases on every run, so a failure reproduces), no shrinking
database. The calls go through the WSGI app in this process, inside the test's
transaction, against a small opened tree, so some hit real mailboxes and boards.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance, status_code_conformance

from ..boards.conftest import BOARD_TREE
from ..conftest import MEMBER

EXAMPLES_PER_OPERATION = 8  # inputs the schema allows
NEGATIVE_EXAMPLES_PER_OPERATION = 5  # inputs that break it: each must be refused, never a 5xx
# Ids of the opened tree, offered to the generator beside what it makes up itself:
# support.help holds the board escalations with boardActions: true.
KNOWN_IDS = {
    "session_id": "support.help",
    "mailbox_id": "support.help",
    "board_id": "support.help.escalations",
    "boardSuffix": "support_help_escalations",
}


CONFORMANCE = [status_code_conformance, content_type_conformance, response_schema_conformance]


def _streams(raw: dict, operation) -> bool:
    """True for an operation that answers an endless event stream: no bounded call can
    read it to its end (its own tests cover it)."""
    responses = raw["paths"][operation.path][operation.method.lower()].get("responses", {})
    media = {m for answer in responses.values() for m in answer.get("content", {})}
    return "text/event-stream" in media or operation.path.endswith("/stream")


@pytest.fixture
def wsgi_app():
    """The project's WSGI app, with Django's per-request connection closing off (as the
    test client has it), so the calls stay inside the test's transaction."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def _with_known_ids(raw: dict) -> dict:
    """The schema with the tree's ids as examples of the path ids and a caller as the
    example userId (test-only: the served schema can't know a deployment's ids)."""
    for item in raw["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["name"] in KNOWN_IDS:
                    parameter["schema"] = {**parameter["schema"], "example": KNOWN_IDS[parameter["name"]]}
                if parameter["name"] == "userId":
                    parameter["schema"] = {**parameter["schema"], "example": MEMBER}
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            if "userId" in body.get("properties", {}):
                body["properties"]["userId"] = {**body["properties"]["userId"], "example": MEMBER}
    return raw


def test_no_operation_answers_a_server_error(open_tree, wsgi_app, settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "localhost"]
    open_tree(BOARD_TREE)
    raw = _with_known_ids(SchemaGenerator().get_schema(request=None, public=True))
    schema = schemathesis.openapi.from_dict(raw)
    schema.app = wsgi_app
    failures: list[str] = []
    seen: dict[str, set[int]] = {}

    operations = [result.ok() for result in schema.get_all_operations()]
    operations = [operation for operation in operations if not _streams(raw, operation)]
    for operation in operations:
        _exercise(operation, GenerationMode.POSITIVE, EXAMPLES_PER_OPERATION, failures, seen)
        _exercise(operation, GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES_PER_OPERATION, failures, seen)

    assert not failures, "\n".join(failures)
    # The pass reached every operation, and got past the refusals somewhere.
    assert len(seen) == len(operations) > 20
    assert any(code < 300 for codes in seen.values() for code in codes)


def _exercise(operation, mode: GenerationMode, examples: int, failures: list[str], seen: dict[str, set[int]]) -> None:
    """Call ``operation`` with ``examples`` cases generated in ``mode`` (inputs its schema
    allows, or breaks); note each status it answered in ``seen``, and each 5xx or
    undocumented answer in ``failures``."""

    @hypothesis_settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case):
        response = case.call()
        seen.setdefault(operation.label, set()).add(response.status_code)
        if response.status_code >= 500:
            failures.append(f"{mode.value} {case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}")
            return
        try:
            case.validate_response(response, checks=CONFORMANCE)
        except Exception as failure:  # schemathesis raises one error naming every failed check
            failures.append(
                f"{mode.value} {case.method} {case.formatted_path} -> {response.status_code} undocumented: {str(failure)[:600]}"
            )

    try:
        call()
    except Unsatisfiable:
        # Nothing of the operation can be broken (GET /api/ takes no input at all).
        assert mode is GenerationMode.NEGATIVE, operation.label
