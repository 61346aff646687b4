"""Break-it: an answer being written in a private conversation (a desk chat) reaches its
owner's streams only, on a real ``serve`` in token mode, on SQLite and PostgreSQL: another
user of the organization and a user of another organization get 404 for the chat's API
stream and page stream, and the streams they may open (a mailbox's) carry none of it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, Server
from tests.e2e.sse import SseStream

pytestmark = pytest.mark.e2e

SEAT = "eng.lead"
SECRET = "the merger closes friday"


@pytest.fixture
def tree(tmp_path):
    return write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/desk/MAILBOX.md": mailbox_md(
                "Ask the team anything.", members=(SEAT,), routing=f"\n  fallback: {SEAT}"
            ),
            "teams/eng/workers/lead/WORKER.md": (
                "---\ndescription: Answers.\nmodel: embedded/scripted\nrun:\n  triggers: [chat]\n---\n\nAnswer.\n"
            ),
        },
    )


def people(server: Server) -> dict[str, str]:
    """ann and bob in the default organization, cat in another; their API tokens."""
    code = (
        "from django.contrib.auth.models import User;"
        "from rest_framework.authtoken.models import Token;"
        "from workforce.models import DEFAULT_ORG_ID, Membership;"
        "from workforce.sessions import ensure_organization;"
        "orgs = {'ann': DEFAULT_ORG_ID, 'bob': DEFAULT_ORG_ID, 'cat': 'rival'};"
        "[print(name, Token.objects.create(user=u).key) for name, org in orgs.items()"
        " for u in [User.objects.create_user(name, password='pw-' + name)]"
        " if Membership.objects.create(user=u, organization=ensure_organization(org))]"
    )
    env = {**server.env, "WORKFORCE_LOG_LEVEL": "WARNING"}
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "shell", "-c", code], env=env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split(" ", 1) for line in done.stdout.strip().splitlines()[-3:])


def page_status(server: Server, path: str, name: str) -> tuple[int, str]:
    """``path``'s status and first characters for ``name`` logged in on the pages (the
    login form, its cookie)."""
    import http.cookiejar
    import re
    import urllib.error
    import urllib.parse
    import urllib.request

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(server.base + "/accounts/login/", timeout=30).read().decode()
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    body = urllib.parse.urlencode({"username": name, "password": f"pw-{name}", "csrfmiddlewaretoken": csrf}).encode()
    opener.open(urllib.request.Request(server.base + "/accounts/login/", data=body, headers={"Referer": server.base}), timeout=30)
    assert any(cookie.name == "sessionid" for cookie in jar), f"{name} did not log in"
    try:
        with opener.open(server.base + path, timeout=30) as answer:
            return answer.status, answer.read(20000).decode(errors="replace")
    except urllib.error.HTTPError as err:
        return err.code, ""


def test_a_chats_partial_text_reaches_no_other_user(start_server, tree):
    server = start_server(tree, env={"WORKFORCE_AUTH": "token"})
    tokens = people(server)
    auth = {name: {"Authorization": f"Token {token}"} for name, token in tokens.items()}
    chat = f"chat:{SEAT}:ann"
    started = server.call("POST", f"/api/workers/{SEAT}/chat", {"message": "warm up"}, headers=auth["ann"])
    assert started.status == 202, started.body
    request_id = started.body["requestId"]
    done = server.call("GET", f"/api/requests/{request_id}?wait=30", headers=auth["ann"])
    assert done.body["status"] == "completed", done.body
    owner = SseStream(server.base, f"/api/sessions/{chat}/stream", headers=auth["ann"], timeout=60)
    watchers = {
        name: SseStream(server.base, "/api/sessions/eng.desk/stream", headers=auth[name], timeout=60) for name in ("bob", "cat")
    }
    try:
        assert owner.status == 200
        for name in ("bob", "cat"):
            for path in (f"/api/sessions/{chat}/stream", f"/api/sessions/{chat}/items", f"/api/requests/{request_id}"):
                answer = server.call("GET", path, headers=auth[name])
                assert answer.status == 404, (name, path, answer.status, answer.body)
            # Naming ann in the query does not make the caller ann: the token decides.
            answer = server.call("GET", f"/api/sessions/{chat}/stream?userId=ann", headers=auth[name])
            assert answer.status == 403 and answer.body["error"]["reason"] == "principal-mismatch", answer.body
            for path in (f"/sessions/{chat}/events", f"/sessions/{chat}/events?userId=ann"):
                assert page_status(server, path, name)[0] == 404, (name, path)
            status, desk = page_status(server, f"/mail/desk/{SEAT}/", name)  # their own chat: empty
            assert "warm up" not in desk, (name, status)
        assert (
            server.call("POST", f"/api/workers/{SEAT}/chat", {"message": f"{SECRET}\n/pace 150"}, headers=auth["ann"]).status
            == 202
        )
        seen = []
        while not (seen and seen[-1].event == "partial-text" and seen[-1].data["done"]):
            seen.append(owner.next_event(timeout=30))
        writing = [e for e in seen if e.event == "partial-text" and not e.data["done"]]
        assert writing and any(SECRET.split()[0] in e.data["text"] for e in writing)  # it was written in pieces
        for name, stream in watchers.items():
            if stream.status == 200:
                leaked = [e for e in stream.quiet_for(1.0) if SECRET.split()[1] in str(e.data)]
                assert leaked == [], (name, leaked)
            else:
                assert name == "cat" and stream.status == 404  # another organization's mailbox
    finally:
        owner.close()
        for stream in watchers.values():
            stream.close()
