"""Agent seats on a real django-q2 cluster (spec "Waking agent seats"): a post over HTTP wakes
two agent seats whose tool posts land in the transcript, and killing the cluster hard
mid-delivery and starting it again neither loses a wake nor runs one twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import REPO, Server, session_requests, transcript, wait_for

pytestmark = pytest.mark.e2e

STANDUP = "eng.standup"
STANDING_ORDER = '/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}'


def worker(description: str, body: str, model: str = "embedded/echo") -> str:
    return f"---\ndescription: {description}\nmodel: {model}\ntools: [post-to-mailbox]\n---\n\n{body}\n"


def tree(root: Path, body: str, model: str = "embedded/echo") -> Path:
    return write_tree(
        root,
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md(
                "Where the engineering team posts daily status.", members=("eng.alpha", "eng.beta")
            ),
            "teams/eng/workers/alpha/WORKER.md": worker("Alpha.", body, model),
            "teams/eng/workers/beta/WORKER.md": worker("Beta.", body, model),
        },
    )


def turns(server: Server, seat: str) -> list[dict]:
    return session_requests(server, f"eng.standup:{seat}", "onMailboxPost")


def post(server: Server, body: str) -> dict:
    answer = server.call("POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": body}})
    assert answer.status == 202 and answer.body["status"] == "completed", answer.body
    return answer.body["output"]


class Cluster:
    """``manage.py qcluster`` in its own process group, with the web server's env."""

    def __init__(self, env: dict, log: Path):
        self.env = env
        self.log = log
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(REPO / "manage.py"), "qcluster"],
            cwd=REPO,
            env=self.env,
            stdout=self.log.open("a"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def crash(self) -> None:
        """Kill every process of the cluster at once, as a machine losing power would."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM the main process only (a group signal can deadlock it) and wait; kill it if it hangs."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def test_a_post_over_http_wakes_two_seats_and_their_posts_land(start_server, tmp_path):
    root = tree(tmp_path / "tree", f"Answer in the mailbox.\n{STANDING_ORDER}")
    server = start_server(root)  # serve: web server and task cluster together
    line = post(server, "shipped the reader")
    lines = wait_for(
        lambda: ls if len(ls := transcript(server, STANDUP)) >= 3 else None,
        timeout=30,
        what="both seats' tool posts",
        log=server.log,
    )
    assert lines[0]["id"] == line["id"]
    answers = {ln["author"]: ln for ln in lines[1:]}
    assert set(answers) == {"eng.alpha", "eng.beta"}
    for seat, answer in answers.items():
        assert answer["seatAuthored"] is True and answer["authorVerified"] is False
        assert answer["body"] == f"{seat} heard: workforce in eng.standup: shipped the reader"
    time.sleep(1)
    assert len(transcript(server, STANDUP)) == 3  # the seats' lines woke nobody
    for seat in ("eng.alpha", "eng.beta"):
        [turn] = turns(server, seat)
        assert turn["status"] == "completed" and turn["output"]["toolCalls"] == ["post-to-mailbox"]


def test_killing_the_cluster_mid_delivery_loses_no_wake_and_runs_none_twice(start_server, tmp_path):
    # embedded/scripted: these seats follow the posts' /tool lines, on purpose.
    root = tree(tmp_path / "tree", "Do what the post says.", "embedded/scripted")
    env = {
        "WORKFORCE_Q_WORKERS": "2",
        "WORKFORCE_Q_TIMEOUT": "6",
        "WORKFORCE_Q_RETRY": "10",
        "WORKFORCE_TURN_TIMEOUT": "5",
        "WORKFORCE_SWEEP_SECONDS": "1",
    }
    server = start_server(root, "--no-cluster", env=env)
    cluster = Cluster(server.env, tmp_path / "cluster.log")
    cluster.start()
    try:
        # Each model call of this turn waits 1.5 s: the tool post lands after the first,
        # and the turn is still running (its second call) when the cluster dies.
        post(server, 'first\n/sleep 1500\n/tool post-to-mailbox {"mailbox": "eng.standup", "body": "ack first"}')
        wait_for(
            lambda: sum(ln["body"] == "ack first" for ln in transcript(server, STANDUP)) == 2,
            timeout=30,
            what="both seats' first tool posts",
            log=cluster.log,
        )
        cluster.crash()
        assert all(t["status"] == "running" for s in ("eng.alpha", "eng.beta") for t in turns(server, s))

        # A post while no cluster runs: its deliveries wait for the next one.
        post(server, 'second\n/tool post-to-mailbox {"mailbox": "eng.standup", "body": "ack second"}')
        time.sleep(1)
        assert sum(ln["body"] == "ack second" for ln in transcript(server, STANDUP)) == 0

        cluster.start()

        def settled():
            per_seat = {s: turns(server, s) for s in ("eng.alpha", "eng.beta")}
            done = all(sum(t["status"] == "completed" for t in ts) == 2 for ts in per_seat.values())
            return per_seat if done else None

        per_seat = wait_for(settled, timeout=60, what="every delivery to finish after the restart", log=cluster.log)
        time.sleep(2)  # anything that would run twice has had time to
        bodies = [ln["body"] for ln in transcript(server, STANDUP)]
        assert sorted(b for b in bodies if b.startswith("ack")) == ["ack first"] * 2 + ["ack second"] * 2
        assert len(bodies) == 6
        for seat, seat_turns in per_seat.items():
            seat_turns = turns(server, seat)
            statuses = [t["status"] for t in seat_turns]
            # the turn the crash interrupted is aborted; each post has exactly one completed turn
            assert statuses.count("completed") == 2, statuses
            assert statuses.count("aborted") == 1 and statuses.count("running") == 0, statuses
        failed = [r for r in server.call("GET", "/api/sessions/eng.standup/requests").body["requests"] if r["status"] == "failed"]
        assert failed == []
    finally:
        cluster.stop()
