"""``GET /api/``: the index of the endpoints, read from the URLconf; the docs page (Swagger
UI) and DRF's browsable API load only this server's own static files, so both work offline."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.views import APIView

from ..conftest import STANDARD_TREE

ASSET = re.compile(r"""<(?:script|link|img)\b[^>]*?\b(?:src|href)=["']([^"']+)["']""", re.IGNORECASE)


@pytest.fixture
def opened(open_tree):
    return open_tree(STANDARD_TREE)


def _index(client) -> dict:
    response = client.get("/api/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def test_the_index_lists_the_endpoints_with_their_methods(client, db):
    index = _index(client)
    assert index["schema"] == "http://testserver/api/schema/" and index["docs"] == "http://testserver/api/docs/"
    endpoints = {e["path"]: e for e in index["endpoints"]}
    expected = {
        "/api/": ["GET"],
        "/api/boards": ["GET"],
        "/api/boards/{board_id}/tasks": ["GET"],
        "/api/flows/{kind}/{session_id}/actions/{action}": ["POST"],
        "/api/requests/{request_id}": ["GET"],
        "/api/sessions/{session_id}/items": ["GET"],
        "/api/sessions/{session_id}/requests": ["GET"],
        "/api/mailboxes/{mailbox_id}/transcript": ["GET"],
        "/api/workers/{worker}/sessions": ["GET", "POST"],
        "/api/schema/": ["GET"],
        "/api/docs/": ["GET"],
    }
    for path, methods in expected.items():
        assert endpoints[path]["methods"] == methods, path
    assert endpoints["/api/boards"]["name"] == "boards"
    assert endpoints["/api/boards"]["summary"] == "The organization's boards, by ledger id, paged."
    # The catch-all that answers unknown paths is no endpoint.
    assert not any(path.startswith("/api/^") or path == "/api" for path in endpoints)
    assert all(path.startswith("/api/") for path in endpoints)


def test_the_index_lists_each_kind_s_actions_as_the_schema_names_them(client, db):
    index = _index(client)
    actions = {(a["kind"], a["action"]): a for a in index["actions"]}
    for name in ("post", "read", "fileTask", "readBoard", "addTask_{boardSuffix}", "cancelTask_{boardSuffix}"):
        assert actions[("mailbox", name)]["path"] == f"/api/flows/mailbox/{{session_id}}/actions/{name}"
    for name in ("run", "addDelegate", "removeDelegate", "setFallback", "listDelegates"):
        assert ("coordinator", name) in actions
    assert actions[("mailbox", "post")]["summary"] == "Post a line to the mailbox (or a project's room)."
    assert ("mailbox", "seatPost") not in actions and ("mailbox", "answer") not in actions  # internal
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert all("post" in schema["paths"][a["path"]] for a in index["actions"])


@override_settings(ROOT_URLCONF="tests.workforce.urls_with_more")
def test_an_endpoint_another_app_adds_is_listed_by_itself(client, db):
    endpoints = {e["path"]: e for e in _index(client)["endpoints"]}
    assert endpoints["/api/probes"] == {
        "path": "/api/probes",
        "name": "probes",
        "methods": ["GET"],
        "summary": "The organization's probes (an endpoint no app has).",
    }


def test_the_roster_endpoints_are_listed(client, db):
    endpoints = {e["path"]: e for e in _index(client)["endpoints"]}
    assert endpoints["/api/workers"]["methods"] == ["GET", "POST"]
    assert set(endpoints["/api/workers/{worker}"]["methods"]) >= {"GET", "DELETE"}
    assert endpoints["/api/workers/{worker}/fork"]["methods"] == ["POST"]


def test_every_drf_endpoint_is_in_the_schema(client, db):
    """drf-spectacular documents DRF views; a plain Django view (none yet) is listed in
    the index only."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    for endpoint in _index(client)["endpoints"]:
        view_class = getattr(resolve(re.sub(r"\{\w+\}", "x", endpoint["path"])).func, "cls", None)
        if endpoint["path"] in {"/api/schema/", "/api/docs/"} or view_class is None or not issubclass(view_class, APIView):
            continue
        item = schema["paths"][endpoint["path"]]
        assert {m.lower() for m in endpoint["methods"]} <= set(item), endpoint["path"]


def _local_assets(client, html: str) -> list[str]:
    assets = ASSET.findall(html)
    assert assets, "the page loads no script or style at all"
    for url in assets:
        assert url.startswith("/static/"), f"{url} is not one of this server's own files"
        assert client.get(url).status_code == 200, url
    return assets


def test_the_docs_page_loads_swagger_ui_from_local_static_files(client, db):
    response = client.get("/api/docs/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    assets = _local_assets(client, html)
    assert any(url.endswith("swagger-ui-bundle.js") for url in assets)
    assert not re.search(r"https?://", html), "the docs page names an outside URL"
    # It reads this server's schema, and fetches no validator badge from outside.
    assert 'url: "/api/schema/"' in html
    assert re.search(r'"validatorUrl":\s*null', html)


@pytest.mark.parametrize(
    "path", ["/api/", "/api/boards", "/api/sessions/eng.standup/items", "/api/mailboxes/eng.standup/transcript"]
)
def test_the_browsable_api_stays_and_loads_only_local_files(client, opened, path):
    response = client.get(path, HTTP_ACCEPT="text/html")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    assets = _local_assets(client, response.content.decode())
    assert any("rest_framework/js/" in url for url in assets)


def test_html_on_every_endpoint_answers_without_a_server_error(client, opened):
    for endpoint in _index(client)["endpoints"]:
        path = re.sub(r"\{\w+\}", "eng.standup", endpoint["path"])
        for method in endpoint["methods"] or ("GET", "POST"):  # a plain Django view's are not listed
            response = client.generic(method, path, b"{}", content_type="application/json", HTTP_ACCEPT="text/html")
            assert response.status_code < 500, (method, path, response.status_code)


def test_every_endpoint_says_its_methods_and_a_summary_without_markup(client, db):
    endpoints = {e["path"]: e for e in _index(client)["endpoints"]}
    assert endpoints["/api/mail/webhook"]["methods"] == ["POST"]
    for endpoint in endpoints.values():
        if endpoint["path"] == "/api/docs/":
            continue  # drf-spectacular's own page
        assert endpoint["methods"], endpoint
        assert endpoint["summary"] and "``" not in endpoint["summary"], endpoint
