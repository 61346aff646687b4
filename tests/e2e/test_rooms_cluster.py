"""A project's room on the real ``serve`` and a real django-q2 cluster (spec "A room per
project"): two members in one room, each post woken once per seat, the answers read by
both members; and a cluster killed mid-fan-out and started again, with no wake lost and
none run twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import Server, session_requests, wait_for
from tests.e2e.test_seats_cluster import Cluster
from workforce.framing import quoted  # the body as a seat heard it: quoted when it has several lines

pytestmark = pytest.mark.e2e

ALICE, BOB = "u_alice", "u_bob"
SEATS = ("eng.alpha", "eng.beta")


def tree(root: Path) -> Path:
    worker = "---\ndescription: {d}\nmodel: embedded/scripted\n---\n\nAnswer in the room.\n"
    return write_tree(
        root,
        {
            "org/resources/projects.yaml": "talk:\n  seats: [eng.alpha, eng.beta]\n  charter: Plan the work, and say what is blocked.\n",
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=SEATS),
            "teams/eng/workers/alpha/WORKER.md": worker.format(d="Alpha."),
            "teams/eng/workers/beta/WORKER.md": worker.format(d="Beta."),
        },
    )


def act(server: Server, session_id: str, action: str, input: dict, user_id: str) -> dict:
    answer = server.call("POST", f"/api/flows/mailbox/{session_id}/actions/{action}", {"userId": user_id, "input": input})
    assert answer.status == 202 and answer.body["status"] == "completed", answer.body
    return answer.body["output"]


def room(server: Server) -> tuple[str, str]:
    """A project Alice creates with Bob as a member; Bob joins. Returns both talk sessions."""
    created = server.call("POST", "/api/projects", {"userId": ALICE, "title": "Launch", "id": "launch", "members": [BOB]})
    assert created.status == 201, created.body
    joined = act(server, "talk-bob", "join", {"projectId": "launch"}, BOB)
    assert joined["listed"] is True and joined["seats"] == list(SEATS)
    return created.body["talkSessionId"], "talk-bob"


def answers_by_post(lines: list[dict]) -> dict[str, list[dict]]:
    posts = [ln for ln in lines if not ln.get("seatAuthored")]
    return {
        p["id"]: [
            ln for ln in lines if ln.get("seatAuthored") and ln["userId"] == p["userId"] and quoted(p["body"]) in ln["body"]
        ]
        for p in posts
    }


def turns(server: Server, talk: str, seat: str, user_id: str) -> list[dict]:
    """The seat's turns in its conversation for one member (that member's to read)."""
    return session_requests(server, f"{talk}:{seat}", "onMailboxPost", user_id=user_id)


def test_two_members_in_one_room_each_post_woken_once_per_seat_answers_read_by_both(start_server, tmp_path):
    server = start_server(tree(tmp_path / "tree"))
    alice, bob = room(server)
    act(server, alice, "post", {"body": "what is blocked?"}, ALICE)
    act(server, bob, "post", {"body": "the reader ships friday"}, BOB)

    def all_answered():
        lines = act(server, alice, "read", {}, ALICE)["lines"]
        return lines if sum(1 for ln in lines if ln.get("seatAuthored")) >= 4 else None

    lines = wait_for(all_answered, timeout=40, what="both seats' answers to both posts", log=server.log)
    time.sleep(1)  # the answers wake nobody: nothing more lands
    page = act(server, bob, "read", {}, BOB)
    assert page["lines"] == act(server, alice, "read", {}, ALICE)["lines"] == lines
    assert [ln["seq"] for ln in lines] == list(range(1, 7))
    for post_id, found in answers_by_post(lines).items():
        assert sorted(a["author"] for a in found) == sorted(SEATS), post_id
    assert {(ln["author"], ln["userId"]) for ln in lines if ln.get("seatAuthored")} == {
        (seat, user) for seat in SEATS for user in (ALICE, BOB)
    }
    for talk, user in ((alice, ALICE), (bob, BOB)):
        for seat in SEATS:
            assert [t["status"] for t in turns(server, talk, seat, user)] == ["completed"]
    # Rooms and talk sessions are never inventory rows.
    assert [m["id"] for m in server.call("GET", "/api/mailboxes").body["mailboxes"]] == ["eng.standup"]


def test_a_cluster_killed_mid_fan_out_loses_no_wake_and_runs_none_twice(start_server, tmp_path):
    env = {
        "WORKFORCE_Q_WORKERS": "2",
        "WORKFORCE_Q_TIMEOUT": "6",
        "WORKFORCE_Q_RETRY": "10",
        "WORKFORCE_TURN_TIMEOUT": "5",
        "WORKFORCE_SWEEP_SECONDS": "1",
    }
    server = start_server(tree(tmp_path / "tree"), "--no-cluster", env=env)
    alice, bob = room(server)
    cluster = Cluster(server.env, tmp_path / "cluster.log")
    cluster.start()
    try:
        # Each seat's model call on this post waits 3 s: the cluster dies while both turns run.
        act(server, alice, "post", {"body": "first\n/sleep 3000"}, ALICE)
        wait_for(
            lambda: all(any(t["status"] == "running" for t in turns(server, alice, s, ALICE)) for s in SEATS),
            timeout=30,
            what="both seats' turns on the first post to be running",
            log=cluster.log,
        )
        cluster.crash()
        # A post while no cluster runs: its deliveries wait, recorded, for the next one.
        act(server, bob, "post", {"body": "second"}, BOB)
        time.sleep(1)
        assert not any(ln.get("seatAuthored") for ln in act(server, bob, "read", {}, BOB)["lines"])

        cluster.start()

        def settled():
            lines = act(server, alice, "read", {}, ALICE)["lines"]
            return lines if sum(1 for ln in lines if ln.get("seatAuthored")) >= 4 else None

        lines = wait_for(settled, timeout=60, what="every wake to answer after the restart", log=cluster.log)
        time.sleep(3)  # anything that would run twice has had time to
        lines = act(server, bob, "read", {}, BOB)["lines"]
        assert len(lines) == 6, lines
        for post_id, found in answers_by_post(lines).items():
            assert sorted(a["author"] for a in found) == sorted(SEATS), post_id
        for seat in SEATS:
            first = [t["status"] for t in turns(server, alice, seat, ALICE)]
            assert first.count("completed") == 1 and first.count("aborted") == 1 and "running" not in first, first
            assert [t["status"] for t in turns(server, bob, seat, BOB)] == ["completed"]
        for talk, user in ((alice, ALICE), (bob, BOB)):
            failed = [r for r in session_requests(server, talk, user_id=user) if r["status"] == "failed"]
            assert failed == [], failed
    finally:
        cluster.stop()
