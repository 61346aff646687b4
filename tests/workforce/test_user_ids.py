"""A caller's ``userId`` (docs/api.md "Endpoints"; spec "Which organization a mailbox runs in"):
read in one place (``workforce.principals.resolve_principal``) and held to one rule,
``USER_ID_RULE``, on every path that takes one: flow actions, reads, streams, the
projects and workers APIs, the pages' ``/who``, and the MCP server. A user id that breaks
it is a 400 ``invalid-input`` that names the rule, and nothing is written."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient

from mail.mcp_server import caller_from
from web.views import SESSION_USER
from workforce.models import Membership, Request, Session
from workforce.principals import USER_ID_RULE, check_user_id, user_id_problem
from workforce.refusals import Refusal

BAD = [
    "a/b",
    "a\nb",
    "a\tb",
    "a b",
    "../x",
    "..",
    ".hidden",
    "-rf",
    "u\u00e9",
    "\u0430dmin",
    "a\\b",
    "a?b",
    "a#b",
    "%2F",
    "x" * 201,
]
GOOD = ["u_42", "alice@example.com", "first.last+tag@example.co", "ann", "U-7", "0", "x" * 200]


@pytest.fixture
def client():
    return APIClient()


@pytest.mark.parametrize("user_id", GOOD)
def test_what_principals_look_like_is_a_user_id(user_id):
    assert user_id_problem(user_id) is None and check_user_id(user_id) == user_id


@pytest.mark.parametrize("user_id", BAD)
def test_anything_else_is_refused_naming_the_rule(user_id):
    with pytest.raises(Refusal) as caught:
        check_user_id(user_id)
    assert caught.value.reason == "invalid-input" and caught.value.http_status == 400
    assert caught.value.message.startswith("invalid-input: userId ")
    assert USER_ID_RULE in caught.value.message
    assert "\n" not in caught.value.message and "\t" not in caught.value.message  # shown escaped


def test_a_colon_and_an_empty_id_keep_their_own_sentences():
    assert user_id_problem("a:b") == (
        'userId can\'t contain ":" (session ids are built from user ids): ASCII letters, digits and . _ @ + - only, '
        "starting with a letter or digit, at most 200 characters."
    )
    assert user_id_problem("") == user_id_problem("   ") == "userId must be a non-empty string."
    assert user_id_problem(42) == "userId must be a non-empty string."


def assert_refused(response, *, where: str = "") -> None:
    assert response.status_code == 400, (where, response.status_code, response.content[:300])
    error = response.json()["error"]
    assert error["reason"] == "invalid-input", where
    assert USER_ID_RULE in error["message"], where


@pytest.mark.parametrize("user_id", ["a/b", "a\nb", "u\u00e9"])
def test_every_rest_path_refuses_it_and_writes_nothing(client, open_tree, user_id):
    open_tree()
    before = (Session.objects.count(), Request.objects.count())
    body = {"userId": user_id, "input": {"body": "hi"}}
    assert_refused(client.post("/api/flows/mailbox/eng.standup/actions/post", body, format="json"), where="post")
    assert_refused(client.post("/api/flows/mailbox/talk-new/actions/join", {**body, "input": {"projectId": "p"}}, format="json"))
    assert_refused(client.post("/api/projects", {"userId": user_id, "title": "t"}, format="json"), where="projects")
    assert_refused(client.post("/api/workers/support.help/sessions", {"userId": user_id}, format="json"), where="sessions")
    assert_refused(client.post("/api/workers", {"userId": user_id, "id": "mine", "workerMd": "x"}, format="json"))
    for path in (
        "/api/mailboxes/eng.standup/transcript",
        "/api/sessions/eng.standup/items",
        "/api/sessions/eng.standup/requests",
        "/api/sessions/eng.standup/runs",
        "/api/projects",
        "/api/workers",
        "/api/mailboxes",
        "/api/boards",
    ):
        assert_refused(client.get(path, {"userId": user_id}), where=path)
    stream = client.get("/api/sessions/eng.standup/stream", {"userId": user_id}, HTTP_ACCEPT="text/event-stream")
    assert_refused(stream, where="stream")
    assert (Session.objects.count(), Request.objects.count()) == before


def test_a_slash_would_have_made_the_conversation_unreachable_by_url(client, open_tree):
    """The case that made the rule: ``<worker>:<user>`` with a slash in the user is an id
    no URL addresses (``/api/sessions/<id>/items`` splits it)."""
    open_tree()
    opened = client.post("/api/workers/support.help/sessions", {"userId": "ops/alice"}, format="json")
    assert_refused(opened)
    assert not Session.objects.filter(session_id__contains="ops/alice").exists()


def test_the_who_page_refuses_it_and_keeps_nobody(client, db):
    page = client.post("/who", {"userId": "a/b", "next": "/"})
    assert page.status_code == 200 and b"is not a user id" in page.content
    assert SESSION_USER not in client.session


def test_a_page_acting_as_a_bad_id_kept_from_before_is_refused(client, open_tree):
    open_tree()
    session = client.session
    session[SESSION_USER] = "a/b"
    session.save()
    page = client.get("/mailboxes/eng.standup/")
    assert page.status_code == 400 and b"is not a user id" in page.content


def test_the_mcp_server_refuses_it_in_development(db):
    with pytest.raises(Refusal) as caught:
        caller_from(token=None, user_id="a\nb")
    assert caught.value.reason == "invalid-input" and USER_ID_RULE in caught.value.message
    caller = caller_from(token=None, user_id="alice@example.com")
    assert caller.principal.user_id == "alice@example.com" and caller.user is None


@override_settings(WORKFORCE_AUTH="token")
def test_with_token_auth_a_bad_claim_is_400_before_it_is_compared(client, org):
    user = User.objects.create_user("u_42")
    Membership.objects.create(user=user, organization=org)
    client.force_authenticate(user)
    assert_refused(client.get("/api/projects", {"userId": "u_42\n"}))
    mismatch = client.get("/api/projects", {"userId": "u_43"})
    assert mismatch.status_code == 403 and mismatch.json()["error"]["reason"] == "principal-mismatch"
    assert client.get("/api/projects", {"userId": "u_42"}).status_code == 200


@pytest.mark.parametrize("username", ["bob:eng.lead", "j\u00f6rg", "a b"])
@override_settings(WORKFORCE_AUTH="token")
def test_with_token_auth_an_account_whose_username_breaks_the_rule_acts_nowhere(client, org, username):
    """A username is the user id its sessions are named by: ``bob:eng.lead`` could take the
    id of bob's conversation with eng.lead. Made by hand (or by the admin, whose alphabet
    is wider), such an account is refused on every call, and nothing is written."""
    user = User.objects.create_user(username)
    Membership.objects.create(user=user, organization=org)
    client.force_authenticate(user)
    answer = client.get("/api/projects")
    assert answer.status_code == 400 and answer.json()["error"]["reason"] == "invalid-input"
    expected = user_id_problem(username, label="This account's username")
    assert answer.json()["error"]["message"].startswith(f"invalid-input: {expected}")
    sessions = Session.objects.count()
    posted = client.post("/api/workers/eng.lead/sessions", {}, format="json")
    assert posted.status_code == 400 and Session.objects.count() == sessions


@pytest.mark.parametrize("username", ["bob:eng.lead", "j\u00f6rg"])
def test_add_member_refuses_a_username_that_breaks_the_rule(db, username):
    from workforce.services import MembershipRefused, do_add_member

    with pytest.raises(MembershipRefused, match="is not a user id|can't contain"):
        do_add_member(username, "default", create_user=True)
    assert not User.objects.filter(username=username).exists()
