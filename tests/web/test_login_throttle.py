"""Failed logins are throttled per username and per client address, on the pages' login
and the admin's (issue 22 item 13; workforce.logins), and a login with no ``next`` lands
on the home page, not Django's ``/accounts/profile/`` (a 404 here)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client, override_settings

LOGINS = ["/accounts/login/", "/admin/login/"]


@pytest.fixture(autouse=True)
def _fresh_counts():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def users(db):
    return {name: User.objects.create_user(name, password="right-password", is_staff=True) for name in ("bob", "alice")}


def attempt(path: str, username: str, password: str, *, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(path, {"username": username, "password": password})


def test_a_login_with_no_next_lands_on_the_home_page(users):
    answer = attempt("/accounts/login/", "bob", "right-password")
    assert answer.status_code == 302
    assert answer["Location"] == "/"
    assert Client().get("/accounts/profile/").status_code == 404  # what it used to land on


@pytest.mark.parametrize("path", LOGINS)
@override_settings(WORKFORCE_LOGIN_FAILURES_PER_USERNAME=3, WORKFORCE_LOGIN_FAILURES_PER_ADDRESS=100)
def test_failures_for_one_username_lock_it_from_that_address_only(users, path):
    for _ in range(3):
        assert attempt(path, "bob", "wrong", address="10.0.0.1").status_code == 200  # the form again, with its error
    locked = attempt(path, "bob", "right-password", address="10.0.0.1")
    assert locked.status_code == 429
    assert 1 <= int(locked["Retry-After"]) <= 900
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in locked.wsgi_request.session  # the right password did not log in
    # another account is not locked by bob's failures
    assert attempt(path, "alice", "right-password", address="10.0.0.1").status_code == 302
    # and whoever failed for bob cannot lock bob out from his own address (a lockout by name alone)
    assert attempt(path, "bob", "right-password", address="10.0.0.9").status_code == 302


@pytest.mark.parametrize("path", LOGINS)
@override_settings(WORKFORCE_LOGIN_FAILURES_PER_USERNAME=100, WORKFORCE_LOGIN_FAILURES_PER_ADDRESS=4)
def test_failures_from_one_address_lock_that_address(users, path):
    for n in range(4):
        assert attempt(path, f"guess{n}", "wrong", address="10.0.0.66").status_code == 200
    assert attempt(path, "alice", "right-password", address="10.0.0.66").status_code == 429
    assert attempt(path, "alice", "right-password", address="10.0.0.67").status_code == 302


@override_settings(
    WORKFORCE_LOGIN_FAILURES_PER_USERNAME=2, WORKFORCE_LOGIN_FAILURES_PER_ADDRESS=100, WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS=60
)
def test_the_lock_ends_when_the_window_has_passed(users, monkeypatch):
    clock = {"now": 10_000.0}
    monkeypatch.setattr("workforce.logins.time.time", lambda: clock["now"])
    attempt("/accounts/login/", "bob", "wrong")
    clock["now"] += 15
    attempt("/accounts/login/", "bob", "wrong")
    locked = attempt("/accounts/login/", "bob", "right-password")
    assert locked.status_code == 429 and locked["Retry-After"] == "45"
    clock["now"] += 46
    assert attempt("/accounts/login/", "bob", "right-password").status_code == 302


@override_settings(WORKFORCE_LOGIN_FAILURES_PER_USERNAME=3, WORKFORCE_LOGIN_FAILURES_PER_ADDRESS=100)
def test_a_login_that_succeeds_clears_its_usernames_count(users):
    attempt("/accounts/login/", "bob", "wrong")
    attempt("/accounts/login/", "bob", "wrong")
    assert attempt("/accounts/login/", "bob", "right-password").status_code == 302
    attempt("/accounts/login/", "bob", "wrong")
    attempt("/accounts/login/", "bob", "wrong")
    assert attempt("/accounts/login/", "bob", "right-password").status_code == 302


def test_the_default_limits(settings):
    assert settings.WORKFORCE_LOGIN_FAILURES_PER_USERNAME == 5
    assert settings.WORKFORCE_LOGIN_FAILURES_PER_ADDRESS == 20
    assert settings.WORKFORCE_LOGIN_FAILURE_WINDOW_SECONDS == 900
