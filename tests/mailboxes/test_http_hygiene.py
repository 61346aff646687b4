"""Bad input never reaches the database as a database error, and every /api/ answer is
JSON in the contract's shape, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import pytest

from mailboxes.models import Line
from workforce.models import Request, Session

from .test_http import assert_failed, post


def raw_post(client, body: bytes, path="/api/flows/mailbox/eng.standup/actions/post", **extra):
    return client.generic("POST", path, body, content_type="application/json", **extra)


@pytest.mark.parametrize(
    "body",
    [
        b'{"userId":"u1","input":{"body":"x","n":1e400}}',
        b'{"userId":"u1","input":{"body":"a\\u0000b"}}',
        b'{"userId":"u1","input":{"body":"x\\ud800"}}',
        b'{"userId":"u1","input":{"body":"x","k":' + b"[" * 3000 + b"]" * 3000 + b"}}",
        b'{"userId":"u\\u0000","input":{"body":"x"}}',
        b'{"userId":"' + b"u" * 201 + b'","input":{"body":"x"}}',
    ],
    ids=["infinity", "nul", "lone-surrogate", "deep-nesting", "nul-user", "long-user"],
)
def test_input_the_store_cannot_keep_is_invalid_input_and_writes_nothing(client, opened, body):
    assert_failed(raw_post(client, body), 400, "invalid-input")
    assert not Line.objects.exists()
    assert not Request.objects.exists()


def test_a_session_id_longer_than_300_characters_is_invalid_input(client, opened):
    assert_failed(post(client, {}, session_id="x" * 301, action="read"), 400, "invalid-input")
    assert not Session.objects.filter(session_id__startswith="xxx").exists()


@pytest.mark.parametrize(
    "path",
    [
        "/api/sessions/a%00b/items",
        "/api/sessions/a%00b/requests",
        "/api/requests/req_%00",
        "/api/mailboxes/eng.standup%00/transcript",
        "/api/sessions/eng.standup/items?itemTypes=%00",
    ],
)
def test_a_nul_in_the_url_is_invalid_input(client, opened, path):
    assert_failed(client.get(path), 400, "invalid-input")


@pytest.mark.parametrize("path", ["/api/nope", "/api/flows/mailbox/eng.standup/actions/post/", "/api/mailboxes//transcript"])
def test_an_unknown_api_path_is_a_json_404(client, opened, path):
    assert_failed(client.get(path), 404, "not-found")


def test_format_override_is_off(client, opened):
    response = client.get("/api/mailboxes/eng.standup/transcript?format=xml")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")


def test_an_unacceptable_accept_header_is_406_not_acceptable(client, opened):
    assert_failed(client.get("/api/mailboxes/eng.standup/transcript", HTTP_ACCEPT="application/xml"), 406, "not-acceptable")


def test_a_form_body_is_refused_415(client, opened):
    response = client.post(
        "/api/flows/mailbox/eng.standup/actions/post", "userId=evil", content_type="application/x-www-form-urlencoded"
    )
    assert_failed(response, 415, "unsupported-media-type")
    assert not Line.objects.exists()


def test_a_body_over_the_upload_limit_is_413(client, opened, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = b'{"userId":"u1","input":{"body":"' + b"x" * 2000 + b'"}}'
    assert_failed(raw_post(client, body), 413, "payload-too-large")
    assert not Line.objects.exists()


def test_unknown_keys_are_listed_boundedly(client, opened):
    data = assert_failed(post(client, {"body": "x", **{f"k{i}": 1 for i in range(500)}}), 400, "invalid-input")
    assert "and 490 more" in data["error"]["message"]
    assert len(data["error"]["message"]) < 2000


@pytest.mark.parametrize("value", ["1_000", "+5", "\uff15", "-1", "1e3"])
def test_cursors_are_plain_digits(client, opened, value):
    assert_failed(client.get(f"/api/mailboxes/eng.standup/transcript?after={value}"), 400, "invalid-input")


def test_an_identical_retry_with_non_object_input_replays_the_first_answer(client, opened):
    for _ in range(2):
        response = client.post(
            "/api/flows/mailbox/eng.standup/actions/post",
            {"userId": "u1", "input": "hello"},
            format="json",
            headers={"Idempotency-Key": "k-str"},
        )
        assert_failed(response, 400, "invalid-input")
    assert Request.objects.filter(idempotency_key="k-str").count() == 1


def test_a_client_cannot_create_a_seat_conversation_id(client, opened):
    """``<mailbox>:<seat>`` ids are the server's: a client taking one first would leave
    the seat unable to hear that mailbox."""
    assert_failed(post(client, {}, session_id="eng.standup:eng.lead", action="read"), 404, "session-not-found")
    assert not Session.objects.filter(session_id="eng.standup:eng.lead").exists()
