"""``manage.py add_member <user> --org ID``: a Membership without the admin."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from workforce.models import Membership


def run(*args: str) -> str:
    out = StringIO()
    call_command("add_member", *args, stdout=out)
    return out.getvalue()


def test_an_existing_user_joins_the_organization(org):
    User.objects.create_user("alice")
    assert run("alice", "--org", org.id) == "alice: added to default\n"
    assert Membership.objects.get(user__username="alice").organization_id == "default"
    assert run("alice", "--org", org.id) == "alice: already a member of default\n"
    assert Membership.objects.count() == 1


def test_an_unknown_user_is_refused_unless_created(org):
    with pytest.raises(CommandError, match="no user 'bob'; pass --create"):
        run("bob", "--org", org.id)
    assert not User.objects.filter(username="bob").exists()
    assert run("bob", "--org", org.id, "--create") == "bob: user created\nbob: added to default\n"
    bob = User.objects.get(username="bob")
    assert not bob.has_usable_password() and bob.workforce_membership.organization_id == "default"


def test_an_unknown_organization_is_refused(org):
    User.objects.create_user("alice")
    with pytest.raises(CommandError, match="no organization 'nowhere'"):
        run("alice", "--org", "nowhere", "--create")
    assert Membership.objects.count() == 0


def test_a_member_of_another_organization_moves_only_when_asked(org, other_org):
    User.objects.create_user("alice")
    run("alice", "--org", "acme")
    with pytest.raises(CommandError, match="'alice' is a member of 'acme'.*--move"):
        run("alice", "--org", "default")
    assert Membership.objects.get(user__username="alice").organization_id == "acme"
    assert run("alice", "--org", "default", "--move") == "alice: moved from acme to default\n"
    assert Membership.objects.get(user__username="alice").organization_id == "default"


def test_the_command_exits_1_when_refused(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "WORKFORCE_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "workforce_project.settings"}
    env.pop("DATABASE_URL", None)  # a throwaway SQLite database
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=repo, env=env, check=True, timeout=120)
    done = subprocess.run(
        [sys.executable, "manage.py", "add_member", "ghost"], cwd=repo, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "no user 'ghost'" in done.stderr
