"""The API's throttles (issue 22 item 4a; workforce.api.throttles): calls per user and per
organization, writes and reads at their own rates, a JSON 429 ``throttled`` in the
contract's shape with ``Retry-After``, in both authentication modes. Off in the test
settings unless a test sets a rate, as here."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import override_settings
from rest_framework.test import APIClient

from mailboxes.models import Line
from tests.conftest import MEMBER
from workforce.api.throttles import parse_rate
from workforce.models import Membership

POST_PATH = "/api/flows/mailbox/eng.standup/actions/post"
ITEMS_PATH = "/api/sessions/eng.standup/items"


@pytest.fixture(autouse=True)
def _fresh_counts():
    cache.clear()  # the throttles count in the default cache, shared by every test of this process
    yield
    cache.clear()


@pytest.fixture
def client():
    return APIClient()


@pytest.fixture
def opened(open_tree):
    return open_tree()


def post(client, user_id: str | None = MEMBER, body: str = "hi"):
    data = {"input": {"body": body}}
    if user_id is not None:
        data["userId"] = user_id
    return client.post(POST_PATH, data, format="json")


def assert_throttled(response) -> int:
    """The 429's body is the contract's refusal; returns Retry-After in seconds."""
    assert response.status_code == 429, response.content
    assert response.json() == {
        "requestId": None,
        "status": "failed",
        "error": {"reason": "throttled", "message": response.json()["error"]["message"]},
    }
    assert response.json()["error"]["message"].startswith("throttled: ")
    seconds = int(response["Retry-After"])
    assert 1 <= seconds <= 60
    return seconds


def test_the_test_settings_throttle_nothing(client, opened, settings):
    assert settings.WORKFORCE_THROTTLE_USER == settings.WORKFORCE_THROTTLE_ORG == ""
    for n in range(30):
        assert post(client, body=f"post {n}").status_code == 202


@override_settings(WORKFORCE_THROTTLE_USER="3/min", WORKFORCE_THROTTLE_ORG="")
def test_a_users_writes_past_its_rate_answer_429_with_retry_after(client, opened):
    for n in range(3):
        assert post(client, body=f"post {n}").status_code == 202
    assert_throttled(post(client, body="one too many"))
    assert Line.objects.count() == 3  # the refused post wrote nothing
    # another user is not held back by the first one's rate
    assert post(client, user_id="u_other").status_code == 202


@override_settings(WORKFORCE_THROTTLE_USER="", WORKFORCE_THROTTLE_ORG="4/min")
def test_an_organizations_writes_are_counted_across_its_users(client, opened):
    for user in ("u_a", "u_b", "u_c", "u_d"):
        assert post(client, user_id=user).status_code == 202
    # without authentication everyone is in the default organization: a made-up userId
    # does not get past the organization's rate
    assert_throttled(post(client, user_id="u_e"))


@override_settings(WORKFORCE_THROTTLE_USER="2/min", WORKFORCE_THROTTLE_READ_USER="5/min", WORKFORCE_THROTTLE_ORG="")
def test_reads_have_their_own_looser_rate(client, opened):
    assert post(client).status_code == 202
    assert post(client).status_code == 202
    assert_throttled(post(client))
    for _ in range(5):  # the writes' rate is spent; the reads' is not
        assert client.get(ITEMS_PATH, {"userId": MEMBER}).status_code == 200
    assert_throttled(client.get(ITEMS_PATH, {"userId": MEMBER}))


@override_settings(WORKFORCE_THROTTLE_USER="1/min", WORKFORCE_THROTTLE_ORG="")
def test_retry_after_is_when_the_oldest_call_leaves_the_window(client, opened, monkeypatch):
    clock = {"now": 1_000.0}
    monkeypatch.setattr("rest_framework.throttling.SimpleRateThrottle.timer", lambda self: clock["now"])
    assert post(client).status_code == 202
    clock["now"] += 20
    assert assert_throttled(post(client)) == 40
    clock["now"] += 40.5
    assert post(client).status_code == 202


@override_settings(WORKFORCE_THROTTLE_USER="1/min", WORKFORCE_THROTTLE_ORG="")
def test_other_write_endpoints_are_throttled_too(client, opened):
    assert post(client).status_code == 202
    # mail and chat: the same user's rate, whatever the endpoint says of the body
    assert_throttled(
        client.post("/api/mail", {"userId": MEMBER, "to": "agent:eng.lead", "subject": "s", "body": "b"}, format="json")
    )
    assert_throttled(client.post("/api/workers/eng.lead/chat", {"userId": MEMBER, "message": "hi"}, format="json"))


@pytest.fixture
def token_users(org, other_org):
    """Two users in the default organization and one in acme, each with a membership."""
    users = {}
    for name, in_org in (("bob", org), ("carol", org), ("alice", other_org)):
        users[name] = User.objects.create_user(name)
        Membership.objects.create(user=users[name], organization=in_org)
    return users


@override_settings(WORKFORCE_AUTH="token", WORKFORCE_THROTTLE_USER="2/min", WORKFORCE_THROTTLE_ORG="")
def test_token_mode_counts_the_authenticated_user_not_the_claimed_id(client, opened, token_users):
    client.force_authenticate(token_users["bob"])
    assert post(client, user_id=None).status_code == 202
    assert post(client, user_id=None).status_code == 202
    assert_throttled(post(client, user_id=None))
    client.force_authenticate(token_users["carol"])
    assert post(client, user_id=None).status_code == 202


@override_settings(WORKFORCE_AUTH="token", WORKFORCE_THROTTLE_USER="", WORKFORCE_THROTTLE_ORG="2/min")
def test_token_mode_counts_each_organization_apart(client, opened, token_users):
    client.force_authenticate(token_users["bob"])
    assert post(client, user_id=None).status_code == 202
    client.force_authenticate(token_users["carol"])
    assert post(client, user_id=None).status_code == 202
    assert_throttled(post(client, user_id=None))
    # acme's user has its own organization's rate (its post is refused for its own reason)
    client.force_authenticate(token_users["alice"])
    assert post(client, user_id=None).json()["error"]["reason"] == "mailbox-not-bound"


@override_settings(WORKFORCE_AUTH="token", WORKFORCE_THROTTLE_USER="5/min", WORKFORCE_THROTTLE_ORG="5/min")
def test_token_mode_reads_the_membership_once_per_call(client, opened, token_users, django_assert_num_queries):
    """The org throttle's membership read is the one resolve_principal uses."""
    client.force_authenticate(token_users["bob"])
    assert post(client, user_id=None).status_code == 202
    with override_settings(WORKFORCE_THROTTLE_ORG=""):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as unthrottled:
            assert post(client, user_id=None).status_code == 202
    with CaptureQueriesContext(connection) as throttled:
        assert post(client, user_id=None).status_code == 202
    membership = [q for q in throttled.captured_queries if '"workforce_membership"' in q["sql"]]
    assert len(membership) == 1
    assert len(throttled.captured_queries) == len(unthrottled.captured_queries)


@pytest.mark.parametrize(
    ("rate", "parsed"),
    [("60/min", (60, 60)), ("5/s", (5, 1)), ("100/hour", (100, 3600)), ("1000/day", (1000, 86400)), ("", None), (None, None)],
)
def test_rates_are_read_as_count_per_period(rate, parsed):
    assert parse_rate(rate) == parsed


@pytest.mark.parametrize("rate", ["60", "x/min", "60/fortnight", "-1/min"])
def test_a_rate_that_is_not_one_is_refused(rate):
    with pytest.raises(ValueError):
        parse_rate(rate)


def test_a_bad_rate_in_the_environment_stops_start_up(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from workforce_project import settings as project_settings

    monkeypatch.setenv("WORKFORCE_THROTTLE_USER", "lots")
    with pytest.raises(ImproperlyConfigured, match="WORKFORCE_THROTTLE_USER"):
        project_settings._env_rate("WORKFORCE_THROTTLE_USER", "60/min")
    monkeypatch.setenv("WORKFORCE_THROTTLE_USER", "")
    assert project_settings._env_rate("WORKFORCE_THROTTLE_USER", "60/min") == ""


@override_settings(WORKFORCE_THROTTLE_USER="2/min", WORKFORCE_THROTTLE_ORG="")
def test_the_pages_forms_count_against_the_same_rate(client, opened):
    """A page's form is the API's call by another door: it was never counted, so a user
    flooded through the pages past the API's rate (issue 22 item 4)."""
    from django.test import Client

    from mailboxes.models import Project
    from web.views import SESSION_USER

    browser = Client()
    session = browser.session
    session[SESSION_USER] = MEMBER
    session.save()
    assert browser.post("/projects/new", {"title": "One"}).status_code == 302
    assert browser.post("/projects/new", {"title": "Two"}).status_code == 302
    refused = browser.post("/projects/new", {"title": "Three"})
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    assert "throttled" in refused.content.decode()
    assert Project.objects.count() == 2
    assert_throttled(post(client))  # the same window as the API's
