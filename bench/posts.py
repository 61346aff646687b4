"""Post and read throughput of a mailbox, as ratios against baselines in the same run
(the post benchmark).

1. N posts into one mailbox through the service (``do_run_action(... "post" ...)``:
   request row, row lock, line, item, commit) against N raw INSERT+COMMITs of a
   line-sized row on the same connection settings. Prints both rates and the ratio.
   Then two floors, against the same raw rate: the post's own statements replayed with no
   application code (``replay_floor``), and the fewest statements that write a post's
   rows with no read or check at all (``fewest_statements_floor``).
2. ``read`` at 100 lines and at 100,000 lines. The transcript is windowed (the last 50
   requests), so the ratio should stay near 1.

Usage: ``python bench/posts.py [--posts N] [--big 100000]``; set DATABASE_URL for
PostgreSQL (a throwaway database is created and dropped). Ends with a verdict: posts/raw
>= 0.5 (the speed goal, both databases) and read big/small <= 1.5.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._db import throwaway_database  # noqa: E402

POST_GOAL = 0.5  # a post through the service at least half a raw INSERT+COMMIT (the speed goal)
READ_FLAT = 1.5  # a read at 100,000 lines at most this many times one at 100 ("near 1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=500)
    parser.add_argument("--big", type=int, default=100_000)
    parser.add_argument("--reads", type=int, default=50)
    args = parser.parse_args()

    with throwaway_database() as connection:
        from django.db import transaction

        from mailboxes.binder import BoundMailbox, Roster
        from mailboxes.models import Line
        from mailboxes.roster import set_current_roster
        from mailboxes.services import do_open_mailboxes
        from workforce.models import DEFAULT_ORG_ID, Request, Session
        from workforce.sessions import do_run_action, ensure_organization

        org = ensure_organization(DEFAULT_ORG_ID)
        boxes = [
            BoundMailbox(id=f"bench.box{i}", kind="mailbox", description="bench", members=["bench.a"], charter="")
            for i in range(5)
        ]
        set_current_roster(Roster(mailboxes=boxes))
        do_open_mailboxes(org, boxes, user_id="bench")
        body = "x" * 120
        print(f"database: {connection.vendor}")

        # Baseline: raw INSERT + COMMIT of a line-sized row, same connection settings.
        with connection.cursor() as cur:
            cur.execute(
                "CREATE TABLE bench_raw (id BIGINT PRIMARY KEY, line_id VARCHAR(64), at BIGINT, principal VARCHAR(200), body TEXT)"
            )
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(args.posts):
            with transaction.atomic():
                with connection.cursor() as cur:
                    cur.execute(
                        "INSERT INTO bench_raw (id, line_id, at, principal, body) VALUES (%s, %s, %s, %s, %s)",
                        [i, str(uuid.uuid4()), int(time.time() * 1000), "bench", body],
                    )
        raw = args.posts / (time.perf_counter() - t0)
        raw_cpu = (time.process_time() - c0) / args.posts

        t0, c0 = time.perf_counter(), time.process_time()
        for _i in range(args.posts):
            r = do_run_action(org=org, kind="mailbox", session_id="bench.box0", action="post", input={"body": body}, user_id="u")
            assert r.status == "completed", r.error
        posts = args.posts / (time.perf_counter() - t0)
        post_cpu = (time.process_time() - c0) / args.posts
        floor, floor_cpu, statements = replay_floor(connection, org, body, args.posts)
        fewest, fewest_cpu, fewest_statements = fewest_statements_floor(connection, body, args.posts)
        print(f"raw INSERT+COMMIT: {raw:,.0f}/s")
        print(f"service posts:     {posts:,.0f}/s")
        print(f"ratio posts/raw:   {posts / raw:.3f}")
        print(
            f"the post's own {statements} statements replayed, no application code: {floor:,.0f}/s = {floor / raw:.3f} x raw "
            f"(CPU {floor_cpu * 1e6:,.0f} us per post): the floor of this statement shape; the service reaches "
            f"{posts / floor:.3f} of it"
        )
        print(
            f"the fewest statements that write a post's rows ({fewest_statements}; no read, no check): {fewest:,.0f}/s = "
            f"{fewest / raw:.3f} x raw (CPU {fewest_cpu * 1e6:,.0f} us per post): the floor of any post through Django here"
        )
        # This process's CPU per post against per raw INSERT+COMMIT: on a shared machine
        # the wall-clock ratio also measures the neighbours; this one does not.
        print(
            f"CPU per post:      {post_cpu * 1e6:,.0f} us (raw {raw_cpu * 1e6:,.0f} us; CPU ratio raw/post {raw_cpu / post_cpu:.3f})"
        )
        post_ratio = posts / raw

        def time_reads(session_id: str) -> float:
            samples = []
            for _ in range(args.reads):
                t = time.perf_counter()
                r = do_run_action(org=org, kind="mailbox", session_id=session_id, action="read", input={}, user_id="u")
                samples.append(time.perf_counter() - t)
                assert r.status == "completed"
            return statistics.median(samples)

        def fill(session_id: str, n: int) -> None:
            session = Session.objects.get(session_id=session_id)
            batch = 5000
            for start in range(0, n, batch):
                count = min(batch, n - start)
                reqs = Request.objects.bulk_create(
                    [
                        Request(organization=org, session=session, action="post", user_id="u", status="completed")
                        for _ in range(count)
                    ]
                )
                if connection.vendor != "postgresql":  # SQLite's bulk_create leaves pks unset on old versions
                    reqs = list(Request.objects.filter(session=session).order_by("-pk")[:count])[::-1]
                Line.objects.bulk_create(
                    [
                        Line(
                            session=session,
                            seq=start + j + 1,
                            line_id=str(uuid.uuid4()),
                            at=0,
                            principal="bench",
                            body=body,
                            request=req,
                        )
                        for j, req in enumerate(reqs)
                    ]
                )
            Session.objects.filter(pk=session.pk).update(line_seq=n)  # the counter a post numbers from
            if connection.vendor == "postgresql":
                with connection.cursor() as cur:
                    cur.execute("ANALYZE")

        fill("bench.box1", 100)
        fill("bench.box2", args.big)
        small = time_reads("bench.box1")
        big = time_reads("bench.box2")
        print(f"read at 100 lines:       {small * 1000:.2f} ms (median of {args.reads})")
        print(f"read at {args.big:,} lines:  {big * 1000:.2f} ms (median of {args.reads})")
        print(f"ratio big/small:         {big / small:.2f}")
        ok = post_ratio >= POST_GOAL and big / small <= READ_FLAT
        print(
            f"verdict: {'MEETS' if ok else 'MISSES'} the goal: posts/raw {post_ratio:.3f} "
            f"{'>=' if post_ratio >= POST_GOAL else '<'} {POST_GOAL} (goal: >= {POST_GOAL} x raw on both databases); "
            f"read big/small {big / small:.2f} {'<=' if big / small <= READ_FLAT else '>'} {READ_FLAT} (windowed: near 1)"
        )


def replay_floor(connection, org, body: str, n: int) -> tuple[float, float, int]:
    """The post's own SQL with none of the application's Python: one post on
    ``bench.box0`` is captured (its statements and parameters, through Django's
    ``execute_wrapper``), then replayed ``n`` times through Django's cursor, each replay
    in one ``transaction.atomic()`` as the service's is. A replay sends fresh values where
    the captured post had its own: the request id, the line id, the new request's primary
    key and (SQLite, where the counters come back to Python) the line's and the item's
    ``seq`` from the replay's own counter UPDATE. Returns ``(replays per second, CPU
    seconds per replay, statements per post)``: what a post of this shape costs on this
    database and driver before any validation, model or flow code runs."""
    from django.db import transaction

    from mailboxes.models import Line
    from workforce.models import Item, mint_request_id
    from workforce.sessions import do_run_action

    def post(session_id: str):
        return do_run_action(org=org, kind="mailbox", session_id=session_id, action="post", input={"body": body}, user_id="u")

    # Request pks well past the line's seq and the session's pk, so the values a replay
    # replaces can't be taken for one another.
    for _ in range(60):
        post("bench.box3")
    captured: list[tuple[str, list]] = []

    def capture(execute, sql, params, many, context):
        if not sql.startswith("BEGIN"):  # SQLite's transaction start: the replay's atomic() sends its own
            captured.append((sql, list(params or [])))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        first = post("bench.box0")
    line = Line.objects.get(line_id=first.output["id"])
    old = {
        "request": first.request_id,
        "pk": first.pk,
        "line_seq": line.seq,
        "item_seq": Item.objects.get(request_id=first.pk).seq,
    }
    # A mailbox bumps both counters together, so its two seqs may be equal: either name
    # then gets the replay's value, which is equal too. The pk must differ from both.
    assert old["pk"] not in (old["line_seq"], old["item_seq"]), old

    def role(value):
        if isinstance(value, str) and first.output["id"] in value:
            return "line"
        for name, known in old.items():
            if value == known and type(value) is type(known):
                return name
        return None

    plan = [(sql, params, [role(v) for v in params]) for sql, params in captured]
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        now = {"request": mint_request_id(), "line": str(uuid.uuid4())}
        with transaction.atomic():
            with connection.cursor() as cur:
                for sql, params, roles in plan:
                    values = [
                        v if r is None else v.replace(first.output["id"], now["line"]) if r == "line" else now[r]
                        for v, r in zip(params, roles, strict=True)
                    ]
                    cur.execute(sql, values)
                    if 'INSERT INTO "workforce_request"' in sql:
                        now["pk"] = cur.fetchone()[-1]  # the statement's last column
                    elif sql.startswith('UPDATE "workforce_session"') and "RETURNING item_seq, line_seq" in sql:
                        now["item_seq"], now["line_seq"] = cur.fetchone()
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n, len(captured)


# The rows a post must write (docs/architecture.md "A post end to end"): the session's two
# counters under its row lock, the request (completed), the line and its item, and on
# PostgreSQL the streams' NOTIFY. One statement where the database has writable CTEs.
_FEWEST_POSTGRESQL = """
WITH counters AS (
    UPDATE workforce_session SET item_seq = item_seq + 1, line_seq = line_seq + 1
    WHERE organization_id = %s AND session_id = %s RETURNING id, item_seq, line_seq, user_id
), req AS (
    INSERT INTO workforce_request (request_id, organization_id, session_id, action, internal, user_id, input,
        status, output, error, idempotency_key, parent_request_id, created_at, started_at, finished_at)
    SELECT %s, %s, counters.id, 'post', false, %s, %s::jsonb, 'completed', %s::jsonb, NULL, NULL, NULL, %s, %s, %s
    FROM counters RETURNING id
), line AS (
    INSERT INTO mailboxes_line (session_id, seq, line_id, at, principal, author, seat_authored, body, request_id, answer_to_id)
    SELECT counters.id, counters.line_seq, %s, %s, counters.user_id, NULL, false, %s, req.id, NULL
    FROM counters, req RETURNING id
), item AS (
    INSERT INTO workforce_item (session_id, request_id, seq, type, component, data, created_at)
    SELECT counters.id, req.id, counters.item_seq, 'component', 'mailbox-post', %s::jsonb, %s FROM counters, req
)
SELECT line.id, pg_notify('workforce_items', counters.id::text || ':' || counters.item_seq::text) FROM line, counters
"""


def fewest_statements_floor(connection, body: str, n: int) -> tuple[float, float, int]:
    """A post cut to the writes alone: the statements above (one on PostgreSQL; on SQLite,
    with no writable CTEs, the counters' UPDATE … RETURNING and three INSERTs) on
    ``bench.box4``, each post in one ``transaction.atomic()``, with none of a post's reads
    or checks (the mailbox's state, the caller, the author, the route). No post can send
    less and keep its rows; returns ``(posts per second, CPU seconds per post,
    statements per post)``."""
    import json

    from django.db import transaction
    from django.utils import timezone

    from workforce.models import DEFAULT_ORG_ID, mint_request_id

    def post_postgresql(cur, line_id, at, wire, now):
        cur.execute(
            _FEWEST_POSTGRESQL,
            [DEFAULT_ORG_ID, "bench.box4", mint_request_id(), DEFAULT_ORG_ID, "u", json.dumps({"body": body}), wire]
            + [now, now, now, line_id, at, body, wire, now],
        )
        cur.fetchone()

    def post_sqlite(cur, line_id, at, wire, now):
        cur.execute(
            "UPDATE workforce_session SET item_seq = item_seq + 1, line_seq = line_seq + 1"
            " WHERE organization_id = %s AND session_id = %s RETURNING id, item_seq, line_seq, user_id",
            [DEFAULT_ORG_ID, "bench.box4"],
        )
        session, item_seq, line_seq, principal = cur.fetchone()
        cur.execute(
            "INSERT INTO workforce_request (request_id, organization_id, session_id, action, internal, user_id, input,"
            " status, output, error, idempotency_key, parent_request_id, created_at, started_at, finished_at)"
            " VALUES (%s, %s, %s, 'post', 0, %s, %s, 'completed', %s, NULL, NULL, NULL, %s, %s, %s) RETURNING id",
            [mint_request_id(), DEFAULT_ORG_ID, session, "u", json.dumps({"body": body}), wire, now, now, now],
        )
        (request,) = cur.fetchone()
        cur.execute(
            "INSERT INTO mailboxes_line (session_id, seq, line_id, at, principal, author, seat_authored, body, request_id,"
            " answer_to_id) VALUES (%s, %s, %s, %s, %s, NULL, 0, %s, %s, NULL)",
            [session, line_seq, line_id, at, principal, body, request],
        )
        cur.execute(
            "INSERT INTO workforce_item (session_id, request_id, seq, type, component, data, created_at)"
            " VALUES (%s, %s, %s, 'component', 'mailbox-post', %s, %s)",
            [session, request, item_seq, wire, now],
        )

    postgresql = connection.vendor == "postgresql"
    post, statements = (post_postgresql, 1) if postgresql else (post_sqlite, 4)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        line_id, at = str(uuid.uuid4()), int(time.time() * 1000)
        now = timezone.now() if postgresql else connection.ops.adapt_datetimefield_value(timezone.now())
        wire = json.dumps({"id": line_id, "at": at, "principal": "bench", "authorVerified": False, "body": body})
        with transaction.atomic():
            with connection.cursor() as cur:
                post(cur, line_id, at, wire, now)
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n, statements


if __name__ == "__main__":
    main()
