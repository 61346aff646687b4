"""A flood in one mailbox does not starve another's post, on the real server and task
cluster with PostgreSQL (issue 22 item 4; mailboxes.fairness).

One user posts 100 posts to a four-member mailbox (400 seat turns) as fast as the API
takes them; then another user posts once to another mailbox. Before, every delivery's
task went to one first-in, first-out queue at its post, so the other post's turn started
only after every flood turn queued before it had started. Now the flood's deliveries
beyond its mailbox's bound are held as rows and released as its turns finish, so the
other post's turn starts ahead of most of the flood, and its answer lands while most of
the flood is still unfinished. The assertions are on order, not on speed."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import mailbox_md, write_tree
from tests.e2e.conftest import transcript, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

FLOOD_POSTS = 100
LISTENER = "---\ndescription: {what}.\nmodel: embedded/echo\n---\n\nListen.\n"
ANSWERER = (
    "---\ndescription: Answers questions.\nmodel: embedded/echo\ntools: [post-to-mailbox]\n---\n\n"
    'Answer.\n/tool post-to-mailbox {"mailbox": "{mailbox}", "body": "{heard}"}\n'
)


def rows(db_url: str, sql: str, params=()) -> list[tuple]:
    with psycopg.connect(db_url, autocommit=True) as conn:
        return conn.execute(sql, params).fetchall()


def deliveries_of(db_url: str, mailbox: str) -> list[tuple]:
    """``(id, status, started_at)`` of ``mailbox``'s deliveries."""
    return rows(
        db_url,
        "SELECT d.id, d.status, d.started_at FROM seats_delivery d JOIN workforce_session s ON s.id = d.mailbox_id "
        "WHERE s.session_id = %s ORDER BY d.id",
        [mailbox],
    )


def test_a_flood_in_one_mailbox_does_not_starve_another_mailboxs_post(start_server, tmp_path):
    members = ("eng.a", "eng.b", "eng.c", "eng.d")
    files = {
        "teams/eng/mailboxes/standup/MAILBOX.md": mailbox_md("Daily status.", members=members),
        "teams/eng/mailboxes/desk/MAILBOX.md": mailbox_md("Questions.", members=("eng.helper",)),
        "teams/eng/workers/helper/WORKER.md": ANSWERER,
    }
    files.update({f"teams/eng/workers/{m.split('.')[1]}/WORKER.md": LISTENER.format(what=m) for m in members})
    server = start_server(write_tree(tmp_path / "tree", files), env={"WORKFORCE_Q_WORKERS": "2"})
    db_url = server.env["DATABASE_URL"]
    for n in range(FLOOD_POSTS):
        answer = server.call(
            "POST", "/api/flows/mailbox/eng.standup/actions/post", {"userId": "u_flood", "input": {"body": f"status {n}"}}
        )
        assert answer.status == 202, answer.body
    answer = server.call(
        "POST", "/api/flows/mailbox/eng.desk/actions/post", {"userId": "u_other", "input": {"body": "my printer jams"}}
    )
    assert answer.status == 202, answer.body

    def answered():
        lines = [line for line in transcript(server, "eng.desk") if line.get("seatAuthored")]
        if not lines:
            return None
        unfinished = sum(status in ("pending", "running") for _, status, _ in deliveries_of(db_url, "eng.standup"))
        return lines, unfinished

    lines, unfinished = wait_for(answered, timeout=120, what="the desk's answer", log=server.log)
    assert lines[0]["body"].startswith("eng.helper heard: ")
    # Its answer landed before the flood drained: most of the flood was still to run.
    assert unfinished >= FLOOD_POSTS  # of 400

    flood = wait_for(
        lambda: (d := deliveries_of(db_url, "eng.standup")) and all(s == "done" for _, s, _ in d) and d,
        timeout=240,
        what="the flood's deliveries to finish",
        log=server.log,
    )
    assert len(flood) == 4 * FLOOD_POSTS  # none lost, none twice (one delivery per post and member)
    [(_, status, desk_started)] = deliveries_of(db_url, "eng.desk")
    assert status == "done"
    # Order, not speed: the desk's turn started ahead of most of the flood posted before it.
    after = sum(started > desk_started for _, _, started in flood)
    assert after >= 2 * FLOOD_POSTS, f"only {after} of {len(flood)} flood deliveries started after the desk's"
    # Each flood delivery ran once: one attempt, no sweep needed to re-enqueue a held one.
    assert rows(db_url, "SELECT COUNT(*) FROM seats_delivery WHERE attempts <> 1")[0][0] == 0
