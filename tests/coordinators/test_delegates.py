"""A conversation's delegates (spec 004 "Changing the delegates", "Who can be a
delegate"): the copy, the four actions and their output, each refusal's sentence, the
session-create refusal, and the coordinator's tools of the same names."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from coordinators.models import Conversation, Delegate
from coordinators.services import do_ensure_worker_session
from seats.hiring import hire_workforce
from seats.models import Seat
from seats.workers import read_workforce
from tests.conftest import MEMBER, OUTSIDER
from tests.coordinators.conftest import ACCOUNTS, CONVERSATION, DELEGATES, DEVICES, GENERAL, HELP, desk_tree
from workforce.flows import FlowKind, registry
from workforce.models import Request, Session
from workforce.refusals import Refusal

LICENSES = "licenses"


def listing(*delegates, fallback=None, session_id=CONVERSATION) -> dict:
    return {
        "delegates": [d if isinstance(d, dict) else {"worker": d} for d in delegates],
        "fallback": {"worker": fallback} if fallback else None,
        "max": 25,
        "filingSessionId": session_id,
    }


def refused(request: Request, reason: str, sentence: str) -> None:
    assert request.status == "failed"
    assert request.error == {"reason": reason, "message": f"{reason}: {sentence}"}


@pytest.fixture
def own_licenses(org):
    """``licenses``: the member's own worker (on their roster only)."""
    return Seat.objects.create(
        seat_id=LICENSES,
        kind="agent",
        scope=Seat.Scope.OWN,
        organization=org,
        owner_user_id=MEMBER,
        description="Software licenses.",
        model="embedded/echo",
    )


def test_the_spec_example_add_remove_set_fallback_list(desk, own_licenses):
    d = desk(fallback=GENERAL)
    answer = d.act("addDelegate", {"worker": LICENSES, "note": "Software license questions"})
    assert answer.output == listing(
        DEVICES, ACCOUNTS, GENERAL, {"worker": LICENSES, "note": "Software license questions"}, fallback=GENERAL
    )
    assert d.act("removeDelegate", {"worker": ACCOUNTS}).output == listing(
        DEVICES, GENERAL, {"worker": LICENSES, "note": "Software license questions"}, fallback=GENERAL
    )
    assert d.act("setFallback", {"worker": LICENSES}).output == listing(
        DEVICES, GENERAL, {"worker": LICENSES, "note": "Software license questions"}, fallback=LICENSES
    )
    assert d.act("listDelegates", {}).output == {
        "delegates": [{"worker": DEVICES}, {"worker": GENERAL}, {"worker": LICENSES, "note": "Software license questions"}],
        "fallback": {"worker": LICENSES},
        "max": 25,
        "filingSessionId": CONVERSATION,
    }
    assert d.act("setFallback", {"worker": None}).output["fallback"] is None


def test_a_conversation_copies_the_file_on_its_first_delegate_action_and_keeps_its_changes(desk, make_tree, org):
    d = desk(fallback=GENERAL)
    assert not Conversation.objects.exists()
    d.act("removeDelegate", {"worker": DEVICES})
    # Another conversation with the same coordinator starts from the file, untouched.
    do_ensure_worker_session(org, OUTSIDER, HELP)
    other = d.act("listDelegates", {}, user_id=OUTSIDER, session_id=f"{HELP}:{OUTSIDER}")
    assert other.output == listing(*DELEGATES, fallback=GENERAL, session_id=f"{HELP}:{OUTSIDER}")
    assert d.act("listDelegates").output == listing(ACCOUNTS, GENERAL, fallback=GENERAL)
    # The file is never written; the seat keeps what the file says.
    assert Seat.objects.get(seat_id=HELP).config["delegates"] == list(DELEGATES)


def test_a_conversation_copies_on_its_first_post_and_a_later_file_edit_reaches_only_new_ones(desk, make_tree, org):
    d = desk(routing="everyone")
    d.run("hello")
    assert [x.worker for x in Delegate.objects.filter(conversation__session__session_id=CONVERSATION)] == list(DELEGATES)
    # The file is edited (and hired again): delegates: now names devices only.
    workers, _ = read_workforce(make_tree(desk_tree(routing="everyone", delegates=(DEVICES,))))
    hire_workforce(workers)
    assert d.act("listDelegates").output == listing(*DELEGATES)
    do_ensure_worker_session(org, OUTSIDER, HELP)
    fresh = d.act("listDelegates", user_id=OUTSIDER, session_id=f"{HELP}:{OUTSIDER}")
    assert fresh.output["delegates"] == [{"worker": DEVICES}]


def test_no_worker_on_your_roster(desk, org, other_org):
    d = desk()
    Seat.objects.create(seat_id="theirs", kind="agent", scope=Seat.Scope.OWN, organization=org, owner_user_id=OUTSIDER)
    Seat.objects.create(seat_id="acme.only", kind="agent", scope=Seat.Scope.ORG, organization=other_org)
    for worker in ("support.nobody", "theirs", "acme.only"):
        refused(d.act("addDelegate", {"worker": worker}), "worker-not-on-roster", f'No worker "{worker}" on your roster.')
    assert d.act("listDelegates").output == listing(*DELEGATES)  # a refused change wrote nothing


def test_a_worker_whose_flow_takes_neither_a_post_nor_a_task(desk):
    d = desk()
    refused(
        d.act("addDelegate", {"worker": HELP}),
        "delegate-cannot-take-work",
        'Worker "support.help" runs on flow "coordinator", which takes neither a delegated post nor a task.',
    )


def test_already_a_delegate_and_the_26th(desk, org):
    d = desk()
    refused(
        d.act("addDelegate", {"worker": DEVICES}),
        "delegate-already-listed",
        '"support.devices" is already a delegate in this conversation.',
    )
    for n in range(22):
        Seat.objects.create(seat_id=f"extra{n}", kind="agent", scope=Seat.Scope.ORG, organization=org)
        assert d.act("addDelegate", {"worker": f"extra{n}"}).status == "completed"
    assert len(d.act("listDelegates").output["delegates"]) == 25
    Seat.objects.create(seat_id="extra22", kind="agent", scope=Seat.Scope.ORG, organization=org)
    refused(
        d.act("addDelegate", {"worker": "extra22"}),
        "delegates-full",
        "This conversation already has 25 delegates, the most it can hold. Remove one first.",
    )


def test_removing_a_worker_that_isnt_listed_and_a_fallback_that_isnt(desk):
    d = desk()
    refused(
        d.act("removeDelegate", {"worker": "licenses"}),
        "delegate-not-listed",
        '"licenses" isn\'t a delegate in this conversation.',
    )
    refused(
        d.act("setFallback", {"worker": "licenses"}),
        "fallback-not-a-delegate",
        "\"licenses\" isn't a delegate in this conversation, so it can't be the fallback.",
    )


def test_removing_checks_only_the_list_and_removing_the_fallback_clears_it(desk):
    d = desk(fallback=GENERAL)
    Seat.objects.filter(seat_id=GENERAL).delete()  # fired
    assert d.act("removeDelegate", {"worker": GENERAL}).output == listing(DEVICES, ACCOUNTS)


def test_a_task_taking_worker_can_be_added_and_a_post_to_it_is_skipped(desk, org):
    registry.register(FlowKind(kind="coder", facets={"worker": True, "takes_tasks": True}))
    try:
        Seat.objects.create(seat_id="eng.coder", kind="coder", scope=Seat.Scope.ORG, organization=org)
        d = desk(routing="everyone")
        assert d.act("addDelegate", {"worker": "eng.coder"}).status == "completed"
        post = d.run("hi")
        [record] = d.records(post.request_id)
        assert {
            "worker": "eng.coder",
            "outcome": "skipped",
            "reason": 'Worker "eng.coder" runs on flow "coder", which can\'t take a delegated post.',
        } in record["delegates"]
    finally:
        registry.unregister("coder")


def test_a_flow_declaring_the_entry_but_not_a_delegate_flow_counts_as_one_that_cant(desk, org):
    from workforce.delegation import DELEGATED_POST_ENTRY, delegated_post_entry

    registry.register(
        FlowKind(
            kind="research",
            internal_actions={DELEGATED_POST_ENTRY: delegated_post_entry(lambda ctx, data: "found it")},
            facets={"worker": True},
        )
    )
    try:
        Seat.objects.create(seat_id="research", kind="research", scope=Seat.Scope.ORG, organization=org)
        d = desk(routing="everyone")  # delegate_flows=("agent",)
        refused(
            d.act("addDelegate", {"worker": "research"}),
            "delegate-cannot-take-work",
            'Worker "research" runs on flow "research", which takes neither a delegated post nor a task.',
        )
    finally:
        registry.unregister("research")


def test_only_the_owner_reaches_a_conversation(desk):
    d = desk()
    with pytest.raises(Refusal) as refused:
        d.act("listDelegates", user_id=OUTSIDER)
    assert refused.value.reason == "session-not-found"


# ----------------------------------------------------------------------------- tools


def test_the_coordinators_tools_change_the_same_list_and_hand_refusals_back(desk, own_licenses):
    calls = [
        {"name": "listDelegates", "arguments": {}},
        {"name": "addDelegate", "arguments": {"worker": LICENSES, "note": "Software license questions"}},
        {"name": "addDelegate", "arguments": {"worker": "support.nobody"}},
        {"name": "removeDelegate", "arguments": {"worker": ACCOUNTS}},
        {"name": "setFallback", "arguments": {"worker": "support.nobody"}},
        {"name": "setFallback", "arguments": {"worker": LICENSES}},
    ]
    d = desk(scripts={HELP: [{"tool_calls": calls}, "Done."]})
    d.run("Bring licenses in and take accounts off.")
    second_call = d.resolver.calls_for(HELP)[1].messages
    results = [json.loads(m["content"]) for m in second_call if m["role"] == "tool"]
    assert results[0] == listing(*DELEGATES)
    assert results[1]["delegates"][-1] == {"worker": LICENSES, "note": "Software license questions"}
    assert results[2] == {"refused": 'worker-not-on-roster: No worker "support.nobody" on your roster.'}
    assert results[3]["delegates"] == [
        {"worker": DEVICES},
        {"worker": GENERAL},
        {"worker": LICENSES, "note": "Software license questions"},
    ]
    assert results[4] == {
        "refused": 'fallback-not-a-delegate: "support.nobody" isn\'t a delegate in this conversation, '
        "so it can't be the fallback."
    }
    assert results[5]["fallback"] == {"worker": LICENSES}
    assert d.act("listDelegates").output == results[5]
    # The list is not in the prompt, and the five tools are offered whatever tools: says.
    first = d.resolver.calls_for(HELP)[0]
    assert "support.devices" not in json.dumps(first.messages)
    assert sorted(first.tools) == ["addDelegate", "handOff", "listDelegates", "removeDelegate", "setFallback"]


# ----------------------------------------------------------------------------- sessions over HTTP


@pytest.fixture
def client():
    return APIClient()


def test_a_session_created_with_delegates_or_fallback_in_its_state_is_refused_with_400(desk, client):
    desk(open_session=False)
    for field in ("delegates", "fallback"):
        response = client.post(
            f"/api/workers/{HELP}/sessions",
            {"userId": MEMBER, "state": {field: [DEVICES] if field == "delegates" else DEVICES}},
            format="json",
        )
        assert response.status_code == 400, response.content
        assert response.json()["error"] == {
            "reason": "state-field-reserved",
            "message": f'state-field-reserved: Session state field "{field}" is written only by flow "coordinator"; '
            "a caller cannot set it.",
        }
    assert not Conversation.objects.exists()


def test_a_worker_session_over_http_and_talking_to_it(desk, client):
    desk(routing="everyone", open_session=False)
    opened = client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER}, format="json")
    assert opened.status_code == 201 and opened.json() == {
        "sessionId": CONVERSATION,
        "flowKind": "coordinator",
        "worker": HELP,
        "created": True,
    }
    again = client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER}, format="json")
    assert again.status_code == 200 and again.json()["created"] is False
    listed = client.post(
        f"/api/flows/coordinator/{CONVERSATION}/actions/listDelegates", {"userId": MEMBER, "input": {}}, format="json"
    )
    assert listed.status_code == 202 and listed.json()["output"] == listing(*DELEGATES)
    refusal = client.post(
        f"/api/flows/coordinator/{CONVERSATION}/actions/addDelegate",
        {"userId": MEMBER, "input": {"worker": "nobody"}},
        format="json",
    )
    assert refusal.status_code == 404 and refusal.json()["error"]["reason"] == "worker-not-on-roster"
    unknown = client.post("/api/workers/support.nobody/sessions", {"userId": MEMBER}, format="json")
    assert unknown.status_code == 404


def test_a_chosen_session_id_is_namespaced_under_the_worker_and_the_caller(desk, client):
    """A caller's own sessionId can never take an id the tree declares later (a mailbox
    id such as support.newbox) or another user's session: it lives under
    ``<worker>:<user>:``."""
    desk(routing="everyone", open_session=False)
    opened = client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER, "sessionId": "support.newbox"}, format="json")
    assert opened.status_code == 201, opened.content
    assert opened.json()["sessionId"] == f"{HELP}:{MEMBER}:support.newbox"
    assert not Session.objects.filter(session_id="support.newbox").exists()


def test_another_users_call_leaves_nothing_in_the_conversation(desk, client):
    desk(routing="everyone", open_session=False)
    assert client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER}, format="json").status_code == 201
    before = Request.objects.filter(session__session_id=CONVERSATION).count()
    for input in ({}, {"bogus": 1}):
        answer = client.post(
            f"/api/flows/coordinator/{CONVERSATION}/actions/listDelegates", {"userId": OUTSIDER, "input": input}, format="json"
        )
        assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
        assert answer.json()["requestId"] is None
    assert Request.objects.filter(session__session_id=CONVERSATION).count() == before


def test_an_action_on_an_id_nobody_opened_creates_no_coordinator_session(desk, client):
    """Only POST /api/workers/<worker>/sessions opens a conversation: naming a fresh id in
    an action call (say a mailbox id the tree will declare later) creates nothing."""
    desk(routing="everyone", open_session=False)
    for session_id in ("support.newbox", f"{HELP}:someone"):
        answer = client.post(
            f"/api/flows/coordinator/{session_id}/actions/run", {"userId": MEMBER, "input": {"message": "hi"}}, format="json"
        )
        assert answer.status_code == 404 and answer.json()["error"]["reason"] == "session-not-found"
        assert not Session.objects.filter(session_id=session_id).exists()
