"""Every caller of a seat's turn records it in the one turn log (``seats.turns``): here
a delegate's turn on a delegated post (``coordinators.delivery``) and the coordinator's
own turn (``coordinators.jobs``). Their shapes are the ones a mailbox delivery and a
board row leave (``tests/turn_log.py``)."""

from __future__ import annotations

from coordinators.models import DelegatedPost, Job
from tests.coordinators.conftest import CONVERSATION, DEVICES, HELP
from tests.turn_log import TURN_LOG, ScriptedTurn, turn_log
from workforce.delegation import DELEGATED_POST_ENTRY
from workforce.models import Item, Request

DELEGATE_SESSION = f"{CONVERSATION}:{DEVICES}"


def test_a_delegated_post_records_the_delegates_turn_in_the_turn_log(desk):
    script = ScriptedTurn(DELEGATED_POST_ENTRY)
    d = desk(routing="round-robin", scripts={DEVICES: script})
    d.run("hi")
    request = Request.objects.get(session__session_id=DELEGATE_SESSION, action=DELEGATED_POST_ENTRY)
    assert script.statuses == ["running", "running"]
    assert turn_log(request) == TURN_LOG
    assert request.status == "completed" and request.output == {"text": "the reply"}
    assert DelegatedPost.objects.get(worker=DEVICES).status == "answered"  # the caller settled its work item


def test_a_delegates_failed_turn_ends_failed_with_its_error(desk):
    script = ScriptedTurn(DELEGATED_POST_ENTRY, fail=True)
    d = desk(routing="round-robin", scripts={DEVICES: script})
    d.run("hi")
    request = Request.objects.get(session__session_id=DELEGATE_SESSION, action=DELEGATED_POST_ENTRY)
    assert script.statuses == ["running"]
    assert turn_log(request) == TURN_LOG[:1]
    assert request.status == "failed" and request.error["reason"] == "model-error"
    assert DelegatedPost.objects.get(worker=DEVICES).status == "failed"


def test_the_coordinators_own_turn_is_recorded_in_the_turn_log(desk):
    script = ScriptedTurn("judgment")
    d = desk(routing="judgment", scripts={HELP: script})
    post = d.run("hi")
    request = Request.objects.get(session__session_id=CONVERSATION, action="judgment")
    assert script.statuses == ["running", "running"]
    # The turn reads the post, which is already the conversation's user message (the run
    # request's), so its own log starts at the model's first tool call.
    [prompt] = [i for i in Item.objects.filter(request=post, type="message")]
    assert (prompt.data["role"], prompt.data["text"]) == ("user", "hi")
    assert turn_log(request) == TURN_LOG[1:]
    assert request.status == "completed" and request.output == {"reply": "the reply", "handedOff": []}
    assert Job.objects.get(kind="judgment").status == "done"  # the caller settled its work item


def test_the_coordinators_failed_turn_ends_failed_with_its_error(desk):
    script = ScriptedTurn("judgment", fail=True)
    d = desk(routing="judgment", scripts={HELP: script})
    d.run("hi")
    request = Request.objects.get(session__session_id=CONVERSATION, action="judgment")
    assert script.statuses == ["running"]
    assert request.status == "failed" and request.error["reason"] == "model-error"
    # The turn left no reply; the one message on its request is the caller's record that
    # nobody took the post.
    [line] = Item.objects.filter(request=request, type="message")
    assert line.data["role"] == "assistant" and line.data["text"].startswith("Nobody took this post")
