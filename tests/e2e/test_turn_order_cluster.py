"""One turn at a time per seat per conversation, on the real server and task cluster
(spec "Waking agent seats": the second post a seat hears lands in the same
conversation, so it remembers the thread; two posts that arrive together each run
once, in no guaranteed order).

Two posts 0.3 s apart to a mailbox whose one member is a seat whose turns take 1.5 s:
the cluster has two workers, so both deliveries are picked up at once, but the seat's
second turn starts only after its first one ended, and each turn's items sit together
in its conversation: user 1, reply 1, user 2, reply 2."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import session_items, session_requests, wait_for

pytestmark = pytest.mark.e2e

CONVERSATION = "eng.standup:eng.alpha"


def test_two_posts_a_moment_apart_run_as_two_turns_one_after_the_other(start_server, tmp_path):
    root = write_tree(
        tmp_path / "tree",
        {
            "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=("eng.alpha",)),
            "teams/eng/workers/alpha/WORKER.md": "---\ndescription: Alpha.\nmodel: embedded/scripted\n---\n\nListen.\n",
        },
    )
    server = start_server(root, env={"WORKFORCE_Q_WORKERS": "2"})
    for n, pause in ((1, 0.3), (2, 0)):
        answer = server.call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_42", "input": {"body": f"post {n}\n/sleep 1500"}}
        )
        assert answer.status == 202 and answer.body["status"] == "completed", answer.body
        time.sleep(pause)

    def both_turns():
        turns = session_requests(server, CONVERSATION, "onMailboxPost")
        return turns if len(turns) == 2 and all(t["status"] == "completed" for t in turns) else None

    first, second = sorted(
        wait_for(both_turns, timeout=60, what="both turns of eng.alpha", log=server.log), key=lambda t: t["createdAt"]
    )
    assert datetime.fromisoformat(second["createdAt"]) >= datetime.fromisoformat(first["finishedAt"])  # never at once

    messages = [(i["data"]["role"], i["data"]["text"]) for i in session_items(server, CONVERSATION) if i["type"] == "message"]
    assert [role for role, _ in messages] == ["user", "assistant", "user", "assistant"]
    for (_, heard), (_, reply) in (messages[0:2], messages[2:4]):
        assert reply == f"eng.alpha heard: {heard}"  # each reply right after the post it answers
    # A body of several lines reaches the model quoted, one framed line (workforce.framing).
    assert sorted(text for role, text in messages if role == "user") == [
        'workforce in eng.standup: "post 1\\n/sleep 1500"',
        'workforce in eng.standup: "post 2\\n/sleep 1500"',
    ]
