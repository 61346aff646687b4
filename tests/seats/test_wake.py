"""Waking members (spec "Waking members", "Waking agent seats", "Making a kind of your
own hear posts", "What author is"), in sync mode."""

from __future__ import annotations

import pytest

from mailboxes.deliveries import do_deliver
from mailboxes.models import Delivery, Line
from mailboxes.notify import configure_notify, notify_block
from tests.conftest import MEMBER, OWNER, mailbox_md, on_postgres, open_mailboxes
from tests.seats.conftest import ECHO_LISTENER, ECHO_POSTER, SEATS_TREE, worker_md
from workforce.flows import Action, FlowKind, registry
from workforce.llm import use_model_resolver
from workforce.models import Item, Request, Session
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput
from workforce.testing import create_mock_model_resolver

HEARD = []


def conversation(org, mailbox_id: str, seat_id: str) -> Session:
    return Session.objects.get(organization=org, session_id=f"{mailbox_id}:{seat_id}")


def turns(org, mailbox_id: str, seat_id: str):
    return list(
        Request.objects.filter(
            session__organization=org, session__session_id=f"{mailbox_id}:{seat_id}", action=ON_MAILBOX_POST
        ).order_by("pk")
    )


def user_texts(session: Session) -> list[str]:
    return [
        i.data["text"] for i in Item.objects.filter(session=session, type="message").order_by("seq") if i.data["role"] == "user"
    ]


def test_client_post_wakes_each_hearing_member_with_the_turn_text(wired, post, org):
    wired()
    answer = post("eng.standup", "can someone look at the refund queue?", author="eng.lead")
    assert answer.status == "completed"
    # The roster is walked whole, the poster included: eng.lead wakes on its own claim.
    for seat in ("eng.lead", "eng.analyst"):
        [turn] = turns(org, "eng.standup", seat)
        assert turn.status == "completed"
        assert turn.output["reply"] == f"{seat} heard: eng.lead in eng.standup: can someone look at the refund queue?"
        assert user_texts(conversation(org, "eng.standup", seat)) == [
            "eng.lead in eng.standup: can someone look at the refund queue?"
        ]
    # eng.human has no seat: nobody runs for it, and no fallback was passed.
    assert not Session.objects.filter(session_id="eng.standup:eng.human").exists()
    assert set(Delivery.objects.values_list("member", "mode", "status")) == {
        ("eng.lead", "wake", "done"),
        ("eng.analyst", "wake", "done"),
    }


def test_without_author_the_writer_is_the_principal(wired, post, org):
    wired()
    post("eng.standup", "shipped the reader")
    [turn] = turns(org, "eng.standup", "eng.analyst")
    # principal is the mailbox session's user (the opener), the same on every line.
    assert turn.input["principal"] == OWNER and "author" not in turn.input
    assert user_texts(conversation(org, "eng.standup", "eng.analyst")) == [f"{OWNER} in eng.standup: shipped the reader"]


def test_notify_input_has_the_spec_shape(wired, post, org):
    wired()
    post("eng.standup", "hello", author="eng.analyst")
    line = Line.objects.get(body="hello")
    delivery = Delivery.objects.get(member="eng.lead")
    assert delivery.notify_input == {
        "mailboxId": "eng.standup",
        "member": "eng.lead",
        "postId": line.line_id,
        "body": "hello",
        "principal": OWNER,
        "author": "eng.analyst",
    }
    assert MailboxNotifyInput(data=delivery.notify_input).is_valid()


def test_a_seats_line_wakes_nobody(wired, post, org):
    files = dict(SEATS_TREE)
    files["teams/eng/workers/lead/WORKER.md"] = ECHO_POSTER
    wired(files)
    post("eng.incidents", "the database is down")
    # eng.lead heard the post and posted back with its tool; eng.analyst heard the post.
    lines = list(Line.objects.filter(session__session_id="eng.incidents").order_by("seq"))
    assert [(ln.author, ln.seat_authored) for ln in lines] == [(None, False), ("eng.lead", True)]
    assert lines[1].body == f"eng.lead heard: {OWNER} in eng.incidents: the database is down"
    assert lines[1].as_wire()["seatAuthored"] is True and lines[1].as_wire()["authorVerified"] is False
    # The seat's line woke nobody: each seat ran exactly one turn, for the client post.
    assert len(turns(org, "eng.incidents", "eng.lead")) == 1
    assert len(turns(org, "eng.incidents", "eng.analyst")) == 1
    assert not Delivery.objects.filter(post_id=lines[1].line_id).exists()
    fan_out = Request.objects.filter(session__session_id="eng.incidents", action="notify").order_by("pk")
    assert [r.output["deliveries"] for r in fan_out] == [
        [{"member": "eng.lead", "outcome": "wake"}, {"member": "eng.analyst", "outcome": "wake"}],
        [{"member": "eng.lead", "outcome": "none"}, {"member": "eng.analyst", "outcome": "none"}],
    ]


def test_a_client_post_claiming_a_seats_name_still_wakes(wired, post, org):
    wired()
    post("eng.incidents", "pretending", author="eng.lead")
    assert len(turns(org, "eng.incidents", "eng.lead")) == 1  # author does not set seatAuthored


def test_fallback_goes_to_members_that_cannot_hear_and_never_to_woken_ones(wired, post, org):
    HEARD.clear()
    wired(fallback=lambda notify_input: HEARD.append(dict(notify_input)) or {"told": notify_input["member"]})
    post("eng.standup", "standup time")
    assert [h["member"] for h in HEARD] == ["eng.human"]
    assert HEARD[0]["body"] == "standup time" and "seatAuthored" not in HEARD[0]
    fallback = Delivery.objects.get(member="eng.human")
    assert (fallback.mode, fallback.status, fallback.output) == ("fallback", "done", {"told": "eng.human"})


def test_on_a_seats_line_the_fallback_still_runs_for_members_that_cannot_hear(wired, post, org):
    HEARD.clear()
    files = dict(SEATS_TREE)
    files["teams/eng/workers/lead/WORKER.md"] = ECHO_POSTER
    wired(files, fallback=lambda notify_input: HEARD.append(dict(notify_input)))
    post("eng.standup", "standup time")
    # client post: eng.human gets the fallback; eng.lead's answer (a seat's line): eng.human again.
    assert [(h["member"], h.get("seatAuthored")) for h in HEARD] == [("eng.human", None), ("eng.human", True)]


def test_a_kind_that_cannot_hear_gets_the_fallback(wired, post, org):
    HEARD.clear()
    registry.register(FlowKind(kind="deaf", facets={"worker": True, "tools": {}}))
    try:
        files = dict(SEATS_TREE)
        files["teams/eng/workers/analyst/WORKER.md"] = worker_md("Deaf.", flow="deaf")
        wired(files, fallback=lambda notify_input: HEARD.append(notify_input["member"]))
        post("eng.incidents", "anyone?")
        assert HEARD == ["eng.analyst"]
        assert len(turns(org, "eng.incidents", "eng.lead")) == 1
    finally:
        registry.unregister("deaf")


def test_a_kind_of_your_own_hears_by_declaring_on_mailbox_post(wired, post, org):
    seen = []

    def triage(ctx, data):
        seen.append((ctx.session.session_id, ctx.session.parent.session_id, data["member"], data["body"]))
        return {"triaged": True}

    registry.register(
        FlowKind(
            kind="triager",
            internal_actions={ON_MAILBOX_POST: Action(ON_MAILBOX_POST, triage, MailboxNotifyInput)},
            facets={"worker": True, "tools": {}},
        )
    )
    try:
        files = dict(SEATS_TREE)
        files["teams/eng/workers/analyst/WORKER.md"] = worker_md("Triages.", flow="triager")
        wired(files)
        post("eng.incidents", "disk full")
        assert seen == [("eng.incidents:eng.analyst", "eng.incidents", "eng.analyst", "disk full")]
        assert Delivery.objects.get(member="eng.analyst").status == "done"
    finally:
        registry.unregister("triager")


def test_one_conversation_per_seat_per_mailbox_reused_by_the_next_post(wired, post, org):
    wired()
    post("eng.incidents", "first")
    post("eng.incidents", "second")
    post("eng.standup", "elsewhere")
    lead = conversation(org, "eng.incidents", "eng.lead")
    assert lead.parent.session_id == "eng.incidents" and lead.flow_kind == "agent" and lead.user_id == OWNER
    assert user_texts(lead) == [f"{OWNER} in eng.incidents: first", f"{OWNER} in eng.incidents: second"]
    assert Session.objects.filter(session_id__startswith="eng.incidents:eng.lead").count() == 1
    assert user_texts(conversation(org, "eng.standup", "eng.lead")) == [f"{OWNER} in eng.standup: elsewhere"]


def test_the_second_turn_remembers_the_first(wired, post, org):
    wired()
    mock = create_mock_model_resolver({"eng.lead": ["noted one", "noted two"], "eng.analyst": lambda call: "ok"})
    with use_model_resolver(mock):
        post("eng.incidents", "first")
        post("eng.incidents", "second")
    second = mock.calls_for("eng.lead")[1]
    assert [(m["role"], m["content"]) for m in second.messages] == [
        ("system", "You help."),
        ("user", f"{OWNER} in eng.incidents: first"),
        ("assistant", "noted one"),
        ("user", f"{OWNER} in eng.incidents: second"),
    ]


def test_history_is_limited_to_the_conversations_window(wired, post, org, settings):
    wired()
    settings.WORKFORCE_HISTORY_WINDOW = 2
    mock = create_mock_model_resolver({"*": lambda call: "ok"})
    with use_model_resolver(mock):
        for n in range(4):
            post("eng.incidents", f"post {n}")
    last = mock.calls_for("eng.lead")[-1]
    # the window is the conversation's last 2 requests: the previous turn and this one.
    assert [m["content"] for m in last.messages if m["role"] == "user"] == [
        f"{OWNER} in eng.incidents: post 2",
        f"{OWNER} in eng.incidents: post 3",
    ]


def test_a_failed_delivery_is_recorded_on_the_mailbox_and_the_others_still_run(wired, post, org):
    wired()
    mock = create_mock_model_resolver({"eng.lead": [ConnectionError("connection refused")], "eng.analyst": ["fine"]})
    with use_model_resolver(mock):
        answer = post("eng.incidents", "help")
    assert answer.status == "completed"
    assert Line.objects.filter(session__session_id="eng.incidents", body="help").exists()  # the post stays
    [failed_turn] = turns(org, "eng.incidents", "eng.lead")
    assert failed_turn.status == "failed" and failed_turn.error["reason"] == "model-error"
    assert "connection refused" in failed_turn.error["message"]
    assert turns(org, "eng.incidents", "eng.analyst")[0].status == "completed"
    [record] = Request.objects.filter(session__session_id="eng.incidents", action="deliverPost")
    assert record.status == "failed" and record.error["reason"] == "model-error"
    assert record.error["message"].startswith("model-error: the delivery of post ")
    assert "to eng.lead failed" in record.error["message"]
    assert record.input["member"] == "eng.lead"
    assert Delivery.objects.get(member="eng.lead").status == "failed"
    assert Delivery.objects.get(member="eng.analyst").status == "done"


def test_each_post_uses_two_requests_of_the_mailboxs_window(wired, post, org):
    wired()
    post("eng.incidents", "one")
    post("eng.incidents", "two")
    actions = list(Request.objects.filter(session__session_id="eng.incidents").order_by("pk").values_list("action", flat=True))
    assert actions == ["post", "notify", "post", "notify"]


def test_redelivery_never_runs_a_turn_twice(wired, post, org):
    wired()
    post("eng.incidents", "once")
    delivery = Delivery.objects.get(member="eng.lead")
    assert do_deliver(delivery.pk) == "not-claimed"
    assert do_deliver(delivery.pk) == "not-claimed"
    assert len(turns(org, "eng.incidents", "eng.lead")) == 1
    delivery.refresh_from_db()
    assert delivery.attempts == 1 and delivery.status == "done"


def test_a_plain_notify_block_runs_once_per_member_per_post_poster_included(wired, post, org):
    HEARD.clear()
    wired()
    configure_notify(
        "mailbox", notify_block(lambda notify_input: HEARD.append((notify_input["member"], notify_input.get("author"))))
    )
    post("eng.standup", "hi", author="eng.lead")
    assert HEARD == [("eng.lead", "eng.lead"), ("eng.analyst", "eng.lead"), ("eng.human", "eng.lead")]


def test_a_failing_notify_block_is_recorded_and_the_rest_still_run(wired, post, org):
    HEARD.clear()

    def block(notify_input):
        if notify_input["member"] == "eng.analyst":
            raise RuntimeError("smtp down")
        HEARD.append(notify_input["member"])

    wired()
    configure_notify("mailbox", notify_block(block))
    post("eng.standup", "hi")
    assert HEARD == ["eng.lead", "eng.human"]
    [record] = Request.objects.filter(session__session_id="eng.standup", action="deliverPost")
    assert record.error["reason"] == "notify-failed" and "smtp down" in record.error["message"]


def test_a_post_refused_hands_nothing_out(wired, post, org):
    wired()
    answer = post("eng.incidents", "hi", author="mallory")
    assert answer.status == "failed" and answer.error["reason"] == "author-not-a-member"
    assert not Delivery.objects.exists()
    assert not Request.objects.filter(action="notify").exists()


@pytest.mark.parametrize("members", [2, 25])
def test_fan_out_query_count_does_not_grow_with_members(
    make_tree, org, django_assert_num_queries, members, django_capture_on_commit_callbacks
):
    from mailboxes.fairness import session_delivery_limit
    from mailboxes.notify import wake_member_seats
    from seats.hiring import hire_workforce
    from seats.workers import read_workforce
    from workforce.sessions import do_run_action

    names = [f"w{n}" for n in range(members)]
    files = {"teams/eng/mailboxes/big/MAILBOX.md": mailbox_md("Big.", members=[f"eng.{n}" for n in names])}
    files.update({f"teams/eng/workers/{n}/WORKER.md": ECHO_LISTENER for n in names})
    root = make_tree(files)
    open_mailboxes(root, org)
    configure_notify("mailbox", wake_member_seats(hire_workforce(read_workforce(root).workers)))
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        # The same with 2 or 25 members. Inside the test's transaction (SAVEPOINT and
        # RELEASE stand for BEGIN and COMMIT), on PostgreSQL: the session read under its
        # lock with the request's INSERT (one CTE statement); the line, its item and the
        # request's completion (one CTE statement that bumps both counters of the session
        # row); one INSERT for every delivery, which writes the fan-out request too (a CTE
        # of it). On SQLite
        # (no data-modifying CTE): the session read, the request's INSERT, the counters'
        # UPDATE … RETURNING, the line's INSERT, the item's INSERT, the deliveries, the
        # fan-out request, the request's UPDATE. The deliveries' INSERT releases those the
        # bounds have room for (mailboxes.fairness.do_insert_deliveries); only when it
        # leaves some held does the release statement run after it (one UPDATE …
        # RETURNING, whatever the roster).
        some_held = members > session_delivery_limit()
        with django_assert_num_queries((5 if on_postgres() else 10) + some_held) as captured:
            do_run_action(org=org, kind="mailbox", session_id="eng.big", action="post", input={"body": "hi"}, user_id=MEMBER)
    assert Delivery.objects.filter(post_id=Line.objects.get(body="hi").line_id).count() == members
    # One task per delivery released (at most the session's bound; the rest are held, to
    # go as those finish: mailboxes.fairness), enqueued after the commit, and no other hook:
    # on PostgreSQL the open streams are told of the post's item by the line's own
    # statement (pg_notify, delivered when the post commits; mailboxes.lines).
    released = min(members, session_delivery_limit())
    assert len(callbacks) == released
    assert Delivery.objects.filter(enqueued_at__isnull=True).count() == members - released
    notifying = [q["sql"] for q in captured.captured_queries if "pg_notify" in q["sql"]]
    assert len(notifying) == (1 if on_postgres() else 0)
    assert all("INSERT INTO" in sql for sql in notifying)


def test_the_agents_on_mailbox_post_reached_by_dispatch_runs_the_turn_inline(wired, org):
    from workforce.dispatch import dispatch

    wired()
    payload = {"mailboxId": "eng.incidents", "member": "eng.lead", "postId": "p-1", "body": "direct", "principal": OWNER}
    request = dispatch(
        org=org, kind="agent", session_id="eng.incidents:eng.lead", action=ON_MAILBOX_POST, payload=payload, user_id=OWNER
    )
    assert request.status == "completed"
    assert request.output == {"reply": f"eng.lead heard: {OWNER} in eng.incidents: direct", "toolCalls": []}
    session = conversation(org, "eng.incidents", "eng.lead")
    assert [i.data["role"] for i in Item.objects.filter(session=session).order_by("seq")] == ["user", "assistant"]
    with use_model_resolver(create_mock_model_resolver({"eng.lead": [RuntimeError("down")]})):
        failed = dispatch(
            org=org,
            kind="agent",
            session_id="eng.incidents:eng.lead",
            action=ON_MAILBOX_POST,
            payload={**payload, "postId": "p-2"},
            user_id=OWNER,
        )
    assert failed.status == "failed" and failed.error["reason"] == "model-error"
    # The model ran after the action's commit: the failed turn's start stays, as a
    # failed delivery turn's does, and no reply.
    assert [(i.data["role"], i.request_id) for i in Item.objects.filter(session=session).order_by("seq")][2:] == [
        ("user", failed.pk)
    ]
    refused = dispatch(
        org=org, kind="agent", session_id="eng.incidents:eng.nobody", action=ON_MAILBOX_POST, payload=payload, user_id=OWNER
    )
    assert refused.status == "failed" and refused.error["reason"] == "seat-not-found"


def test_the_agent_kind_hears_posts_and_clients_cannot_reach_it(act, db):
    agent = registry.require("agent")
    assert agent.facets["hears_posts"] is True and ON_MAILBOX_POST in agent.internal_actions
    assert agent.find(ON_MAILBOX_POST, internal=False) is None
    from workforce.refusals import Refusal

    with pytest.raises(Refusal) as refused:
        act("eng.incidents:eng.lead", ON_MAILBOX_POST, {}, kind="agent")
    assert refused.value.reason == "action-not-found"
