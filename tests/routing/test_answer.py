"""The answer lands in the mailbox (spec "The answer lands in the mailbox", "What the
member sees when it answers", "A seat answering in the mailbox"): one answer line per
post, through an internal entry; the recent lines are for that one answer only."""

from __future__ import annotations

import pytest

from mailboxes.deliveries import do_deliver
from mailboxes.models import Delivery, Line
from workforce.dispatch import dispatch
from workforce.flows import Action, FlowKind, registry
from workforce.models import Request
from workforce.notify import ON_MAILBOX_POST, MailboxNotifyInput
from workforce.refusals import Refusal

from .conftest import ACCOUNTS, DESK, DEVICES, OWNER, desk_md, lines, ok, routed_tree, worker_md

POSTER_MD = worker_md(
    "Phones, laptops, printers and wifi; anything that won't turn on, charge or connect.",
    model="embedded/echo",
    tools="[post-to-mailbox]",
)
STANDUP = "teams/support/mailboxes/standup/MAILBOX.md"


def tool_call(mailbox: str, body: str) -> dict:
    return {"name": "post-to-mailbox", "arguments": {"mailbox": mailbox, "body": body}}


def with_tool(**extra):
    return routed_tree(
        **{
            "teams/support/workers/devices/WORKER.md": POSTER_MD,
            STANDUP: desk_md(members=(DEVICES, ACCOUNTS), routing=None),
            **extra,
        }
    )


def answer(org, post_id: str, body: str, author: str = DEVICES) -> Request:
    return dispatch(
        org=org,
        kind="mailbox",
        session_id=DESK,
        action="answer",
        payload={"postId": post_id, "body": body, "author": author},
        user_id=OWNER,
    )


def test_the_reply_lands_as_the_members_line_through_the_internal_entry(routed, post):
    routed(scripts={DEVICES: ["Try turning it off and on."]})
    post("my printer is jammed")
    question, reply = lines()
    assert reply.as_wire() | {"id": "", "at": 0} == {
        "id": "",
        "at": 0,
        "principal": OWNER,
        "author": DEVICES,
        "authorVerified": False,
        "body": "Try turning it off and on.",
        "seatAuthored": True,
        "postedBy": {"kind": "seat", "id": DEVICES, "verified": True},  # the seat whose turn answered
    }
    assert reply.answer_to == question
    (request,) = Request.objects.filter(session__session_id=DESK, action="answer")
    assert request.internal and request.output["landed"] is True


def test_no_client_can_reach_the_answer_entry(routed, post, act):
    routed()
    post("my printer is jammed")
    with pytest.raises(Refusal) as refused:
        act(DESK, "answer", {"postId": lines()[0].line_id, "body": "me!", "author": DEVICES})
    assert refused.value.reason == "action-not-found"


def test_a_post_gets_one_answer_line_even_when_answered_again(routed, post, org):
    routed()
    post("my printer is jammed")
    post_id = lines()[0].line_id
    again = answer(org, post_id, "a second answer")
    assert again.status == "completed" and again.output == {"landed": False, "postId": post_id, "answerId": lines()[1].line_id}
    assert len(lines()) == 2


def test_a_redelivered_task_answers_once(routed, post, django_capture_on_commit_callbacks):
    routed()
    post("my printer is jammed")
    delivery = Delivery.objects.get(member=DEVICES)
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.PENDING)  # the broker hands it out again
    with django_capture_on_commit_callbacks(execute=True):
        assert do_deliver(delivery.pk) == "done"
    assert len(lines()) == 2
    assert Line.objects.filter(answer_to=lines()[0]).count() == 1


def test_an_answer_the_mailbox_refuses_writes_nothing_and_does_not_use_up_the_answer(routed, post, org):
    routed(scripts={DEVICES: [ValueError("no answer")], "*": ok})
    post("my printer is jammed")
    assert len(lines()) == 1
    post_id = lines()[0].line_id
    refused = answer(org, post_id, "I am not a member", author="support.lead")
    assert refused.status == "failed" and refused.error["reason"] == "author-not-a-member"
    assert len(lines()) == 1
    assert answer(org, post_id, "here it is").output["landed"] is True
    assert lines()[1].body == "here it is"


def test_an_answer_to_something_that_is_not_a_client_post_is_refused(routed, org):
    routed()
    refused = answer(org, "no-such-post", "hello")
    assert refused.status == "failed" and refused.error["reason"] == "post-not-found"


def test_an_empty_reply_posts_nothing_and_fails_the_run(routed, post):
    routed(scripts={DEVICES: [""], "*": ok})
    post("my printer is jammed")
    assert len(lines()) == 1
    delivery = Delivery.objects.get(member=DEVICES)
    assert delivery.status == "failed" and delivery.error["reason"] == "empty-reply"
    failed = Request.objects.get(session__session_id=DESK, action="deliverPost")
    assert failed.error["reason"] == "empty-reply"


@pytest.mark.parametrize("text", ["hello \x00 world", "half a pair \ud800"])
def test_an_answer_the_store_cannot_keep_fails_the_run_as_the_models(routed, post, text):
    """A model that writes a NUL or a lone surrogate fails its turn (``model-error``):
    before, the settle failed in the database and the request stayed ``running`` while
    its task ran the model again and again."""
    routed(scripts={DEVICES: [text], "*": ok})
    post("my printer is jammed")
    assert len(lines()) == 1
    delivery = Delivery.objects.get(member=DEVICES)
    assert delivery.status == "failed" and delivery.error["reason"] == "model-error"
    assert "nothing was posted" in delivery.error["message"]
    assert not Request.objects.filter(status=Request.Status.RUNNING).exists()


def test_an_empty_reply_after_other_tool_posts_still_fails(routed, post):
    routed(with_tool(), scripts={DEVICES: [{"tool_calls": [tool_call("support.standup", "note to self")]}, ""], "*": ok})
    post("my printer is jammed")
    assert len(lines()) == 1  # nothing answered the post
    assert lines("support.standup")[0].body == "note to self"
    assert Delivery.objects.get(member=DEVICES).error["reason"] == "empty-reply"


def test_with_the_tool_the_first_call_is_the_answer_and_a_later_one_posts_nothing(routed, post):
    _, resolver = routed(
        with_tool(),
        scripts={
            DEVICES: [
                {"tool_calls": [tool_call(DESK, "first"), tool_call(DESK, "second"), tool_call("support.standup", "fyi")]},
                "my reply",
            ],
            "*": ok,
        },
    )
    post("my printer is jammed")
    question, answer_line = lines()
    assert (answer_line.body, answer_line.author, answer_line.answer_to) == ("first", DEVICES, question)
    assert lines("support.standup")[0].body == "fyi" and lines("support.standup")[0].answer_to is None
    tool_results = [m for m in resolver.calls_for(DEVICES)[-1].messages if m["role"] == "tool"]
    assert '"ok": true' in tool_results[0]["content"]
    assert "already-answered" in tool_results[1]["content"] and "nothing was posted" in tool_results[1]["content"]
    # The reply was handed over after it and landed nothing: the tool's answer did.
    reply = Request.objects.filter(session__session_id=DESK, action="answer").order_by("pk").last()
    assert reply.input["body"] == "my reply" and reply.output["landed"] is False
    assert Delivery.objects.get(member=DEVICES).status == "done"


def test_an_empty_reply_is_fine_once_the_tool_handed_the_answer_over(routed, post):
    routed(with_tool(), scripts={DEVICES: [{"tool_calls": [tool_call(DESK, "done")]}, ""], "*": ok})
    post("my printer is jammed")
    assert [ln.body for ln in lines()] == ["my printer is jammed", "done"]
    assert Delivery.objects.get(member=DEVICES).status == "done"


def test_the_reply_lands_when_the_tools_answer_did_not(routed, post, monkeypatch):
    import mailboxes.flow

    original = mailboxes.flow.do_answer_post  # the answer entry's service (mailboxes.services)

    def refuse_the_tools(ctx, *, post_id, body, author):
        if body == "via the tool":  # the mailbox fails to write the tool's answer
            raise Refusal("answer-not-written", "the mailbox could not write it")
        return original(ctx, post_id=post_id, body=body, author=author)

    monkeypatch.setattr(mailboxes.flow, "do_answer_post", refuse_the_tools)
    routed(with_tool(), scripts={DEVICES: [{"tool_calls": [tool_call(DESK, "via the tool")]}, "the reply"], "*": ok})
    post("my printer is jammed")
    assert [ln.body for ln in lines()] == ["my printer is jammed", "the reply"]
    failed = Request.objects.get(session__session_id=DESK, action="answer", status="failed")
    assert failed.error["reason"] == "answer-not-written"  # a failed request on the mailbox's session


def test_the_member_sees_the_last_lines_for_that_one_answer_only(routed, post):
    _, resolver = routed(scripts={DEVICES: ["first answer", "second answer"], "*": ok})
    post("I forgot my password")  # accounts answers "ok"
    post("my printer is jammed")
    post("printer still jammed")
    first, second = resolver.calls_for(DEVICES)
    context = [m for m in second.messages if m["role"] == "user" and m["content"].startswith("The last")]
    assert len(context) == 1  # this answer's lines, not the first answer's
    assert context[0]["content"].splitlines()[1:] == [
        f"{OWNER}: I forgot my password",
        f"{ACCOUNTS}: ok",
        f"{OWNER}: my printer is jammed",
        f"{DEVICES}: first answer",
    ]
    # What the conversation keeps: the posts routed to the member and its answers.
    history = [m for m in second.messages[:-2] if m["role"] in ("user", "assistant")]
    assert [m["content"] for m in history] == [f"{OWNER} in {DESK}: my printer is jammed", "first answer"]


def test_a_seat_woken_in_an_unrouted_mailbox_gets_no_lines(routed, post):
    _, resolver = routed(routed_tree(**{"teams/support/mailboxes/desk/MAILBOX.md": desk_md(routing=None)}), scripts={"*": ok})
    post("hello")
    post("hello again")
    assert all(not m["content"].startswith("The last") for c in resolver.calls for m in c.messages if m["role"] == "user")


@pytest.fixture
def triager_kind():
    heard = []

    def on_post(ctx, data):
        heard.append(data)
        return {"notified": data["member"]}

    registry.register(
        FlowKind(
            kind="triager",
            internal_actions={ON_MAILBOX_POST: Action(ON_MAILBOX_POST, on_post, MailboxNotifyInput)},
            facets={"worker": True, "tools": {}},
        )
    )
    yield heard
    registry.unregister("triager")


def test_a_kind_of_your_own_gets_routed_and_recent_and_its_reply_is_not_posted(routed, post, triager_kind):
    routed(
        routed_tree(
            **{"teams/support/workers/devices/WORKER.md": worker_md("Phones, laptops, printers and wifi.", flow="triager")}
        )
    )
    post("I forgot my password")
    post("my printer is jammed")
    heard = triager_kind[-1]
    assert heard["routed"] is True and heard["member"] == DEVICES
    assert heard["recent"] == [
        {"from": OWNER, "text": "I forgot my password"},
        {"from": ACCOUNTS, "text": f"{ACCOUNTS} heard: {OWNER} in {DESK}: I forgot my password"},
    ]
    assert len(lines()) == 3  # nothing posted for the triager
