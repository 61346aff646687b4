"""Nobody can stall the web server, on a real ``serve`` (issue 22 items 1-3, README
"Limits of the web server"): sockets whose bodies never come hold no web slot and no
stream place, in development and in token mode; a room page's streams count as streams
and, once their clients leave, free every place within 2 s and leave the database idle;
a body past ``WORKFORCE_MAX_BODY_BYTES`` is refused 413 before it is read, on every path.

The stalling sockets connect from other loopback addresses (127.0.0.2 and up), as other
clients would; the calls that must still answer come from 127.0.0.1."""

from __future__ import annotations

import http.client
import json
import re
import socket
import time
from contextlib import ExitStack, closing
from urllib.parse import urlencode, urlsplit

import psycopg
import pytest

from tests.e2e.conftest import Server, wait_for
from tests.e2e.test_mail_mcp import make_person
from tests.e2e.test_rooms_cluster import ALICE, BOB, room, tree

pytestmark = pytest.mark.e2e

STREAM = "/api/sessions/eng.standup/stream"


def port_of(server: Server) -> int:
    return urlsplit(server.base).port


def stall(server: Server, head: str, *, body: bytes = b"", source: str = "127.0.0.2") -> socket.socket:
    """A socket from ``source`` that sent ``head`` (request line and headers) and
    ``body``, and then nothing more."""
    sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=10, source_address=(source, 0))
    sock.sendall(head.encode() + b"\r\n" + body)
    return sock


def slow_mail(auth: str = "") -> str:
    return f"POST /api/mail HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n{auth}"


def slow_stream(auth: str = "") -> str:
    return f"GET {STREAM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nContent-Length: 100000\r\n{auth}"


def timed(server: Server, path: str, headers: dict) -> tuple[int, float]:
    """``GET path``: its status and how long it took (seconds), given at most 5 s."""
    parts = urlsplit(server.base)
    started = time.monotonic()
    with closing(http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)) as conn:
        conn.request("GET", path, headers={"Accept": "application/json", **headers})
        status = conn.getresponse().status
    return status, time.monotonic() - started


def stream_opens(server: Server, path: str, headers: dict) -> int:
    """Open a stream, read its start, close it: its status."""
    parts = urlsplit(server.base)
    with closing(http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)) as conn:
        conn.request("GET", path, headers={"Accept": "text/event-stream", **headers})
        answer = conn.getresponse()
        if answer.status == 200:
            assert answer.read(6) == b"retry:"
        return answer.status


def still_answers(server: Server, auth: dict) -> None:
    """An authenticated call and the login page answer within a second, a real stream opens."""
    for path in ("/api/mailboxes", "/accounts/login/"):
        status, took = timed(server, path, auth)
        assert status == 200 and took < 1.0, (path, status, took)
    assert stream_opens(server, STREAM, auth) == 200


@pytest.mark.parametrize("mode", ["none", "token"])
def test_sockets_whose_bodies_never_come_stall_nothing(start_server, tmp_path, mode):
    server = start_server(tree(tmp_path / "tree"), "--no-cluster", env={"WORKFORCE_AUTH": mode})
    auth = {"Authorization": f"Token {make_person(server, 'ann', may_send=True)}"} if mode == "token" else {}
    header = "".join(f"{k}: {v}\r\n" for k, v in auth.items())
    for path in ("/api/mailboxes", "/accounts/login/"):  # warmed up: a first call imports and builds what it needs
        assert timed(server, path, auth)[0] == 200
    with ExitStack() as held:
        # Sixteen slow mail posts from one client: every web slot before the fix.
        for _ in range(16):
            held.enter_context(stall(server, slow_mail(header), body=b"{"))
        time.sleep(0.3)
        still_answers(server, auth)
        # A hundred from a hundred addresses: none holds a slot.
        for n in range(100):
            held.enter_context(stall(server, slow_mail(header), body=b"{", source=f"127.0.1.{n + 1}"))
        time.sleep(0.3)
        still_answers(server, auth)
        # A hundred streams whose body never comes (the whole stream limit before the fix),
        # from one address and from a hundred.
        for n in range(100):
            held.enter_context(stall(server, slow_stream(header), source="127.0.0.3"))
            held.enter_context(stall(server, slow_stream(header), source=f"127.0.2.{n + 1}"))
        time.sleep(0.3)
        still_answers(server, auth)
        if mode == "token":
            # A hundred streams with a bad token are refused 401 and take no stream
            # place: their connections stay open, and a real stream still opens.
            bad = f"GET {STREAM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token nope\r\n"
            refused = [held.enter_context(stall(server, bad, source=f"127.0.3.{n + 1}")) for n in range(100)]
            for sock in refused:
                sock.settimeout(30)
                answer = http.client.HTTPResponse(sock)
                answer.begin()
                assert answer.status == 401 and json.loads(answer.read())["error"]["reason"] == "not-authenticated"
            still_answers(server, auth)
    # The slow bodies time out and the server answered each request; the log says so.
    assert "Traceback" not in server.log.read_text()


def test_bad_token_streams_sent_at_once_are_each_refused_401_at_once(start_server, tmp_path):
    """A CI run on PostgreSQL: the hundred bad-token streams above went unanswered for 30 s.
    Their credential checks waited for the web pool's connections, held by the refused
    streams already in the web slots, which waited to log their 401 on the threads the
    checks filled (workforce.admission_threads). Two slots (a pool of two connections)
    make it happen every time: none was answered in 8 s, where all are in about 1 s."""
    server = start_server(
        tree(tmp_path / "tree"), "--no-cluster", env={"WORKFORCE_AUTH": "token", "WORKFORCE_WEB_CONCURRENCY": "2"}
    )
    auth = {"Authorization": f"Token {make_person(server, 'ann', may_send=True)}"}
    assert timed(server, "/api/mailboxes", auth)[0] == 200
    bad = f"GET {STREAM} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token nope\r\n"
    with ExitStack() as held:
        refused = [held.enter_context(stall(server, bad, source=f"127.0.3.{n + 1}")) for n in range(100)]
        deadline = time.monotonic() + 8  # altogether: a liveness guard, below the pool's 10 s timeout
        answers = []
        for sock in refused:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            answer = http.client.HTTPResponse(sock)
            try:
                answer.begin()
            except TimeoutError:
                answers.append(None)
                continue
            answers.append((answer.status, json.loads(answer.read())["error"]["reason"]))
        assert answers == [(401, "not-authenticated")] * 100
    still_answers(server, auth)
    assert "Traceback" not in server.log.read_text()


def test_one_address_is_refused_past_its_limit_and_timed_out(start_server, tmp_path):
    server = start_server(
        tree(tmp_path / "tree"),
        "--no-cluster",
        env={"WORKFORCE_ADDRESS_LIMIT": "5", "WORKFORCE_BODY_TIMEOUT_SECONDS": "2"},
    )
    with ExitStack() as held:
        socks = [held.enter_context(stall(server, slow_mail(), body=b"{")) for _ in range(5)]
        time.sleep(0.3)
        over = held.enter_context(stall(server, slow_mail(), body=b"{"))
        over.settimeout(5)
        answer = http.client.HTTPResponse(over)
        answer.begin()
        assert answer.status == 429 and answer.getheader("Retry-After") == "5"
        assert json.loads(answer.read())["error"]["reason"] == "too-many-connections"
        # The five time out after 2 s: 408, and the connection is closed.
        for sock in socks:
            sock.settimeout(5)
            timed_out = http.client.HTTPResponse(sock)
            timed_out.begin()
            assert timed_out.status == 408 and json.loads(timed_out.read())["error"]["reason"] == "request-timeout"
            assert sock.recv(1) == b""
    status, _ = timed(server, "/api/mailboxes", {})
    assert status == 200


def _session_cookie(server: Server, user_id: str) -> str:
    """Act as ``user_id`` on the pages (development): ``/who``'s form, with its CSRF token."""
    parts = urlsplit(server.base)
    with closing(http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)) as conn:
        conn.request("GET", "/who")
        form = conn.getresponse()
        html = form.read().decode()
        csrf_cookie = re.search(r"csrftoken=([^;]+)", form.getheader("Set-Cookie")).group(1)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
        conn.request(
            "POST",
            "/who",
            body=urlencode({"userId": user_id, "csrfmiddlewaretoken": token, "next": "/"}),
            headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf_cookie}"},
        )
        chosen = conn.getresponse()
        chosen.read()
        assert chosen.status == 302, chosen.status
        return re.search(r"sessionid=([^;]+)", chosen.getheader("Set-Cookie")).group(1)


def open_room_streams(server: Server, cookie: str, n: int) -> list[socket.socket]:
    """``n`` room streams open (each answered 200 and its first line read); when one is
    not, all are closed and the test fails."""
    socks = []
    for _ in range(n):
        sock = socket.create_connection(("127.0.0.1", port_of(server)), timeout=10)
        sock.sendall(
            f"GET /projects/launch/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
            f"Cookie: sessionid={cookie}\r\n\r\n".encode()
        )
        socks.append(sock)
    statuses = []
    for sock in socks:
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        statuses.append(answer.status)
        if answer.status == 200:
            assert answer.read(6) == b"retry:"
    if statuses != [200] * n:
        for sock in socks:
            drop(sock)
        raise AssertionError(f"room streams answered {statuses}")
    return socks


def drop(sock: socket.socket) -> None:
    """Leave, as a closed browser tab does (at once, whoever still reads the socket)."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


def _database_activity(server: Server) -> tuple[int, int]:
    """``(transactions committed so far, backends busy now)`` of the server's database,
    read from the ``postgres`` database (so this read is not counted)."""
    url = server.env["DATABASE_URL"]
    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    with psycopg.connect(parts._replace(path="/postgres").geturl(), autocommit=True) as conn:
        (commits,) = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", [name]).fetchone()
        (busy,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND state IS DISTINCT FROM 'idle'", [name]
        ).fetchone()
    return commits, busy


def test_room_streams_dropped_free_every_place_and_leave_the_database_idle(start_server, tmp_path):
    """Issue 22 item 2: a room page's stream ran in a web slot, never heard its client
    leave and re-read the room every 0.5 s; sixteen visits held the server for good."""
    server = start_server(
        tree(tmp_path / "tree"),
        "--no-cluster",
        env={"WORKFORCE_WEB_CONCURRENCY": "4", "WORKFORCE_STREAM_LIMIT": "50", "WORKFORCE_ADDRESS_LIMIT": "60"},
    )
    room(server)
    cookie = _session_cookie(server, ALICE)
    socks = open_room_streams(server, cookie, 50)
    assert stream_opens(server, "/projects/launch/events", {"Cookie": f"sessionid={cookie}"}) == 503  # all 50 held
    status, took = timed(server, "/api/mailboxes", {})  # the web slots are free
    assert status == 200 and took < 1.0
    for sock in socks:
        drop(sock)
    dropped = time.monotonic()

    def all_free():
        # Every place back: 50 streams open again, then are dropped again.
        try:
            again = open_room_streams(server, cookie, 50)
        except AssertionError:
            return False
        for sock in again:
            drop(sock)
        return True

    wait_for(all_free, timeout=2.5, what="50 stream places free again", log=server.log)
    assert time.monotonic() - dropped < 4  # (opening 50 streams takes its own time)
    cookie_bob = _session_cookie(server, BOB)
    assert stream_opens(server, "/projects/launch/events", {"Cookie": f"sessionid={cookie_bob}"}) == 200
    if not server.env.get("DATABASE_URL"):
        return

    def idle():
        # No stream re-reads the room: nothing commits over 3 s, and no backend is busy
        # (50 polling streams committed 100 transactions a second). PostgreSQL sends a
        # backend's statistics up to 10 s late, hence the polling.
        before, busy = _database_activity(server)
        time.sleep(3)
        after, _ = _database_activity(server)
        return busy == 0 and after - before <= 2

    wait_for(idle, timeout=30, what="the database idle after the streams left", log=server.log)


@pytest.mark.parametrize("size", [1_100_000, 4_500_000])
def test_a_client_sending_a_body_past_the_cap_reads_its_413(start_server, tmp_path, size):
    """Break-it: a 4.5 MB POST got ConnectionResetError, not its 413. The server answered
    by the Content-Length and closed the connection with the body unread, so the kernel
    reset it while the client was still sending (1.1 and 2 MB fit the sockets' buffers).
    The 413 now reads and discards the body (bounded) before the connection closes."""
    server = start_server(tree(tmp_path / "tree"), "--no-cluster")
    parts = urlsplit(server.base)
    with closing(http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)) as conn:
        conn.request("POST", "/api/mail", body=b"x" * size, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        data = json.loads(answer.read())
    assert (answer.status, data["error"]["reason"]) == (413, "payload-too-large"), data
    assert answer.getheader("Connection") == "close"
    assert "Traceback" not in server.log.read_text()
