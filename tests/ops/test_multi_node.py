"""Nodes on several machines (docs/nodes.md): with ``WORKFORCE_MULTI_NODE=true`` every node
command refuses at start a setup that cannot work across machines, one line per problem
naming its fix; without it nothing changes; nodes starting at once take turns to start."""

from __future__ import annotations

import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from workforce_project.nodes import multi_node_problems, multi_node_warnings, startup_lock

SQLITE = (
    "WORKFORCE_MULTI_NODE=true needs PostgreSQL, not SQLite (a file on one machine): "
    "set DATABASE_URL=postgres://USER@HOST:5432/DB on every node (docs/nodes.md)"
)
ORM_BROKER = (
    "WORKFORCE_MULTI_NODE=true needs the Redis broker, not the ORM broker (a starting cluster takes back "
    "the tasks every other cluster holds): set WORKFORCE_BROKER_URL=redis://HOST:6379/0 on every node (docs/nodes.md)"
)
SECRET_KEY = (
    "WORKFORCE_MULTI_NODE=true needs DJANGO_SECRET_KEY, the same on every node (each node would make its "
    "own in its WORKFORCE_VAR_DIR, and refuse the tasks the others sign): set it on every node (docs/nodes.md)"
)


@pytest.fixture
def multi_node(settings, monkeypatch, tmp_path):
    """A multi-node setup that works, on the test's database: each test breaks one thing."""
    settings.WORKFORCE_MULTI_NODE = True
    monkeypatch.setitem(settings.Q_CLUSTER, "redis", "redis://127.0.0.1:6379/5")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "a-key-every-node-shares")
    settings.VAR_DIR = str(tmp_path / "var")
    (tmp_path / "shared-vaults").mkdir()
    settings.WORKFORCE_VAULT_DIR = str(tmp_path / "shared-vaults")
    settings.WORKFORCE_MAIL_STORE = "mail.vault.embedded_store"
    return settings


def _without_sqlite(problems: list[str]) -> list[str]:
    return [p for p in problems if p != SQLITE]


def test_one_machine_refuses_nothing(settings, monkeypatch):
    """The single-machine default: SQLite, the ORM broker, no secret key set, vaults under
    var/; nothing is refused and nothing warned."""
    settings.WORKFORCE_MULTI_NODE = False
    monkeypatch.delenv("DJANGO_SECRET_KEY", raising=False)
    assert multi_node_problems() == []
    assert multi_node_warnings() == []


def test_a_working_multi_node_setup_is_refused_nothing_but_sqlite(multi_node):
    problems = multi_node_problems()
    assert problems == ([SQLITE] if connection.vendor == "sqlite" else [])


def test_sqlite_is_refused_naming_postgresql(multi_node, monkeypatch):
    monkeypatch.setattr("workforce_project.nodes._on_sqlite", lambda: True)
    assert multi_node_problems() == [SQLITE]
    monkeypatch.setattr("workforce_project.nodes._on_sqlite", lambda: False)
    assert multi_node_problems() == []


def test_the_orm_broker_is_refused_naming_redis(multi_node, monkeypatch):
    monkeypatch.delitem(multi_node.Q_CLUSTER, "redis")
    assert _without_sqlite(multi_node_problems()) == [ORM_BROKER]


def test_a_secret_key_of_each_node_is_refused(multi_node, monkeypatch):
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    assert _without_sqlite(multi_node_problems()) == [SECRET_KEY]


def test_vaults_in_the_nodes_own_folder_are_refused_naming_the_shared_folder_or_a_forge(multi_node, tmp_path):
    multi_node.WORKFORCE_VAULT_DIR = str(tmp_path / "var" / "vaults")  # the default: VAR_DIR/vaults
    (problem,) = _without_sqlite(multi_node_problems())
    assert problem == (
        "WORKFORCE_MULTI_NODE=true with the embedded mail vaults needs WORKFORCE_VAULT_DIR on a directory every node "
        f"mounts, outside this node's WORKFORCE_VAR_DIR ({tmp_path / 'var' / 'vaults'} is inside {tmp_path / 'var'}): "
        "set it, or keep mail on a forge with WORKFORCE_MAIL_STORE=mail.forgejo.forgejo_store (docs/nodes.md)"
    )


def test_a_shared_vault_folder_that_is_not_there_is_refused(multi_node, tmp_path):
    multi_node.WORKFORCE_VAULT_DIR = str(tmp_path / "not-mounted")
    assert _without_sqlite(multi_node_problems()) == [
        f"WORKFORCE_VAULT_DIR ({tmp_path / 'not-mounted'}) does not exist: mount the directory every node shares "
        "there, or create it on the shared file system (docs/nodes.md)"
    ]


def test_a_shared_vault_folder_that_is_a_file_is_refused_as_such(multi_node, tmp_path):
    (tmp_path / "a-file").write_text("x")
    multi_node.WORKFORCE_VAULT_DIR = str(tmp_path / "a-file")
    assert _without_sqlite(multi_node_problems()) == [
        f"WORKFORCE_VAULT_DIR ({tmp_path / 'a-file'}) is not a directory: name the directory every node shares (docs/nodes.md)"
    ]


def test_mail_on_a_forge_needs_no_vault_folder(multi_node, tmp_path):
    multi_node.WORKFORCE_VAULT_DIR = str(tmp_path / "var" / "vaults")
    multi_node.WORKFORCE_MAIL_STORE = "mail.forgejo.forgejo_store"
    assert _without_sqlite(multi_node_problems()) == []


def test_every_problem_is_named_at_once(multi_node, monkeypatch, tmp_path):
    monkeypatch.delitem(multi_node.Q_CLUSTER, "redis")
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    multi_node.WORKFORCE_VAULT_DIR = str(tmp_path / "var" / "vaults")
    problems = _without_sqlite(multi_node_problems())
    assert problems[:2] == [ORM_BROKER, SECRET_KEY] and len(problems) == 3


def test_counts_kept_in_each_nodes_memory_are_a_warning(multi_node):
    multi_node.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert multi_node_warnings() == [
        "the API's throttles and the login limits count on each web node apart (each node's own memory): "
        "set WORKFORCE_CACHE_URL=redis://HOST:6379/1 on every node to count them together"
    ]
    multi_node.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://x/1"}}
    assert multi_node_warnings() == []


@pytest.mark.parametrize("command", ["serve", "work"])
def test_each_node_command_refuses_before_it_touches_anything(multi_node, monkeypatch, command):
    """``serve`` (``--no-cluster`` too) and ``work`` stop with the problems, one line
    each, before they migrate, bind or start a cluster."""
    monkeypatch.delitem(multi_node.Q_CLUSTER, "redis")
    monkeypatch.delenv("DJANGO_SECRET_KEY")
    options = {"addr": "127.0.0.1:0", "no_cluster": True} if command == "serve" else {}
    out = StringIO()
    with pytest.raises(CommandError) as refused:
        call_command(command, stdout=out, **options)
    lines = str(refused.value).splitlines()
    assert _without_sqlite(lines) == [ORM_BROKER, SECRET_KEY]
    assert (SQLITE in lines) == (connection.vendor == "sqlite")
    assert "migrating" not in out.getvalue() and "serving" not in out.getvalue()


def test_work_beside_a_running_cluster_on_one_machine_names_the_multi_node_setting(settings, monkeypatch):
    """Without the setting a second cluster on the database is refused, as a second
    ``serve``'s is, and the refusal says how to run worker nodes on several machines."""
    settings.WORKFORCE_MULTI_NODE = False
    settings.WORKFORCE_STOP_SECONDS = 0.1
    monkeypatch.setattr(
        "workforce_project.management.commands.work.wait_for_no_cluster",
        lambda seconds, say: "workforce cluster pid 1 on elsewhere",
    )
    with pytest.raises(CommandError) as refused:
        call_command("work", stdout=StringIO())
    message = str(refused.value)
    assert "a task cluster is already running on this database" in message
    assert "workforce cluster pid 1 on elsewhere" in message
    assert "WORKFORCE_MULTI_NODE=true" in message and "WORKFORCE_BROKER_URL=redis://" in message


def test_the_cluster_lock_names_the_command_that_started_the_cluster():
    """A worker node's cluster holds the lock as ``work``'s, not as a serve's."""
    import os
    import socket

    from workforce_project.cluster_guard import describe_self

    host = socket.gethostname()
    assert describe_self(11, "work") == f"workforce cluster pid {os.getpid()} work 11 on {host}"[:63]
    assert describe_self(11) == f"workforce cluster pid {os.getpid()} serve 11 on {host}"[:63]
    assert describe_self(None, "work") == f"workforce cluster pid {os.getpid()} on {host}"[:63]


@pytest.mark.django_db
def test_nodes_starting_at_once_take_turns(monkeypatch, tmp_path):
    """The start-up lock: a second holder waits (told once) until the first lets go, on
    both databases (an advisory lock on PostgreSQL, an flock beside SQLite's file)."""
    monkeypatch.setattr("workforce_project.nodes._sqlite_lock_path", lambda: tmp_path / "db.sqlite3.startup-lock")
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with startup_lock():
            order.append("first in")
            first_in.set()
            time.sleep(0.5)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    waited = []
    with startup_lock(on_wait=lambda: waited.append(True)):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]
    assert waited == [True]


def test_containers_sharing_a_host_name_and_a_kernel_are_other_hosts_to_each_other(monkeypatch):
    """Two nodes in containers on one machine, with its host name (host networking) but
    each its own pid namespace: a holder in the other is not judged by this one's /proc
    (its pid means another process here), so its holds are left to their leases."""
    import os as os_module

    from workforce import holders

    real = os_module.readlink
    here = holders._host_key()
    monkeypatch.setattr(holders.os, "readlink", lambda path: "pid:[4026532999]" if path == "/proc/self/ns/pid" else real(path))
    assert holders._host_key() != here
