"""The break-it pass's counting, verdict, report and fuzz cases (``bench/breakit.py``).

Nothing here starts a process or touches a database: the functions take what was read
(rows as tuples, answers as status codes) and return figures, so they are unit-tested
cheaply (``tests/bench/test_breakit_counts.py``).
"""

from __future__ import annotations

import http.client
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

LOOPBACK = "127.0.0.1"
EXTRA_TASKS_LIMIT = 0.01  # extra tasks allowed, as a share of the deliveries


# ----------------------------------------------------------------------------- counting


@dataclass
class Figures:
    """What one rerun measured. Counts are whole numbers; ``*_s`` are seconds."""

    posts_202: int = 0  # posts the server answered 202
    posts_4xx: int = 0
    posts_5xx: int = 0
    posts_non_json: int = 0
    posts_refused: int = 0  # connection refused (the server was down between a kill and its restart)
    posts_broken: int = 0  # connection broken or timed out mid-request: the outcome is unknown
    posts_in_db: int = 0  # client posts in the transcript (>= posts_202: a broken post may have committed)
    acked_missing: int = 0  # posts answered 202 whose line is not in the transcript
    members: int = 0
    expected_wakes: int = 0  # posts_in_db x members, plus acked_missing x members
    deliveries: int = 0  # delivery rows
    wakes_done: int = 0  # deliveries done with the seat's answer line in the transcript
    failed: int = 0  # deliveries given up (failed)
    unsettled: int = 0  # wakes whose delivery was still pending or running when the settle bound ran out
    lost: int = 0  # wakes with no delivery row, failed (given up), or done without the answer line
    load_log_errors: int = 0  # ERROR lines the server logged during load and settle (kills cause some)
    duplicated_turns: int = 0  # (post, seat) pairs with more than one completed turn
    duplicated_answers: int = 0  # (seat, post) pairs with more than one answer line
    kills: int = 0
    kill_log: list[str] = field(default_factory=list)
    tasks: int = 0  # deliver_post tasks the cluster ran (distinct task ids) plus those still queued
    task_runs: int = 0  # runs of those tasks (a redelivered task counts each run)
    tasks_not_claimed: int = 0  # runs that found their delivery already taken (pure waste)
    turn_order_waits: int = 0  # runs that found their seat's turn slot taken (a TurnWait): each costs one later task, not waste
    queued_left: int = 0  # tasks still in the broker when counted
    sweeper_requeued: int = 0  # re-enqueues the sweeper logged
    extra_tasks: int = 0
    wake_median_s: float | None = None
    wake_p95_s: float | None = None
    wake_max_s: float | None = None
    fault: str = ""  # what --fault did, and when
    fault_wake_p95_s: float | None = None  # wake latency p95 of the posts written from 10 s before the fault to its end
    fault_wake_max_s: float | None = None
    fault_resume_s: float | None = None  # fault end -> the first turn that started after it
    fault_drained_s: float | None = None  # fault end -> the last delivery settled
    settle_s: float = 0.0
    fuzz_requests: int = 0
    fuzz_by_status: dict = field(default_factory=dict)
    fuzz_problems: list[str] = field(default_factory=list)  # every 5xx, non-JSON or unanswered /api/ request
    fuzz_log_errors: list[str] = field(default_factory=list)  # ERROR lines logged while fuzzing (web or cluster)

    @property
    def duplicated(self) -> int:
        return self.duplicated_turns + self.duplicated_answers

    @property
    def fuzz_5xx(self) -> int:
        return sum(n for status, n in self.fuzz_by_status.items() if isinstance(status, int) and status >= 500)


def count_lost(
    posts: Iterable[str],
    members: Iterable[str],
    done: Iterable[tuple[str, str]],
    answered: Iterable[tuple[str, str]],
    acked_missing: int = 0,
    open_: Iterable[tuple[str, str]] = (),
) -> tuple[int, int, int, int]:
    """Wakes expected, wakes done and wakes lost.

    Args:
        posts: the client posts' line ids found in the transcript.
        members: the mailbox's member seat ids.
        done: ``(post id, member)`` of every delivery whose status is ``done``.
        answered: ``(post id, member)`` of every seat answer line found.
        acked_missing: posts answered 202 whose line is not in the transcript; each
            loses one wake per member.
        open_: ``(post id, member)`` of every delivery still pending or running.

    A wake is done when its delivery is done *and* its answer line landed; one still
    pending or running is unsettled; every other expected ``(post, member)`` pair (no
    delivery row, failed, or done without its line) is lost. Returns ``(expected, done,
    lost, unsettled)``.
    """
    members = list(members)
    expected = {(p, m) for p in posts for m in members}
    ok = expected & set(done) & set(answered)
    unsettled = (expected - ok) & set(open_)
    extra = acked_missing * len(members)
    return len(expected) + extra, len(ok), len(expected) - len(ok) - len(unsettled) + extra, len(unsettled)


def count_duplicated(completed_turns: Iterable[tuple[str, str]], answers: Iterable[tuple[str, str]]) -> tuple[int, int]:
    """Pairs that ran twice: ``(post id, member)`` with more than one completed
    ``onMailboxPost`` turn, and ``(post id, seat)`` with more than one answer line.
    Returns ``(duplicated turns, duplicated answers)``."""
    turns = Counter(completed_turns)
    lines = Counter(answers)
    return sum(1 for n in turns.values() if n > 1), sum(1 for n in lines.values() if n > 1)


def count_extra_tasks(tasks: int, deliveries: int, turn_order_waits: int = 0) -> int:
    """Tasks enqueued beyond one per delivery and one per turn-order wait (a delivery
    whose seat was busy in its conversation left a ``TurnWait`` and gets a second task
    when the slot frees: the README's "one turn at a time", not waste). Never negative:
    a task lost with a killed Redis worker and not re-enqueued shows as a lost wake, not
    as -1 here."""
    return max(0, tasks - deliveries - turn_order_waits)


def verdict(f: Figures) -> tuple[bool, str]:
    """PASS when nothing was lost or run twice, no answer (load or fuzz) was a 5xx or not
    JSON, and extra tasks stay within 1% of the deliveries. Returns ``(passed, line)``."""
    reasons = []
    if f.lost:
        reasons.append(f"{f.lost} lost")
    if f.unsettled:
        reasons.append(f"{f.unsettled} wakes unsettled at the bound")
    if f.duplicated:
        reasons.append(f"{f.duplicated} duplicated")
    if f.posts_5xx or f.fuzz_5xx:
        reasons.append(f"{f.posts_5xx + f.fuzz_5xx} 5xx")
    if f.posts_non_json or len(f.fuzz_problems) > f.fuzz_5xx:
        reasons.append(f"{f.posts_non_json + len(f.fuzz_problems) - f.fuzz_5xx} non-JSON/unanswered")
    if f.fuzz_log_errors:
        reasons.append(f"{len(f.fuzz_log_errors)} errors logged by the server during the fuzz")
    if f.extra_tasks > EXTRA_TASKS_LIMIT * max(f.deliveries, 1):
        reasons.append(f"extra tasks {f.extra_tasks} > 1% of {f.deliveries} deliveries")
    if not reasons:
        return True, "PASS: nothing lost, nothing run twice, no 5xx, extra tasks within 1% of deliveries"
    return False, "FAIL: " + ", ".join(reasons)


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))]


def render(f: Figures, *, header: str) -> str:
    """The report: one table of the figures, the fuzz 5xx list and the verdict line."""

    def sec(v):
        return "-" if v is None else f"{v:.1f} s"

    share = f"{100 * f.extra_tasks / f.deliveries:.1f}% of deliveries" if f.deliveries else "-"
    rows = [
        (
            "posts",
            f"{f.posts_202}",
            f"answered 202; {f.posts_4xx} 4xx, {f.posts_5xx} 5xx, {f.posts_non_json} non-JSON, "
            f"{f.posts_refused} refused (server down), {f.posts_broken} broken/timed out; "
            f"{f.posts_in_db} in the transcript",
        ),
        (
            "wakes",
            f"{f.wakes_done}",
            f"done (delivery done + answer line) of {f.expected_wakes} expected ({f.members} members); {f.deliveries} deliveries",
        ),
        ("kills", f"{f.kills}", "; ".join(f.kill_log) or "-"),
        (
            "lost",
            f"{f.lost}",
            f"{f.failed} deliveries failed, {f.acked_missing} acked posts missing; "
            f"{f.unsettled} wakes unsettled at the bound (not counted lost)",
        ),
        ("duplicated", f"{f.duplicated}", f"{f.duplicated_turns} turns run twice, {f.duplicated_answers} answers twice"),
        ("5xx", f"{f.posts_5xx + f.fuzz_5xx}", f"load {f.posts_5xx}, fuzz {f.fuzz_5xx}"),
        (
            "extra tasks",
            f"{f.extra_tasks}",
            f"{share}: {f.tasks} deliver_post tasks ({f.task_runs} runs, "
            f"{f.tasks_not_claimed} found nothing to do, {f.queued_left} left queued) "
            f"less one per delivery and one per turn-order wait; sweeper re-enqueued {f.sweeper_requeued}",
        ),
        (
            "turn-order waits",
            f"{f.turn_order_waits}",
            (f"{100 * f.turn_order_waits / f.deliveries:.1f}% of deliveries" if f.deliveries else "-")
            + ": found the seat busy in its conversation, ran again when its turn ended (not waste)",
        ),
        (
            "wake latency",
            sec(f.wake_median_s),
            f"median post -> turn start; p95 {sec(f.wake_p95_s)}, "
            f"max {sec(f.wake_max_s)}; settled {f.settle_s:.0f} s after the load",
        ),
        *(
            [
                (
                    "fault",
                    sec(f.fault_wake_p95_s),
                    f"wake p95 of the posts it hit (from 10 s before it to its end), max {sec(f.fault_wake_max_s)}; "
                    f"first turn {sec(f.fault_resume_s)} and all deliveries settled {sec(f.fault_drained_s)} "
                    f"after it ended; {f.fault}",
                )
            ]
            if f.fault
            else []
        ),
        (
            "fuzz",
            f"{f.fuzz_requests}",
            "requests; by status "
            + ", ".join(f"{k}: {v}" for k, v in sorted(f.fuzz_by_status.items(), key=lambda kv: str(kv[0]))),
        ),
        (
            "errors logged",
            f"{f.load_log_errors}",
            f"ERROR lines during load and settle; {len(f.fuzz_log_errors)} during the fuzz",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    out = [header, ""]
    out += [f"  {name:<{width}}  {value:>8}  {note}" for name, value, note in rows]
    if f.fuzz_problems:
        out += ["", f"fuzz answers that are 5xx, not JSON or missing ({len(f.fuzz_problems)}):"]
        out += [f"  - {p}" for p in f.fuzz_problems]
    if f.fuzz_log_errors:
        out += ["", f"errors the server logged during the fuzz ({len(f.fuzz_log_errors)}):"]
        out += [f"  - {e}" for e in f.fuzz_log_errors]
    out += ["", verdict(f)[1]]
    return "\n".join(out)


# ----------------------------------------------------------------------------- HTTP


@dataclass
class Answer:
    status: int | str  # the HTTP status, or "no answer: <error>"
    content_type: str
    body: bytes

    @property
    def is_json(self) -> bool:
        if not self.content_type.split(";")[0].strip().endswith("json"):
            return False
        try:
            json.loads(self.body or b"null")
            return True
        except ValueError:
            return False


def call(
    port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None, timeout: float = 30.0
) -> Answer:
    """One HTTP request to ``127.0.0.1:port`` (never anywhere else). Raises OSError
    (ConnectionRefusedError, a reset, a timeout) when there is no answer."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout)
    try:
        all_headers = {"Accept": "application/json"}
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        all_headers.update(headers or {})
        all_headers = {k: v for k, v in all_headers.items() if v is not None}
        conn.request(method, path, body=body, headers=all_headers)
        resp = conn.getresponse()
        data = resp.read()
        return Answer(resp.status, resp.getheader("Content-Type") or "", data)
    except http.client.HTTPException as exc:  # a garbled or cut answer: no answer
        raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


# ----------------------------------------------------------------------------- fuzz


@dataclass
class Case:
    """One fuzz request: ``name`` says what it probes."""

    name: str
    method: str
    path: str
    body: bytes | None = None
    headers: dict = field(default_factory=dict)

    def describe(self) -> str:
        body = "" if self.body is None else f" body[{len(self.body)}]={self.body[:80]!r}"
        heads = "".join(f" {k}: {str(v)[:40]}{'…' if len(str(v)) > 40 else ''}" for k, v in self.headers.items())
        path = self.path if len(self.path) <= 100 else self.path[:100] + f"…({len(self.path)} chars)"
        return f"{self.name}: {self.method} {path}{heads}{body}"


def _j(value) -> bytes:
    return json.dumps(value).encode()


def fuzz_cases(*, mailbox: str, board_mailbox: str, board: str, coordinator: str, user: str = "u_fuzz") -> list[Case]:
    """The bounded list of malformed and edge inputs (a few hundred requests at most).

    Lengths probe every column at its limit and one over it: user ids (200), session
    ids (300), kinds (100), actions (200), the Idempotency-Key (255), a board row's
    assignee (200) and the composed ids a coordinator derives from a session id.
    """
    post = f"/api/flows/mailbox/{mailbox}/actions/post"
    file_task = f"/api/flows/mailbox/{board_mailbox}/actions/fileTask"
    sessions = f"/api/workers/{coordinator}/sessions"
    cases: list[Case] = []

    def add(name, method, path, body=None, **headers):
        cases.append(Case(name, method, path, body, {k.replace("_", "-"): v for k, v in headers.items()}))

    ok = {"userId": user, "input": {"body": "fuzz"}}
    add("valid post (control)", "POST", post, _j(ok))
    # bad JSON and wrong shapes
    for name, raw in [
        ("truncated JSON", b'{"userId": "u", "input": {'),
        ("empty body", b""),
        ("not JSON", b"hello"),
        ("JSON array", b"[]"),
        ("JSON string", b'"x"'),
        ("JSON null", b"null"),
        ("JSON number", b"12"),
        ("NaN", b'{"userId": "u", "input": {"body": "x", "n": NaN}}'),
        ("Infinity", b'{"userId": "u", "input": {"body": "x", "n": Infinity}}'),
        ("duplicate keys", b'{"userId": "a", "userId": "b", "input": {"body": "x"}}'),
        ("invalid UTF-8", b'{"userId": "u", "input": {"body": "\xff\xfe"}}'),
        ("lone surrogate", b'{"userId": "u", "input": {"body": "\\ud800"}}'),
        ("BOM", b'\xef\xbb\xbf{"userId": "u", "input": {"body": "x"}}'),
    ]:
        add(name, "POST", post, raw)
    for name, value in [
        ("input a list", {"userId": user, "input": []}),
        ("input a string", {"userId": user, "input": "x"}),
        ("no input", {"userId": user}),
        ("body a number", {"userId": user, "input": {"body": 5}}),
        ("body null", {"userId": user, "input": {"body": None}}),
        ("body empty", {"userId": user, "input": {"body": ""}}),
        ("userId a number", {"userId": 42, "input": {"body": "x"}}),
        ("userId a list", {"userId": ["u"], "input": {"body": "x"}}),
        ("userId empty", {"userId": "", "input": {"body": "x"}}),
        ("userId missing", {"input": {"body": "x"}}),
        ("unknown input key", {"userId": user, "input": {"body": "x", "zzz": 1}}),
        ("big int in input", {"userId": user, "input": {"body": "x", "n": 2**70}}),
    ]:
        add(name, "POST", post, _j(value))
    # NUL
    add("NUL in body", "POST", post, _j({"userId": user, "input": {"body": "a\u0000b"}}))
    add("NUL in userId", "POST", post, _j({"userId": "u\u0000x", "input": {"body": "x"}}))
    add("NUL in path", "POST", f"/api/flows/mailbox/{mailbox}%00/actions/post", _j(ok))
    add("NUL in fileTask goal", "POST", file_task, _j({"userId": user, "input": {"board": board, "goal": "a\u0000b"}}))
    # sizes
    add("body 32,000 chars", "POST", post, _j({"userId": user, "input": {"body": "x" * 32_000}}))
    add("body 32,001 chars", "POST", post, _j({"userId": user, "input": {"body": "x" * 32_001}}))
    add("request 3 MB", "POST", post, _j({"userId": user, "input": {"body": "x" * 3_000_000}}))
    add(
        "request 3 MB of keys", "POST", post, _j({"userId": user, "input": {"body": "x", **{f"k{i}": i for i in range(250_000)}}})
    )
    for depth in (100, 1_000, 100_000):
        nested = b'{"userId": "u", "input": {"body": "x", "deep": ' + b"[" * depth + b"]" * depth + b"}}"
        add(f"nesting depth {depth}", "POST", post, nested)
    # column lengths, at and over
    for n in (200, 201, 1_000):
        add(f"userId {n} chars", "POST", post, _j({"userId": "u" * n, "input": {"body": "x"}}))
    add("userId with ':'", "POST", post, _j({"userId": "a:b:c", "input": {"body": "x"}}))
    add("userId with '/'", "POST", post, _j({"userId": "a/b", "input": {"body": "x"}}))
    for n in (255, 256, 5_000):
        add(f"Idempotency-Key {n} chars", "POST", post, _j(ok), **{"Idempotency-Key": "k" * n})
    add(
        "Idempotency-Key reused with other input",
        "POST",
        post,
        _j({"userId": user, "input": {"body": "other"}}),
        **{"Idempotency-Key": "k" * 255},
    )
    for n in (299, 300, 301, 2_000):
        add(f"mailbox sessionId {n} chars", "POST", f"/api/flows/mailbox/{'m' * n}/actions/post", _j(ok))
    for n in (100, 101):
        add(f"kind {n} chars", "POST", f"/api/flows/{'k' * n}/{mailbox}/actions/post", _j(ok))
    for n in (200, 201):
        add(f"action {n} chars", "POST", f"/api/flows/mailbox/{mailbox}/actions/{'a' * n}", _j(ok))
    add("path 20,000 chars", "GET", "/api/sessions/" + "s" * 20_000 + "/items")
    # fileTask
    base_task = {"board": board, "goal": "Fuzz the board."}
    for n in (200, 201, 5_000):
        add(f"fileTask assignee {n} chars", "POST", file_task, _j({"userId": user, "input": {**base_task, "assignee": "a" * n}}))
    add(
        "fileTask assignee nobody has", "POST", file_task, _j({"userId": user, "input": {**base_task, "assignee": "nobody.here"}})
    )
    for key in ("title", "goal"):
        for n in (200, 201, 32_001):
            add(f"fileTask {key} {n} chars", "POST", file_task, _j({"userId": user, "input": {**base_task, key: "t" * n}}))
    add("fileTask board unknown", "POST", file_task, _j({"userId": user, "input": {**base_task, "board": "nope"}}))
    add("fileTask board 201 chars", "POST", file_task, _j({"userId": user, "input": {**base_task, "board": "b" * 201}}))
    add("fileTask goal a dict", "POST", file_task, _j({"userId": user, "input": {"board": board, "goal": {"a": 1}}}))
    add("fileTask no goal", "POST", file_task, _j({"userId": user, "input": {"board": board}}))
    # coordinator sessions: the composed id is <coordinator>:<user>[:<sessionId>] and delegate ids grow from it
    for n in (1, 200, 260, 280, 300, 301, 1_000):
        add(f"worker session sessionId {n} chars", "POST", sessions, _j({"userId": user, "sessionId": "s" * n}))
    add("worker session sessionId with ':'", "POST", sessions, _j({"userId": user, "sessionId": "a:b"}))
    add("worker session userId 200 chars", "POST", sessions, _j({"userId": "u" * 200}))
    add("worker session userId with ':'", "POST", sessions, _j({"userId": "a:b"}))
    add("worker session state a list", "POST", sessions, _j({"userId": user, "state": [1]}))
    add("worker session state deep", "POST", sessions, b'{"userId": "u", "state": {"x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}")
    add("worker session unknown worker", "POST", "/api/workers/nobody.here/sessions", _j({"userId": user}))
    add("worker session worker 300 chars", "POST", f"/api/workers/{'w' * 300}/sessions", _j({"userId": user}))
    add(
        "coordinator run on a long conversation id",
        "POST",
        f"/api/flows/coordinator/{coordinator}:{user}:{'s' * 240}/actions/run",
        _j({"userId": user, "input": {"message": "hello"}}),
    )
    add(
        "coordinator run message 32,001 chars",
        "POST",
        f"/api/flows/coordinator/{coordinator}:{user}/actions/run",
        _j({"userId": user, "input": {"message": "m" * 32_001}}),
    )
    # unknown /api/ paths and methods
    for method, path in [
        ("POST", "/api/nope"),
        ("POST", "/api/"),
        ("GET", "/api/nope"),
        ("POST", "/api/requests/r_x"),
        ("PUT", post),
        ("DELETE", post),
        ("PATCH", f"/api/mailboxes/{mailbox}/transcript"),
        ("POST", f"/api/mailboxes/{mailbox}/transcript"),
        ("POST", "/api/schema/"),
        ("POST", "/api/flows/mailbox"),
        ("POST", "/api/flows/mailbox/x/actions/"),
        ("POST", "/api/sessions/x/items"),
        ("OPTIONS", post),
        ("POST", post + "/"),
    ]:
        add(f"{method} {path[:40]}", method, path, _j(ok))
    # content types
    for ctype in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/xml",
        "application/json; charset=latin-1",
        "",
        None,
    ):
        add(f"Content-Type {ctype!r}", "POST", post, _j(ok), **{"Content-Type": ctype})
    add("form body as form", "POST", post, b"userId=u&input=x", **{"Content-Type": "application/x-www-form-urlencoded"})
    add("Accept text/html on unknown path", "GET", "/api/nope", **{"Accept": "text/html"})
    # numbers out of range in queries and ids
    for q in (
        "after=2147483648",
        "after=9223372036854775808",
        "after=-1",
        "after=1e309",
        "after=abc",
        "limit=0",
        "limit=-5",
        "limit=99999999999999999999",
        "limit=2147483648",
        "after=NaN",
    ):
        add(f"transcript ?{q}", "GET", f"/api/mailboxes/{mailbox}/transcript?{q}")
        add(f"items ?{q}", "GET", f"/api/sessions/{mailbox}/items?{q}")
    for q in ("limit=18446744073709551616", "after=" + "9" * 40, "status=zzz", "assignee=" + "a" * 300):
        add(f"board tasks ?{q[:30]}", "GET", f"/api/boards/{board_mailbox}.{board}/tasks?{q}")
    for rid in ("r_" + "9" * 40, "9" * 400, quote("r_\u0000"), "-1"):
        add(f"request id {rid[:20]}", "GET", f"/api/requests/{rid}")
    add("session 301 chars items", "GET", f"/api/sessions/{'s' * 301}/items")
    add("itemTypes 5,000 chars", "GET", f"/api/sessions/{mailbox}/items?itemTypes=" + "x," * 2_500)
    add("filingSessionId 1,000 chars", "GET", f"{sessions}?filingSessionId=" + "f" * 1_000)
    add("unicode session id", "GET", f"/api/sessions/{quote('ménage-à-trois-🙂')}/items")
    return cases


def run_fuzz(port: int, cases: list[Case], figures: Figures, *, timeout: float = 20.0) -> list[Answer | None]:
    """Send every case once; count answers by status into ``figures.fuzz_by_status``
    and list each 5xx, non-JSON or unanswered one in ``figures.fuzz_problems``. Returns
    the answers in order (None for no answer)."""
    by_status: Counter = Counter(figures.fuzz_by_status)
    answers: list[Answer | None] = []
    for case in cases:
        try:
            answer = call(port, case.method, case.path, case.body, case.headers, timeout=timeout)
        except OSError as exc:
            by_status["no answer"] += 1
            figures.fuzz_problems.append(f"no answer ({type(exc).__name__}: {exc}) <- {case.describe()}")
            answers.append(None)
            continue
        answers.append(answer)
        by_status[answer.status] += 1
        if answer.status >= 500 or not answer.is_json:
            snippet = answer.body[:160].decode("utf-8", "replace").replace("\n", " ")
            figures.fuzz_problems.append(
                f"{answer.status} {answer.content_type.split(';')[0] or 'no content type'} {snippet!r} <- {case.describe()}"
            )
    figures.fuzz_requests += len(cases)
    figures.fuzz_by_status = dict(by_status)
    return answers


_CHAINED = ("The above exception", "During handling of the above exception")


def error_lines(log: str) -> list[str]:
    """The ERROR lines of a server log (``ERROR <logger>: ...`` and uvicorn's ``ERROR:``),
    each with the last line of the traceback that follows it, if any, counted when
    repeated: ``["ERROR django.request: Internal Server Error: /api/x | DataError: ... (x2)"]``."""
    lines = log.splitlines()
    found: Counter = Counter()
    order: list[str] = []
    for i, line in enumerate(lines):
        if not line.startswith("ERROR"):
            continue
        text = line.strip()[:200]
        if i + 1 < len(lines) and lines[i + 1].startswith("Traceback"):
            last, j = None, i + 1
            while j < len(lines):  # through chained tracebacks: the last exception is what escaped
                here = lines[j]
                if here.startswith(("Traceback", " ", "\t")) or not here.strip() or here.startswith(_CHAINED):
                    j += 1
                    continue
                last = here.strip()
                following = lines[j + 1 : j + 3]
                if len(following) == 2 and not following[0].strip() and following[1].startswith(_CHAINED):
                    j += 1
                    continue
                break
            if last:
                text += " | " + last[:200]
        if text not in found:
            order.append(text)
        found[text] += 1
    return [t + (f" (x{found[t]})" if found[t] > 1 else "") for t in order]
