"""The main job end to end: ``manage.py serve`` as a subprocess, posted to and read over
HTTP."""

from __future__ import annotations

import pytest

from tests.conftest import mailbox_md, write_tree

pytestmark = pytest.mark.e2e


@pytest.fixture
def tree(tmp_path):
    return write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
                "Where the engineering team posts daily status.", members=("eng.lead", "eng.analyst")
            ),
        },
    )


def test_serve_posts_reads_refuses_and_replays(start_server, tree):
    server = start_server(tree, "--no-cluster")
    post = {"userId": "u_42", "input": {"body": "shipped the reader", "author": "eng.lead"}}

    answer = server.call("POST", "/api/flows/mailbox/eng.standup/actions/post", post, {"Idempotency-Key": "k-1"})
    assert answer.status == 202
    assert answer.body["status"] == "completed"
    assert answer.body["sessionId"] == "eng.standup" and answer.body["flowKind"] == "mailbox"
    line = answer.body["output"]
    assert set(line) == {"id", "at", "principal", "author", "authorVerified", "body", "postedBy"}
    assert line["postedBy"] == {"kind": "user", "id": "u_42", "verified": False}  # no auth: named, not signed in
    assert line["author"] == "eng.lead" and line["authorVerified"] is False and line["body"] == "shipped the reader"
    location = answer.headers["Location"]
    assert location.endswith(f"/api/requests/{answer.body['requestId']}")

    again = server.call("GET", location.removeprefix(server.base))
    assert again.status == 200 and again.body["requestId"] == answer.body["requestId"]

    retry = server.call("POST", "/api/flows/mailbox/eng.standup/actions/post", post, {"Idempotency-Key": "k-1"})
    assert retry.body["requestId"] == answer.body["requestId"]

    refused = server.call(
        "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": "hi", "author": "mallory"}}
    )
    assert refused.status == 403
    assert refused.body["status"] == "failed"
    assert refused.body["error"]["reason"] == "author-not-a-member"
    assert refused.body["error"]["message"].startswith("author-not-a-member: ")
    assert refused.body["requestId"].startswith("req_")

    read = server.call("POST", "/api/flows/mailbox/eng.standup/actions/read", {"userId": "u_42"})
    assert read.status == 202
    assert [entry["body"] for entry in read.body["output"]["transcript"]] == ["shipped the reader"]

    transcript = server.call("GET", "/api/mailboxes/eng.standup/transcript")
    assert [entry["seq"] for entry in transcript.body["lines"]] == [1]

    unbound = server.call("POST", "/api/flows/mailbox/eng.nowhere/actions/post", {"userId": "u_42", "input": {"body": "hi"}})
    assert unbound.status == 404 and unbound.body["error"]["reason"] == "mailbox-not-bound"


def test_serve_refuses_to_start_on_a_bad_tree(start_server, tmp_path):
    bad = write_tree(
        tmp_path / "bad",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": "---\ndescription: ok\nmember: [eng.lead]\n---\n",
            "teams/eng/mailboxes/Bad Name/MAILBOX.md": "---\ndescription: ok\n---\n",
        },
    )
    with pytest.raises(AssertionError) as failed:
        start_server(bad, "--no-cluster", timeout=30)
    message = str(failed.value)
    assert '"member" is not a mailbox key' in message
    assert "Bad Name" in message


def test_serve_on_a_port_in_use_refuses_before_starting_anything(server_database, tree, tmp_path):
    """A taken port stops serve with the address and the reason, before it opens the
    tree (a second serve with another --root wrote that tree's mailboxes into the first
    one's database), starts the cluster or prints a "serving" line."""
    import os
    import socket
    import subprocess
    import sys

    from tests.e2e.conftest import REPO

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
        env.update(server_database)
        done = subprocess.run(
            [sys.executable, str(REPO / "manage.py"), "serve", "--addr", f"127.0.0.1:{port}", "--root", str(tree)],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in done.stderr
    assert "serving" not in done.stdout
    assert "task cluster started" not in done.stdout
    assert "database: " in done.stdout  # it got past its checks, and stopped before the tree:
    assert "eng.standup" not in done.stdout  # nothing opened, nothing written


def test_serve_on_port_0_says_the_port_it_got_and_answers_there(server_database, tree):
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    from tests.e2e.conftest import REPO

    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(server_database)
    env["PYTHONUNBUFFERED"] = "1"
    process = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "serve", "--addr", "127.0.0.1:0", "--root", str(tree), "--no-cluster"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        for line in process.stdout:
            if line.startswith("serving "):
                break
        url = line.split(" on ", 1)[1].split()[0]
        port = int(url.rsplit(":", 1)[1].strip("/"))
        assert url == f"http://127.0.0.1:{port}/" and port != 0
        with urllib.request.urlopen(f"{url}api/mailboxes/eng.standup/transcript", timeout=30) as answer:
            assert answer.status == 200
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=40)


def _cluster_pids(serve_pid: int) -> list[int]:
    import subprocess

    out = subprocess.run(["pgrep", "-P", str(serve_pid), "-f", "qcluster"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_sigterm_stops_serve_and_its_cluster(start_server, tree):
    import os
    import signal
    import time

    server = start_server(tree)
    deadline = time.monotonic() + 20
    while not (pids := _cluster_pids(server.process.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pids, server.log.read_text()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(timeout=45)
    for pid in pids:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"cluster {pid} outlived serve:\n{server.log.read_text()}")


def test_a_burst_of_requests_waits_for_a_slot_instead_of_failing(start_server, tree):
    """At most WORKFORCE_WEB_CONCURRENCY requests run at once, each holding one database
    connection; a burst far larger than that queues and every call is answered."""
    from concurrent.futures import ThreadPoolExecutor

    server = start_server(tree, "--no-cluster", env={"WORKFORCE_WEB_CONCURRENCY": "4"})

    def call(i: int) -> int:
        if i % 2:
            return server.call("GET", "/api/mailboxes/eng.standup/transcript").status
        return server.call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": f"p{i}"}}
        ).status

    with ThreadPoolExecutor(max_workers=120) as pool:
        statuses = list(pool.map(call, range(240)))
    assert statuses.count(202) == 120 and statuses.count(200) == 120, sorted(set(statuses))
    lines = server.call("GET", "/api/mailboxes/eng.standup/transcript?limit=1000").body["lines"]
    assert [line["seq"] for line in lines] == list(range(1, 121))
