"""Agent mail on a real ``serve`` with its django-q2 cluster (spec "How mail becomes
work", "Loop guard"): a person mails agent A over HTTP, A mails B, B replies, and A is
woken by the reply; two agents that reply to each other stop at the loop guard. The
vaults are real git repositories the git command line reads."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import write_tree
from tests.e2e.conftest import Server, session_requests, wait_for

pytestmark = pytest.mark.e2e

REPLY = '/tool mail_reply {"thread": "{mailbox}", "body": "{heard}"}'


def worker(description: str, *, send: str | None = None, body: str = "Read your mail.") -> str:
    # embedded/scripted: the agents follow the /tool lines of the mail they get, on purpose.
    lines = ["---", f"description: {description}", "model: embedded/scripted"]
    if send:
        lines += ["capabilities:", f"  mail.send: {send}"]
    lines += ["run:", "  triggers: [mail]", "---", "", body, ""]
    return "\n".join(lines)


def threads(server: Server, to: str | None = None) -> dict[str, dict]:
    answer = server.call("GET", "/api/mail?limit=1000" + (f"&to={to}" if to else ""))
    assert answer.status == 200, answer.body
    return {t["thread"]: t for t in answer.body["threads"]}


def mail_runs(server: Server, slug: str) -> list[dict]:
    return session_requests(server, f"mail:{slug}", "onMail")


def send(server: Server, to: str, body: str, subject: str) -> dict:
    answer = server.call("POST", "/api/mail", {"userId": "ann@example.org", "to": to, "subject": subject, "body": body})
    assert answer.status == 201, answer.body
    return answer.body


def git_log(server: Server, slug: str) -> list[str]:
    repo = Path(server.env["WORKFORCE_VAR_DIR"]) / "vaults" / "default" / f"{slug}.git"
    out = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def test_a_person_mails_a_who_mails_b_whose_reply_wakes_a(tmp_path, start_server):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/workers/alpha/WORKER.md": worker("Hands work to beta.", send="[eng.beta]"),
            "teams/eng/workers/beta/WORKER.md": worker("Answers every mail.", body=f"Answer.\n{REPLY}"),
        },
    )
    server = start_server(root)
    sent = send(
        server, "eng.alpha", '/tool mail_send {"to": "eng.beta", "subject": "Build", "body": "How is the build?"}', "Ask beta"
    )
    assert sent["thread"] == "eng.alpha:1" and sent["labels"] == ["mail:new"]

    woken = wait_for(
        lambda: [
            r
            for r in mail_runs(server, "eng.alpha")
            if r["status"] == "completed" and r.get("output", {}).get("thread") == "eng.alpha:2"
        ],
        timeout=90,
        what="eng.alpha woken by eng.beta's reply",
        log=server.log,
    )
    assert woken
    found = threads(server)
    assert found["eng.beta:1"]["from"] == "agent:eng.alpha" and found["eng.beta:1"]["state"] == "replied"
    reply = found["eng.alpha:2"]
    assert (reply["from"], reply["hops"], reply["inReplyTo"], reply["subject"]) == (
        "agent:eng.beta",
        1,
        "eng.beta:1",
        "Re: Build",
    )
    assert reply["state"] == "working"  # alpha opened it (and did not answer: it has no standing order)
    [first, second] = mail_runs(server, "eng.alpha")
    assert (first["output"]["thread"], first["output"]["runKind"]) == ("eng.alpha:1", "mail")
    assert first["output"]["toolCalls"] == ["mail_send"]
    ledger = server.call("GET", "/api/mail/eng.beta:1/ledger").body["entries"]
    assert [(e["event"], e["principal"]) for e in ledger] == [
        ("mail.sent", "agent:eng.alpha"),
        ("mail.replied", "agent:eng.beta"),
    ]
    detail = server.call("GET", "/api/mail/eng.alpha:2").body
    assert detail["messages"][0]["body"].startswith("eng.beta heard: agent:eng.alpha in eng.beta:1: Build")
    assert git_log(server, "eng.beta") == [
        "mail: label #1 mail:replied",
        "mail: comment on #1",
        "mail: label #1 mail:working",
        "mail: open an issue: Build",
    ]


def test_two_agents_replying_to_each_other_stop_at_the_guard(tmp_path, start_server):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/workers/alpha/WORKER.md": worker("Replies to all.", send='["*"]', body=f"Answer.\n{REPLY}"),
            "teams/eng/workers/beta/WORKER.md": worker("Replies to all.", send='["*"]', body=f"Answer.\n{REPLY}"),
        },
    )
    server = start_server(root)
    send(server, "eng.alpha", '/tool mail_send {"to": "eng.beta", "subject": "Ping", "body": "ping"}', "Start")
    guarded = wait_for(lambda: threads(server).get("eng.beta:3"), timeout=120, what="the hops-4 notification", log=server.log)
    assert (guarded["hops"], guarded["labels"], guarded["state"]) == (4, [], "delivered")
    ledger = server.call("GET", "/api/mail/eng.beta:3/ledger").body["entries"]
    assert [e["event"] for e in ledger] == ["mail.sent", "mail.loop_guard"]

    def settled():
        runs = mail_runs(server, "eng.alpha") + mail_runs(server, "eng.beta")
        return len(runs) == 5 and all(r["status"] == "completed" for r in runs)

    wait_for(settled, timeout=60, what="five finished mail runs", log=server.log)
    time.sleep(3)  # nothing more comes: the loop stopped
    assert sorted(threads(server)) == ["eng.alpha:1", "eng.alpha:2", "eng.alpha:3", "eng.beta:1", "eng.beta:2", "eng.beta:3"]
    assert len(mail_runs(server, "eng.alpha")) == 3 and len(mail_runs(server, "eng.beta")) == 2
