"""A model server as unkind as a real one under load, on a real ``serve`` and its task
cluster (issue 24, "Models" item 1 and "Done means"): the fake OpenAI-compatible server
(``tests.fake_model_server``) answers 429 with ``Retry-After`` to one call in three and
Ollama's 503 to one in ten. 50 mails and 50 mailbox posts: every mail ends
``mail:replied``, every post gets exactly one answer line, nothing is stuck (no mail left
``mail:working``, no run left active), and the failures are listed: ``runs?status=failed``
names each run that still failed, with the model's error, and each one's work is back where
the next run found it (its mail run again and replied, its post answered by its one line).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, transcript, wait_for
from tests.fake_model_server import Failure, FakeModelServer, chat_completion, last_user_text, tool_call

pytestmark = pytest.mark.e2e

SEATS = [f"eng.w{n}" for n in range(5)]
MAILS = 50
POSTS = 50
PERSON = "ann@example.org"


def worker_md(seat: str) -> str:
    return "\n".join(
        [
            "---",
            f"description: Worker {seat} answers its mail and its desk.",
            "model: openai/busy",
            "run:",
            "  triggers: [mail]",
            "---",
            "",
            "Answer what you are asked.",
            "",
        ]
    )


def tree(root) -> object:
    files = {}
    for seat in SEATS:
        name = seat.split(".")[1]
        files[f"teams/eng/workers/{name}/WORKER.md"] = worker_md(seat)
        # A routed desk of one: the seat's reply is the post's one answer line.
        files[f"teams/eng/mailboxes/desk{name}/MAILBOX.md"] = mailbox_md(
            f"The desk of {seat}.", members=(seat,), body="Ask.", routing=f"\n  fallback: {seat}"
        )
    return write_tree(root, files)


class BusyModel(FakeModelServer):
    """A mail run's first call replies on the mail (``mail_reply``), then says it is done;
    any other turn answers ``answer: <turn text>``. Failures come first (the server's
    schedule)."""

    def __init__(self, failures):
        super().__init__(failures=failures)
        self._ids = iter(range(1, 1_000_000))
        self._lock = threading.Lock()

    def reply(self, request):
        body = request["body"]
        model = body.get("model", "")
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        last = (body.get("messages") or [{}])[-1]
        if "mail_reply" in tools:
            if last.get("role") == "tool":
                return 200, chat_completion("replied", model=model)
            with self._lock:
                call_id = f"call_{next(self._ids)}"
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [tool_call("mail_reply", {"body": "on it"}, id=call_id)],
            }
            return 200, chat_completion(message, model=model, finish_reason="tool_calls")
        return 200, chat_completion(f"answer: {last_user_text(body)}", model=model)


def failed_runs(server: Server, session_id: str) -> list[dict]:
    answer = server.call("GET", f"/api/sessions/{session_id}/runs?status=failed&limit=1000")
    assert answer.status == 200, answer.body
    return answer.body["runs"]


def active_runs(server: Server, session_id: str) -> list[dict]:
    answer = server.call("GET", f"/api/sessions/{session_id}/runs?status=active&limit=1000")
    assert answer.status == 200, answer.body
    return answer.body["runs"]


def threads(server: Server) -> dict[str, dict]:
    answer = server.call("GET", "/api/mail?limit=1000")
    assert answer.status == 200, answer.body
    return {t["thread"]: t for t in answer.body["threads"]}


def test_fifty_mails_and_fifty_posts_against_a_model_that_rate_limits_and_is_busy(start_server, tmp_path):
    failures = [Failure(429, every=3, retry_after=1), Failure(503, every=10)]
    with BusyModel(failures) as model:
        server = start_server(
            tree(tmp_path / "tree"),
            env={
                "OPENAI_BASE_URL": model.base_url,
                "OPENAI_API_KEY": "test",
                "WORKFORCE_Q_WORKERS": "4",
                "WORKFORCE_MODEL_TIMEOUT": "10",
                "WORKFORCE_TURN_TIMEOUT": "30",
                "WORKFORCE_SWEEP_SECONDS": "2",
            },
        )
        started = time.monotonic()

        def mail(n: int) -> str:
            seat = SEATS[n % len(SEATS)]
            answer = server.call(
                "POST", "/api/mail", {"userId": PERSON, "to": seat, "subject": f"Job {n}", "body": f"Please do job {n}."}
            )
            assert answer.status == 201, answer.body
            return answer.body["thread"]

        def post(n: int) -> tuple[str, str]:
            desk = f"eng.desk{SEATS[n % len(SEATS)].split('.')[1]}"
            body = f"question {n}"
            answer = server.call("POST", f"/api/flows/mailbox/{desk}/actions/post", {"userId": PERSON, "input": {"body": body}})
            assert answer.status == 202, answer.body
            return desk, body

        with ThreadPoolExecutor(max_workers=8) as pool:
            sent = list(pool.map(mail, range(MAILS)))
            posted = list(pool.map(post, range(POSTS)))
        assert len(set(sent)) == MAILS

        missing_mails: dict[str, str] = {}
        missing_posts: dict[str, int] = {}

        def settled():
            found = threads(server)
            missing_mails.clear()
            missing_mails.update({t: found[t]["state"] for t in sent if found[t]["state"] != "replied"})
            missing_posts.clear()
            for desk in {d for d, _ in posted}:
                seat_lines = [ln for ln in transcript(server, desk) if ln.get("seatAuthored")]
                unanswered = sum(1 for d, _ in posted if d == desk) - len(seat_lines)
                if unanswered > 0:
                    missing_posts[desk] = unanswered
            return None if missing_mails or missing_posts else found

        try:
            found = wait_for(settled, timeout=150, what="every mail replied and every post answered")
        except AssertionError as timed_out:
            failed = {s: failed_runs(server, s) for s in [f"mail:{x}" for x in SEATS] + [f"eng.desk{x[4:]}" for x in SEATS]}
            raise AssertionError(
                f"{timed_out}; mails not replied: {missing_mails}; posts unanswered: {missing_posts}; failed runs: {failed}"
            ) from None
        elapsed = time.monotonic() - started

        # Every mail ended mail:replied, once: one reply under the mail, nothing left working.
        assert all(found[t]["state"] == "replied" and found[t]["labels"] == ["mail:replied"] for t in sent)
        assert not [t for t in found.values() if t["state"] == "working"]
        for thread_id in sent:
            detail = server.call("GET", f"/api/mail/{thread_id}")
            assert detail.status == 200
            authors = [m["from"] for m in detail.body["messages"]]
            assert authors == [f"human:{PERSON}", f"agent:{thread_id.split(':')[0]}"], (thread_id, authors)

        # Every post answered exactly once: one seat line per post, naming it.
        for desk in {d for d, _ in posted}:
            lines = transcript(server, desk)
            asked = [ln["body"] for ln in lines if not ln.get("seatAuthored")]
            answers = [ln["body"] for ln in lines if ln.get("seatAuthored")]
            assert sorted(asked) == sorted(b for d, b in posted if d == desk)
            assert len(answers) == len(asked), (desk, answers)
            for question in asked:
                assert sum(1 for a in answers if a.endswith(f": {question}")) == 1, (desk, question, answers)

        # Nothing stuck: no run active anywhere, in a desk or a mail session.
        sessions = [f"eng.desk{s.split('.')[1]}" for s in SEATS] + [f"mail:{s}" for s in SEATS]
        wait_for(
            lambda: not any(active_runs(server, s) for s in sessions[: len(SEATS)]),
            timeout=20,
            what="no active run left",
            log=server.log,
        )
        for slug in SEATS:
            mail_requests = server.call("GET", f"/api/sessions/mail:{slug}/requests").body["requests"]
            assert not [r for r in mail_requests if r["status"] in ("pending", "running")]

        # The failures are listed, each with the model's error, and each one's work was
        # found again: a failed mail run's mail went back to mail:new (ledgered run.failed)
        # and the next run replied on it; a failed turn's post still got its one line.
        listed = {s: failed_runs(server, s) for s in sessions}
        for session_id, runs in listed.items():
            for run in runs:
                assert run["status"] == "failed" and run["error"]["reason"] and run["finishedAt"], run
                if run["error"]["reason"] == "model-error":
                    assert "busy" in run["error"]["message"], run  # names the model and what the server said
                if session_id.startswith("mail:"):
                    thread_id = run["workingOn"]["thread"]
                    assert found[thread_id]["state"] == "replied", run
                    ledger = server.call("GET", f"/api/mail/{thread_id}/ledger").body["entries"]
                    assert [e for e in ledger if e["event"] == "run.failed" and e["data"]["retried"]], (run, ledger)
                else:
                    lines = transcript(server, session_id)
                    [question] = [ln["body"] for ln in lines if ln["id"] == run["workingOn"]["postId"]]
                    assert sum(1 for ln in lines if ln.get("seatAuthored") and ln["body"].endswith(f": {question}")) == 1
        # The model really was unkind: about one call in three refused with 429, one in ten 503.
        outcomes = [r["outcome"] for r in model.requests]
        assert outcomes.count(429) >= len(outcomes) // 3 - 1 and outcomes.count(503) >= 1
        # With retries honouring Retry-After within each turn's budget, few runs fail at all.
        assert sum(len(runs) for runs in listed.values()) <= 5, listed
        assert elapsed < 150
