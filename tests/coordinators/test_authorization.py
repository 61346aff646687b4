"""One read rule for every session read (docs/api.md "Endpoints"): a private
conversation (a coordinator's) and every session under it are their owner's; a mailbox,
and what hangs under it, is readable by its organization; another organization's
objects are not found. Each endpoint is read by the owner, a member of the same
organization and an outsider in another organization, with token-style principals
(``WORKFORCE_AUTH=token``), and by a caller with no authentication and no ``userId``.

Here, beside the coordinator fixtures, because a coordinator conversation with a
delegate's session under it is the private case."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import override_settings
from rest_framework.test import APIClient, APIRequestFactory

from boards.services import do_file_task
from coordinators.services import do_ensure_worker_session
from tests.conftest import MEMBER, OWNER
from tests.coordinators.conftest import CONVERSATION, DEVICES, HELP
from workforce.flows import Action, FlowKind, registry
from workforce.models import Membership, Request, Session
from workforce.principals import resolve_principal
from workforce.queries import access_session
from workforce.refusals import Refusal
from workforce.sessions import ensure_child_session

DELEGATE = f"{CONVERSATION}:{DEVICES}"  # the delegate's session: "<coordinator>:<user>:<delegate>"
MAILBOX = "eng.standup"
FOLLOWUPS = "eng.incidents.followups"
SAME_ORG, OUTSIDER = "bob", "alice"

TOKEN_AUTH = override_settings(WORKFORCE_AUTH="token")


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def people(org, other_org):
    """Users with memberships: MEMBER (the conversation's owner) and OWNER (the
    mailboxes') and SAME_ORG in the default organization, OUTSIDER in acme."""
    users = {}
    for name, in_org in ((MEMBER, org), (OWNER, org), (SAME_ORG, org), (OUTSIDER, other_org)):
        users[name] = User.objects.create_user(name)
        Membership.objects.create(user=users[name], organization=in_org)
    return users


@pytest.fixture
def talked(desk, open_tree):
    """MEMBER's conversation with support.help, one post answered by support.devices in
    the delegate's session DELEGATE; the standard mailboxes opened by OWNER, a row on
    eng.incidents.followups. Answers the post (a Request in the conversation)."""
    d = desk(routing="everyone", delegates=(DEVICES,))
    post = d.run("My laptop won't charge.")
    open_tree()
    do_file_task(d.org, FOLLOWUPS, goal="Write the postmortem.")
    return post


def get(client, url, as_user=None, **params):
    if as_user is not None:
        client.force_authenticate(as_user)
    return client.get(url, params or None)


def assert_not_found(response, reason):
    assert response.status_code == 404, response.content
    assert response.json()["error"]["reason"] == reason


def delegate_request_id() -> str:
    [row] = Request.objects.filter(session__session_id=DELEGATE)
    return row.request_id


# --- the delegate's session and the conversation: the owner's only --------------------------


@TOKEN_AUTH
@pytest.mark.parametrize(
    "url",
    [
        f"/api/sessions/{DELEGATE}/items",
        f"/api/sessions/{DELEGATE}/requests",
        f"/api/sessions/{CONVERSATION}/items",
        f"/api/sessions/{CONVERSATION}/requests",
    ],
)
def test_a_conversation_and_its_delegates_sessions_are_read_by_their_owner_only(client, people, talked, url):
    owner = get(client, url, people[MEMBER])
    assert owner.status_code == 200, owner.content
    assert owner.json()["sessionId"] == url.split("/")[3]
    assert_not_found(get(client, url, people[SAME_ORG]), "session-not-found")
    assert_not_found(get(client, url, people[OUTSIDER]), "session-not-found")


@TOKEN_AUTH
def test_the_owner_reads_the_delegates_turn_and_its_answer(client, people, talked):
    items = get(client, f"/api/sessions/{DELEGATE}/items", people[MEMBER]).json()["items"]
    texts = [(i["data"]["role"], i["data"]["text"]) for i in items if i["type"] == "message"]
    assert texts == [
        ("user", f"{MEMBER}, through {HELP}: My laptop won't charge."),
        ("assistant", f"{DEVICES} answered: {MEMBER}, through {HELP}: My laptop won't charge."),
    ]
    requests = get(client, f"/api/sessions/{DELEGATE}/requests", people[MEMBER], includeResultOutput="true").json()
    assert [r["requestId"] for r in requests["requests"]] == [delegate_request_id()]


@TOKEN_AUTH
def test_a_request_in_a_private_conversation_or_under_it_is_read_by_its_owner_only(client, people, talked):
    for request_id in (talked.request_id, delegate_request_id()):
        url = f"/api/requests/{request_id}"
        owner = get(client, url, people[MEMBER])
        assert owner.status_code == 200 and owner.json()["requestId"] == request_id
        assert owner.json()["status"] == "completed"
        assert_not_found(get(client, url, people[SAME_ORG]), "request-not-found")
        assert_not_found(get(client, url, people[OUTSIDER]), "request-not-found")


@TOKEN_AUTH
def test_the_worker_session_of_a_conversation_is_found_by_its_owner_only(client, people, talked):
    url = f"/api/workers/{DEVICES}/sessions"
    owner = get(client, url, people[MEMBER], filingSessionId=CONVERSATION)
    assert owner.status_code == 200
    assert owner.json() == {"sessionId": DELEGATE, "flowKind": "agent", "worker": DEVICES}
    assert_not_found(get(client, url, people[SAME_ORG], filingSessionId=CONVERSATION), "session-not-found")
    assert_not_found(get(client, url, people[OUTSIDER], filingSessionId=CONVERSATION), "session-not-found")


@TOKEN_AUTH
def test_a_board_under_a_private_conversation_shows_its_rows_to_the_owner_only(client, people, talked, org):
    """Boards hang under mailboxes; a ledger named under a conversation id follows the
    rule too, and answers like a board nobody filed on, so the id doesn't leak."""
    board = f"{CONVERSATION}.notes"
    row = do_file_task(org, board, goal="Mine.")
    url = f"/api/boards/{board}/tasks"
    assert [t["id"] for t in get(client, url, people[MEMBER]).json()["tasks"]] == [row.task_id]
    for name in (SAME_ORG, OUTSIDER):
        answer = get(client, url, people[name])
        assert answer.status_code == 200
        assert answer.json() == {"boardId": board, "tasks": [], "next": None}


@TOKEN_AUTH
@pytest.mark.parametrize("session_id", [CONVERSATION, DELEGATE])
def test_the_transcript_of_a_conversation_is_no_mailbox_for_anyone(client, people, talked, session_id):
    for name in (MEMBER, SAME_ORG, OUTSIDER):
        assert_not_found(get(client, f"/api/mailboxes/{session_id}/transcript", people[name]), "mailbox-not-bound")


# --- a mailbox, and what hangs under it: the organization's --------------------------------


@TOKEN_AUTH
def test_a_mailbox_is_read_by_its_organization_and_not_found_outside_it(client, people, talked, org):
    client.force_authenticate(people[SAME_ORG])
    posted = client.post(f"/api/flows/mailbox/{MAILBOX}/actions/post", {"input": {"body": "shipped"}}, format="json")
    assert posted.status_code == 202, posted.content
    request_id = posted.json()["requestId"]
    seat_chat = ensure_child_session(
        Session.objects.get(organization=org, session_id=MAILBOX), f"{MAILBOX}:eng.bot", kind="agent", state={}
    )
    urls = [
        f"/api/sessions/{MAILBOX}/items",
        f"/api/sessions/{MAILBOX}/requests",
        f"/api/requests/{request_id}",
        f"/api/sessions/{seat_chat.session_id}/items",
        f"/api/mailboxes/{MAILBOX}/transcript",
    ]
    for url in urls:
        for name in (OWNER, SAME_ORG, MEMBER):
            assert get(client, url, people[name]).status_code == 200, (url, name)
    assert_not_found(get(client, urls[0], people[OUTSIDER]), "session-not-found")
    assert_not_found(get(client, urls[1], people[OUTSIDER]), "session-not-found")
    assert_not_found(get(client, urls[2], people[OUTSIDER]), "request-not-found")
    assert_not_found(get(client, urls[3], people[OUTSIDER]), "session-not-found")
    assert_not_found(get(client, urls[4], people[OUTSIDER]), "mailbox-not-bound")
    lines = get(client, urls[4], people[OWNER]).json()["lines"]
    assert [line["body"] for line in lines] == ["shipped"]


@TOKEN_AUTH
def test_a_mailboxs_board_is_read_by_its_organization(client, people, talked):
    url = f"/api/boards/{FOLLOWUPS}/tasks"
    for name in (OWNER, SAME_ORG, MEMBER):
        [task] = get(client, url, people[name]).json()["tasks"]
        assert task["goal"] == "Write the postmortem."
    # Another organization's ledger is one nobody filed on, as for an unknown board.
    assert get(client, url, people[OUTSIDER]).json() == {"boardId": FOLLOWUPS, "tasks": [], "next": None}


# --- acting in someone else's private session ----------------------------------------------


@pytest.fixture
def peek():
    """A flow kind ``peek`` with a client action ``look`` that answers the session's id
    and owner (as a delegate flow of one's own could)."""
    registry.register(
        FlowKind(
            kind="peek",
            actions={
                "look": Action("look", lambda ctx, data: {"owner": ctx.session.user_id}),
            },
        )
    )
    yield
    registry.unregister("peek")


@TOKEN_AUTH
def test_a_client_action_in_a_session_under_someone_elses_conversation_is_not_found(client, people, talked, org, peek):
    conversation = Session.objects.get(organization=org, session_id=CONVERSATION)
    child = ensure_child_session(conversation, f"{CONVERSATION}:peeker", kind="peek", state={})
    url = f"/api/flows/peek/{child.session_id}/actions/look"
    client.force_authenticate(people[SAME_ORG])
    refused = client.post(url, {"input": {}}, format="json")
    assert refused.status_code == 404 and refused.json()["error"]["reason"] == "session-not-found"
    assert not Request.objects.filter(session=child).exists()  # nothing recorded in the owner's session
    client.force_authenticate(people[MEMBER])
    ok = client.post(url, {"input": {}}, format="json")
    assert ok.status_code == 202 and ok.json()["output"] == {"owner": MEMBER}


@TOKEN_AUTH
def test_a_refused_action_on_someone_elses_conversation_reads_as_one_that_does_not_exist(client, people, talked):
    client.force_authenticate(people[SAME_ORG])
    nobodys = "support.help:nobody"
    theirs = client.post(f"/api/flows/coordinator/{CONVERSATION}/actions/listDelegates", {"input": {}}, format="json")
    absent = client.post(f"/api/flows/coordinator/{nobodys}/actions/listDelegates", {"input": {}}, format="json")
    assert theirs.status_code == absent.status_code == 404, (theirs.json(), absent.json())
    assert theirs.json()["error"]["message"] == absent.json()["error"]["message"].replace(nobodys, CONVERSATION)


# --- without authentication -----------------------------------------------------------------


def test_without_authentication_a_caller_naming_nobody_reads_no_private_session(client, talked):
    for url in (f"/api/sessions/{DELEGATE}/items", f"/api/sessions/{DELEGATE}/requests", f"/api/sessions/{CONVERSATION}/items"):
        assert_not_found(client.get(url), "session-not-found")
        assert_not_found(client.get(url, {"userId": SAME_ORG}), "session-not-found")
        assert client.get(url, {"userId": MEMBER}).status_code == 200
    for request_id in (talked.request_id, delegate_request_id()):
        assert_not_found(client.get(f"/api/requests/{request_id}"), "request-not-found")
        assert_not_found(client.get(f"/api/requests/{request_id}", {"userId": SAME_ORG}), "request-not-found")
        assert client.get(f"/api/requests/{request_id}", {"userId": MEMBER}).status_code == 200
    url = f"/api/workers/{DEVICES}/sessions"
    assert_not_found(client.get(url, {"userId": SAME_ORG, "filingSessionId": CONVERSATION}), "session-not-found")
    assert client.get(url, {"userId": MEMBER, "filingSessionId": CONVERSATION}).json()["sessionId"] == DELEGATE
    # a mailbox stays readable without naming anyone
    assert client.get(f"/api/sessions/{MAILBOX}/items").status_code == 200


def test_naming_nobody_is_not_the_user_named_anonymous(client, desk, org):
    desk(routing="everyone", delegates=(DEVICES,), open_session=False)
    do_ensure_worker_session(org, "anonymous", HELP)
    url = f"/api/sessions/{HELP}:anonymous/items"
    assert_not_found(client.get(url), "session-not-found")
    assert client.get(url, {"userId": "anonymous"}).status_code == 200


def test_a_read_naming_nobody_reads_as_nobody(db):
    principal = resolve_principal(APIRequestFactory().get("/"), None, require_user=False)
    assert (principal.user_id, principal.anonymous, principal.reader) == ("anonymous", True, None)
    assert resolve_principal(APIRequestFactory().get("/"), "anonymous").reader == "anonymous"


def test_the_rule_costs_one_query_for_a_session_under_a_conversation(talked, org, django_assert_num_queries):
    with django_assert_num_queries(1):
        assert access_session(org, DELEGATE, reader=MEMBER).session_id == DELEGATE
    with django_assert_num_queries(1), pytest.raises(Refusal) as caught:
        access_session(org, DELEGATE, reader=SAME_ORG)
    assert caught.value.reason == "session-not-found"
