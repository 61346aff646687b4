"""The loop guard (spec "Loop guard"): each automatic reply notification carries a hop
count; beyond 3 hops it is delivered without ``mail:new``, starts no run, and is
ledgered ``mail.loop_guard``; the agent sees it on its next run."""

from __future__ import annotations

from mail.constants import LABEL_NEW
from mail.header import read_header
from mail.models import LedgerEntry, MailRun, Thread
from mail.services import do_send_mail
from workforce.models import Request


def test_two_echo_agents_replying_to_each_other_stop_at_the_guard(agents, org, store, send):
    agents()
    # eng.alpha is asked to mail eng.beta; both reply to every mail they get.
    send("eng.alpha", '/tool mail_send {"to": "eng.beta", "subject": "Ping", "body": "ping"}')
    notes = list(Thread.objects.exclude(in_reply_to="").order_by("hops"))
    assert [(t.thread_id, t.hops, t.in_reply_to) for t in notes] == [
        ("eng.alpha:2", 1, "eng.beta:1"),
        ("eng.beta:2", 2, "eng.alpha:2"),
        ("eng.alpha:3", 3, "eng.beta:2"),
        ("eng.beta:3", 4, "eng.alpha:3"),
    ]
    last = notes[-1]
    assert last.labels == [] and last.state == "delivered"
    issue = store.get_issue("default", "eng.beta", 3)
    assert LABEL_NEW not in issue.labels and issue.labels == ()
    assert read_header(issue.body)[0].hops == 4
    assert [t.labels for t in notes[:-1]] == [["mail:replied"]] * 3
    assert not MailRun.objects.filter(thread=last).exists()  # no run
    guard = LedgerEntry.objects.get(event="mail.loop_guard")
    assert (guard.thread, guard.principal, guard.data["hops"]) == ("eng.beta:3", "office", 4)
    # Runs: alpha's (the person's mail, then hops 1 and 3), beta's (hops 0 and 2): five, and it stopped.
    assert Request.objects.filter(action="onMail").count() == 5
    assert Thread.objects.count() == 6


def test_hops_four_carries_no_mail_new_and_the_next_run_sees_it(agents, org, store, send, committed):
    agents()
    guarded = committed(
        do_send_mail, org, sender="agent:eng.beta", to="eng.reader", body="late reply", hops=4, in_reply_to="eng.beta:9"
    )
    assert guarded.labels == [] and guarded.state == "delivered"
    assert not MailRun.objects.exists()
    assert [e.event for e in LedgerEntry.objects.order_by("pk")] == ["mail.sent", "mail.loop_guard"]
    at_three = committed(do_send_mail, org, sender="agent:eng.beta", to="eng.reader", body="on time", hops=3)
    assert at_three.labels == [LABEL_NEW] and MailRun.objects.filter(thread=at_three).exists()
    # That run was shown the guarded mail; a later run is not shown it again.
    first = Request.objects.get(action="onMail")
    assert "Also in your inbox, delivered without waking you:\nagent:eng.beta in eng.reader:1: late reply" in (
        first.input and first.items.filter(type="message").first().data["text"]
    )
    guarded.refresh_from_db()
    assert guarded.seen_at is not None
    send("eng.reader", "next")
    latest = Request.objects.filter(action="onMail").order_by("pk").last()
    assert "Also in your inbox" not in latest.items.filter(type="message").first().data["text"]
