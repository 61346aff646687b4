"""Statements per HTTP post (issue "Speed", the web process's post): the HTTP layer adds
at most one statement to the service's post, the caller's organization read by
``resolve_principal``; the middleware, DRF and the 202's answer read nothing. The counts
are exact, per database, so a change that adds a statement to the HTTP post fails here.
These run inside the test's transaction, where that read is never cached: a served call
sends it only when the row is not cached (``workforce.org_cache``, tests/workforce/test_org_cache.py)."""

from __future__ import annotations

from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.conftest import MEMBER
from tests.mailboxes.test_query_counts import PLAIN_POST, REFUSED_POST, _post, _verbs

POST_PATH = "/api/flows/mailbox/eng.standup/actions/post"
# The caller's organization (no authentication: DEFAULT_ORG_ID), read before the action.
HTTP_OWN = ["SELECT"]


def _http_post(client, body: dict):
    return client.post(POST_PATH, data={"userId": MEMBER, "input": body}, content_type="application/json")


def test_an_http_post_is_the_services_post_and_one_read(open_tree, org, client, django_assert_num_queries):
    open_tree()
    _post(org, "first")
    with CaptureQueriesContext(connection) as service:
        _post(org, "second")
    assert _verbs(service) == PLAIN_POST[connection.vendor]
    expected = HTTP_OWN + PLAIN_POST[connection.vendor]
    with django_assert_num_queries(len(expected)):  # PostgreSQL 5, SQLite 9
        with CaptureQueriesContext(connection) as captured:
            answer = _http_post(client, {"body": "third"})
    assert answer.status_code == 202 and answer.json()["status"] == "completed"
    assert _verbs(captured) == expected
    assert 'FROM "workforce_organization"' in captured.captured_queries[0]["sql"]


def test_a_refused_http_post_is_the_services_refusal_and_one_read(open_tree, org, client, django_assert_num_queries):
    open_tree()
    _post(org, "first")
    expected = HTTP_OWN + REFUSED_POST[connection.vendor]
    with django_assert_num_queries(len(expected)):
        with CaptureQueriesContext(connection) as captured:
            answer = _http_post(client, {"body": "who?", "author": "mallory"})
    assert answer.status_code == 403 and answer.json()["error"]["reason"] == "author-not-a-member"
    assert _verbs(captured) == expected
