"""A coordinator on a real django-q2 cluster, over HTTP: three
delegates under ``everyone`` with ``rounds: 1``; every answer lands once; a delegate that
doesn't answer in time doesn't hold the round, which closes at a short deadline (a
django-q2 schedule, run by the cluster's scheduler); its late answer lands once and goes
no further, and its round-1 delivery waits for that late turn to end (one turn of a
delegate at a time in its session); the post costs at most delegates × (rounds + 1)
delegate turns.

Two delegates run on ``embedded/echo``. The third, ``support.general``, runs on
``openai/slow`` against a fake OpenAI-compatible server in this test process that holds
its answer to the person's post until the test releases it (after round 0 closed), and
answers anything else at once.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import Server, session_items, session_requests, wait_for
from tests.fakes import FakeOpenAIServer, chat_completion

pytestmark = pytest.mark.e2e

USER = "u_42"
HELP = "support.help"
CONVERSATION = f"{HELP}:{USER}"
DELEGATES = ("support.devices", "support.accounts", "support.general")
# Long enough for the two quick delegates to answer first on a loaded machine: rounds now
# close within about a second of their deadline (the round timer), not 30 s after it.
DEADLINE_MS = 10000


class SlowModel(FakeOpenAIServer):
    """A chat-completions endpoint whose answer to a person's post (a turn starting
    ``u_42, through``) waits for ``release``; every other turn is answered at once."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()
        self.turns: list[str] = []

    def reply(self, request: dict) -> tuple[int, dict]:
        body = request["body"]
        turn = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        self.turns.append(turn)
        if turn.startswith(f"{USER}, through "):
            self.release.wait(timeout=120)
        return 200, chat_completion(
            f"general (slow) answered: {turn}",
            model=body["model"],
            id=f"chatcmpl-{len(self.turns)}",
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        )

    def close(self) -> None:
        self.release.set()
        super().close()


def worker(description: str, model: str) -> str:
    return f"---\ndescription: {description}\nmodel: {model}\n---\n\nAnswer the question.\n"


def tree(root: Path) -> Path:
    return write_tree(
        root,
        {
            "teams/support/workers/help/WORKER.md": (
                "---\ndescription: Ask the support team anything.\nflow: coordinator\nmodel: embedded/echo\n"
                f"delegates: [{', '.join(DELEGATES)}]\nrouting: everyone\nrounds: 1\n---\n\nYou are the support desk.\n"
            ),
            "teams/support/workers/devices/WORKER.md": worker("Phones and laptops.", "embedded/echo"),
            "teams/support/workers/accounts/WORKER.md": worker("Sign-in and billing.", "embedded/echo"),
            "teams/support/workers/general/WORKER.md": worker("Anything else.", "openai/slow"),
        },
    )


def records(server: Server) -> list[dict]:
    return [i["data"] for i in session_items(server, CONVERSATION, USER) if i["component"] == "coordinator-route"]


def answers(server: Server) -> list[dict]:
    return [
        i["data"]
        for i in session_items(server, CONVERSATION, USER)
        if i["type"] == "message" and i["data"]["role"] == "assistant"
    ]


def test_everyone_with_one_round_over_http_on_a_real_cluster(start_server, tmp_path):
    with SlowModel() as slow:
        env = {
            "OPENAI_BASE_URL": slow.base_url,
            "OPENAI_API_KEY": "sk-test",
            "WORKFORCE_COORDINATOR_ROUND_DEADLINE_MS": str(DEADLINE_MS),
            "WORKFORCE_Q_WORKERS": "4",
            "WORKFORCE_MODEL_TIMEOUT": "100",
            "WORKFORCE_TURN_TIMEOUT": "110",
            "WORKFORCE_Q_TIMEOUT": "120",
            "WORKFORCE_Q_RETRY": "150",
        }
        server = start_server(tree(tmp_path / "tree"), env=env)
        opened = server.call("POST", f"/api/workers/{HELP}/sessions", {"userId": USER})
        assert opened.status == 201 and opened.body["sessionId"] == CONVERSATION, opened.body

        posted_at = time.monotonic()
        answer = server.call(
            "POST",
            f"/api/flows/coordinator/{CONVERSATION}/actions/run",
            {"userId": USER, "input": {"message": "Is the office open on Friday?"}},
        )
        assert answer.status == 202 and answer.body["status"] == "completed", answer.body
        post_id = answer.body["requestId"]
        assert answer.body["output"]["route"] == {
            "postId": post_id,
            "round": 0,
            "policy": "everyone",
            "by": "everyone",
            "delegates": [{"worker": w, "outcome": "delivered"} for w in DELEGATES],
        }

        # Devices and accounts answer at once; general's model holds its answer.
        wait_for(
            lambda: {a["agentName"] for a in answers(server)} >= {"support.devices", "support.accounts"},
            timeout=30,
            what="the two quick answers",
            log=server.log,
        )

        # Round 0 closes at its deadline (the cluster's scheduler runs the check), and
        # round 1 goes out without general's answer.
        second = wait_for(
            lambda: next((r for r in records(server) if r["round"] == 1), None),
            timeout=75,
            what="round 1 (round 0 closed at its deadline)",
            log=server.log,
        )
        closed_after = time.monotonic() - posted_at
        assert closed_after >= DEADLINE_MS / 1000
        assert second == {
            "postId": post_id,
            "round": 1,
            "policy": "everyone",
            "by": "everyone",
            "delegates": [{"worker": w, "outcome": "delivered"} for w in DELEGATES],
        }
        closes = session_requests(server, CONVERSATION, "closeRound", USER)
        assert len(closes) == 1 and closes[0]["status"] == "completed" and len(closes[0]["output"]["closed"]) == 1

        def round_one_answers(count: int):
            found = [a for a in answers(server) if a.get("round") == 1]
            return found if len(found) >= count else None

        wait_for(lambda: round_one_answers(2), timeout=30, what="round 1's two quick answers", log=server.log)
        time.sleep(2)
        # General is still on the person's post: its round-1 delivery waits for that turn
        # to end (one turn of a delegate at a time in its session for a conversation).
        assert {a["agentName"] for a in round_one_answers(2)} == {"support.devices", "support.accounts"}
        general = f"{CONVERSATION}:support.general"
        assert [t["status"] for t in session_requests(server, general, "onDelegatedPost", USER)] == ["running"]

        # General's round-0 answer comes late: it lands once and goes no further; then its
        # round-1 turn runs.
        slow.release.set()
        round_one = wait_for(lambda: round_one_answers(3), timeout=30, what="round 1's three answers", log=server.log)
        general_turns = sorted(session_requests(server, general, "onDelegatedPost", USER), key=lambda t: t["createdAt"])
        assert [t["status"] for t in general_turns] == ["completed", "completed"]
        assert datetime.fromisoformat(general_turns[1]["createdAt"]) >= datetime.fromisoformat(general_turns[0]["finishedAt"])
        by_worker = {a["agentName"]: a["text"] for a in round_one}
        # Each got the other delegates' answers from round 0 in one delivery: general both.
        assert "support.accounts, through support.help: " in by_worker["support.devices"]
        assert "support.devices, through support.help: " in by_worker["support.accounts"]
        # The two round-0 answers are passed on in the order they landed, which the race
        # between devices and accounts decides.
        assert any(
            by_worker["support.general"].startswith(f"general (slow) answered: {first} and {second}, through support.help: ")
            for first, second in (("support.devices", "support.accounts"), ("support.accounts", "support.devices"))
        ), by_worker["support.general"]

        wait_for(lambda: len(answers(server)) == 6, timeout=30, what="general's late answer", log=server.log)
        time.sleep(3)  # anything that would go further, or land twice, has had time to
        landed = answers(server)
        assert len(landed) == 6
        assert sorted((a["agentName"], a["round"]) for a in landed) == sorted((w, r) for w in DELEGATES for r in (0, 1))
        assert len({a["text"] for a in landed}) == 6
        assert len(records(server)) == 2  # the late answer routed nothing

        # Cost: at most delegates x (rounds + 1) = 6 delegate turns, each run once.
        turns = {w: session_requests(server, f"{CONVERSATION}:{w}", "onDelegatedPost", USER) for w in DELEGATES}
        assert sum(len(t) for t in turns.values()) == 6 <= len(DELEGATES) * (1 + 1)
        assert all(r["status"] == "completed" for t in turns.values() for r in t)
        assert sum(1 for t in slow.turns if t.startswith(f"{USER}, through ")) == 1
        reports = session_requests(server, CONVERSATION, "onDelegateReport", USER)
        assert len(reports) == 6 and all(r["output"]["claimed"] for r in reports)
        print(f"round 0 closed {closed_after:.1f}s after the post (deadline {DEADLINE_MS} ms)")
