"""A database outage on a real ``serve`` (issue 22, item 12): while PostgreSQL refuses
connections and has ended every backend of the server's database (``ALLOW_CONNECTIONS
false`` and ``pg_terminate_backend``: a restart without the restart), every request, an API
post, an API read, a page and a stream, answers 503 with ``Retry-After`` within a second, JSON
``database-unavailable`` on the API, never a 500; once the database takes connections again,
requests answer as before. Before the fix the pooled connections the database had closed
answered 500 ``internal-error``, and then each request waited the pool's 10 s for a 503."""

from __future__ import annotations

import http.cookiejar
import json
import re
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode, urlsplit, urlunsplit

import psycopg
import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

MEMBER = "eng.lead"
POST = "/api/flows/mailbox/eng.standup/actions/post"
READ = "/api/mailboxes/eng.standup/transcript"
PAGE = "/mailboxes/eng.standup/"
STREAM = "/api/sessions/eng.standup/stream"


class Browser:
    """A cookie-keeping client that reads any answer, JSON or HTML."""

    def __init__(self, base: str):
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def send(self, method: str, path: str, body: dict | None = None, form: dict | None = None, timeout: float = 30):
        """``(status, headers, text, seconds)``; a stream that is still open after
        ``timeout`` seconds reads as status 200 with what it sent by then."""
        data, kind = None, None
        if body is not None:
            data, kind = json.dumps(body).encode(), "application/json"
        elif form is not None:
            data, kind = urlencode(form).encode(), "application/x-www-form-urlencoded"
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if kind:
            request.add_header("Content-Type", kind)
        if form is not None:
            request.add_header("Referer", self.base + path)
        started = time.monotonic()
        try:
            with self.opener.open(request, timeout=timeout) as answer:
                try:
                    text = answer.read().decode()
                except TimeoutError:  # a live stream: it answered, and stays open
                    text = ""
                return answer.status, dict(answer.headers), text, time.monotonic() - started
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read().decode(), time.monotonic() - started

    def sign_in(self, user_id: str) -> None:
        """Development mode's ``/who``: the user id kept in the (database) session."""
        status, _, text, _ = self.send("GET", "/who")
        assert status == 200, text
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', text).group(1)
        status, _, text, _ = self.send("POST", "/who", form={"csrfmiddlewaretoken": token, "userId": user_id, "next": "/"})
        assert status == 200, text  # redirected home


def admin_url(database_url: str) -> tuple[str, str]:
    parts = urlsplit(database_url)
    return urlunsplit(parts._replace(path="/postgres")), parts.path.lstrip("/")


def test_every_request_during_an_outage_answers_503_at_once_and_normally_after(tmp_path, start_server):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Where the team posts.", members=(MEMBER,)),
            "teams/eng/workers/lead/WORKER.md": "---\ndescription: Leads.\nmodel: embedded/echo\n---\n\nYou lead.\n",
        },
    )
    server = start_server(root)
    if "DATABASE_URL" not in server.env:
        pytest.skip("needs PostgreSQL")
    browser = Browser(server.base)
    browser.sign_in(MEMBER)

    def post(n: int):
        return browser.send("POST", POST, body={"userId": MEMBER, "input": {"body": f"post {n}"}})

    requests = {
        "post": lambda n: post(n),
        "read": lambda n: browser.send("GET", f"{READ}?userId={MEMBER}"),
        "page": lambda n: browser.send("GET", PAGE),
        "stream": lambda n: browser.send("GET", f"{STREAM}?userId={MEMBER}&after=999999", timeout=1.5),
    }
    for name, call in requests.items():  # warm: the pool holds open connections now
        status, _, text, _ = call(0)
        assert status in (200, 202), (name, status, text)

    admin, name = admin_url(server.env["DATABASE_URL"])
    with psycopg.connect(admin, autocommit=True) as conn:
        try:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            answers = []
            for n in range(1, 5):
                for kind, call in requests.items():
                    answers.append((kind, *call(n)))
        finally:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            restored = time.monotonic()

    problems = []
    for kind, status, headers, text, seconds in answers:
        if status != 503 or "Retry-After" not in headers or seconds > 1.0:
            problems.append((kind, status, headers.get("Retry-After"), round(seconds, 2), text[:200]))
        elif kind != "page":
            body = json.loads(text)
            assert body["status"] == "failed" and body["error"]["reason"] == "database-unavailable", body
    assert not problems, problems
    print("during the outage:", [(kind, status, round(seconds, 3)) for kind, status, _, _, seconds in answers])

    # Back: every kind of request answers as before, within seconds.
    wait_for(lambda: post(99)[0] == 202, timeout=10, what="a post answered 202 again", log=server.log)
    print(f"a post answered 202 {time.monotonic() - restored:.2f}s after the database took connections again")
    for kind, call in requests.items():
        status, _, text, _ = call(100)
        assert status in (200, 202), (kind, status, text[:300])
