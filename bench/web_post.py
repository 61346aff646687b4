"""The web process's cost of one HTTP post: the post ``bench/post_and_wake.py`` sends
(``POST /api/flows/mailbox/bench.thread/actions/post``, a mailbox with one echo seat).

    DATABASE_URL=postgres://... python bench/web_post.py [--via asgi|socket] [--posts 300]
        [--rounds 3] [--profile none|cprofile|yappi] [--auth none|token]

``--via asgi`` (default): sent N times straight to the ASGI application ``serve`` runs (no
socket, no uvicorn), against the same post through ``do_run_action`` alone, both timed
with ``process_time`` (every thread of this process); the difference is what Django's
handler, the middleware and DRF cost a post on top of the service. ``--profile`` profiles
the HTTP posts instead (``yappi`` sees every thread; ``pip install yappi``).

``--via socket``: ``manage.py serve --no-cluster`` as a child process, posted to over one
keep-alive connection; the server process's CPU per post from ``/proc`` (uvicorn
included) and the post's wall time as the poster sees it.

No cluster runs in either: the posts' deliveries stay pending. A fresh database
(throwaway) each run; medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
GOAL_HTTP_US = 2_000  # CPU the HTTP layer may add to one post


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--via", choices=["asgi", "socket"], default="asgi")
    parser.add_argument("--posts", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--profile", choices=["none", "cprofile", "yappi"], default="none")
    parser.add_argument("--auth", choices=["none", "token"], default="none")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of HTTP and service posts")
    args = parser.parse_args()

    if args.via == "socket":
        over_socket(args)
        return
    os.environ["DJANGO_SETTINGS_MODULE"] = "workforce_project.settings"  # a real broker: tasks are rows, not run here
    os.environ.setdefault("WORKFORCE_LOG_LEVEL", "WARNING")
    os.environ["WORKFORCE_AUTH"] = args.auth
    from bench._db import no_throttles

    no_throttles()
    os.environ["WORKFORCE_VAR_DIR"] = tempfile.mkdtemp(prefix="wf_webpost_")
    tree = Path(tempfile.mkdtemp(prefix="wf_webpost_tree_"))
    from bench.post_and_wake import THREAD, USER, write_tree

    write_tree(tree)
    os.environ["WORKFORCE_ROOT"] = str(tree)

    from bench._db import throwaway_database

    with throwaway_database() as connection:
        run(args, connection, THREAD, USER)


def run(args, connection, thread: str, user: str) -> None:
    from django.conf import settings

    from workforce_project.boot import boot, open_roster

    open_roster(boot(settings.WORKFORCE_ROOT))
    headers = [(b"content-type", b"application/json"), (b"host", b"127.0.0.1:8000")]
    if args.auth == "token":
        from django.contrib.auth.models import User
        from rest_framework.authtoken.models import Token

        from workforce.models import DEFAULT_ORG_ID, Membership
        from workforce.sessions import ensure_organization

        person = User.objects.create_user(user)
        Membership.objects.create(user=person, organization=ensure_organization(DEFAULT_ORG_ID))
        token = Token.objects.create(user=person)
        headers.append((b"authorization", f"Token {token.key}".encode()))

    from workforce_project.deployment import enable_web_pool

    pooled = enable_web_pool()
    from workforce_project.asgi import application

    path = f"/api/flows/mailbox/{thread}/actions/post"

    async def http_post(n: int) -> int:
        body = json.dumps({"userId": user, "input": {"body": f"post {n}"}}).encode()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        sent = False
        status = {}
        done = asyncio.Event()

        async def receive():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        await application(scope, receive, send)
        done.set()
        return status["code"]

    from workforce.models import DEFAULT_ORG_ID
    from workforce.sessions import do_run_action, ensure_organization

    org = ensure_organization(DEFAULT_ORG_ID)

    def service_post(n: int) -> None:
        row = do_run_action(org=org, kind="mailbox", session_id=thread, action="post", input={"body": f"s {n}"}, user_id=user)
        assert row.status == "completed", row.error

    async def http_round(n: int) -> float:
        t0 = time.process_time()
        for i in range(n):
            code = await http_post(i)
            assert code == 202, code
        return (time.process_time() - t0) * 1e6 / n

    async def service_round(n: int) -> float:
        from asgiref.sync import sync_to_async

        def many():
            t0 = time.process_time()
            for i in range(n):
                service_post(i)
            return (time.process_time() - t0) * 1e6 / n

        # The same thread the views run on (thread_sensitive), so the same connection.
        return await sync_to_async(many, thread_sensitive=True)()

    async def main_loop():
        await http_round(args.warmup)
        await service_round(args.warmup)
        if args.profile != "none":
            await profiled(args, http_round)
            return
        http_us, service_us = [], []
        for _ in range(args.rounds):
            http_us.append(await http_round(args.posts))
            service_us.append(await service_round(args.posts))
        h, s = statistics.median(http_us), statistics.median(service_us)
        print(
            f"{connection.vendor}, auth {args.auth}, pool {'on' if pooled else 'off'}; {args.posts} posts x {args.rounds} rounds"
        )
        print(f"  CPU per HTTP post (ASGI app, in process): {h:,.0f} us  (rounds: {', '.join(f'{x:,.0f}' for x in http_us)})")
        print(f"  CPU per service post (do_run_action):      {s:,.0f} us  (rounds: {', '.join(f'{x:,.0f}' for x in service_us)})")
        print(f"  the HTTP layer's own: {h - s:,.0f} us per post; HTTP post / service post {h / s:.2f}")
        # The goal (issue "Speed", the web process's post): what Django and DRF add to a
        # post costs no more than a plain Django+DRF JSON POST, 1-2 ms of CPU.
        verdict = "meets" if h - s <= GOAL_HTTP_US else "misses"
        print(f"verdict: {verdict} (the HTTP layer's own CPU per post {h - s:,.0f} us; goal <= {GOAL_HTTP_US:,} us)")

    asyncio.run(main_loop())


async def profiled(args, http_round) -> None:
    if args.profile == "cprofile":
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        us = await http_round(args.posts)
        prof.disable()
        print(f"CPU per HTTP post (profiled, main thread only in the listing): {us:,.0f} us")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(60)
        return
    import yappi

    yappi.set_clock_type("cpu")
    yappi.start(builtins=False)
    us = await http_round(args.posts)
    yappi.stop()
    print(f"CPU per HTTP post (profiled by yappi, every thread): {us:,.0f} us")
    stats = yappi.get_func_stats()
    stats.sort("ttot", "desc")
    stats.print_all(out=sys.stdout, columns={0: ("name", 90), 1: ("ncall", 10), 2: ("tsub", 8), 3: ("ttot", 8), 4: ("tavg", 8)})
    yappi.get_thread_stats().print_all()


def over_socket(args) -> None:
    import http.client
    import shutil

    from bench._db import no_throttles, scratch_postgres
    from bench.post_and_wake import THREAD, USER, Server, free_port, wait_http, write_tree

    if args.auth != "none":
        raise SystemExit("--via socket posts without authentication only")
    tmp = Path(tempfile.mkdtemp(prefix="wf_webpost_"))
    root = write_tree(tmp / "tree")
    url = os.environ.get("DATABASE_URL", "")
    tick = os.sysconf("SC_CLK_TCK")
    try:
        with scratch_postgres(url) if url.startswith(("postgres://", "postgresql://")) else _no_database() as db_url:
            env = {"WORKFORCE_VAR_DIR": str(tmp / "var"), "WORKFORCE_AUTH": "none", "WORKFORCE_LOG_LEVEL": "WARNING"}
            no_throttles(env)
            if db_url:
                env["DATABASE_URL"] = db_url
            os.environ.update(env)
            port = free_port()
            server = Server(["serve", "--no-cluster", "--addr", f"127.0.0.1:{port}", "--root", str(root)], tmp / "serve.log")
            try:
                wait_http(port, server)
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                path = f"/api/flows/mailbox/{THREAD}/actions/post"

                def post(n: int) -> None:
                    body = json.dumps({"userId": USER, "input": {"body": f"post {n}"}})
                    conn.request("POST", path, body=body, headers={"content-type": "application/json"})
                    response = conn.getresponse()
                    response.read()
                    assert response.status == 202, response.status

                def server_seconds() -> float:
                    stat = Path(f"/proc/{server.proc.pid}/stat").read_text()
                    rest = stat[stat.rindex(")") + 2 :].split()
                    return sum(int(x) for x in rest[11:13]) / tick

                for n in range(args.warmup):
                    post(n)
                cpu_us, wall_ms = [], []
                for _ in range(args.rounds):
                    c0 = server_seconds()
                    walls = []
                    for n in range(args.posts):
                        t = time.perf_counter()
                        post(n)
                        walls.append((time.perf_counter() - t) * 1000)
                    cpu_us.append((server_seconds() - c0) * 1e6 / args.posts)
                    wall_ms.append(statistics.median(walls))
                conn.close()
            finally:
                server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"serve --no-cluster over a socket, {'postgresql' if url.startswith('postgres') else 'sqlite'}; {args.posts} posts x {args.rounds} rounds"
    )
    print(f"  web process CPU per post: {statistics.median(cpu_us):,.0f} us  (rounds: {', '.join(f'{x:,.0f}' for x in cpu_us)})")
    print(
        f"  post as the poster sees it, median: {statistics.median(wall_ms):.2f} ms  (rounds: {', '.join(f'{x:.2f}' for x in wall_ms)})"
    )


@contextlib.contextmanager
def _no_database():
    yield None


if __name__ == "__main__":
    main()
