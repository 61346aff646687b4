"""Ids composed from a caller's input fit their column or are refused at the edge as
``invalid-input``: a conversation's id (``<worker>:<user>:<sessionId>``, at most 300
characters) and the id of each delegate's session under it (``<conversation>:<delegate>``),
refused when the conversation is opened or the delegate added, never in the cluster."""

from __future__ import annotations

from rest_framework.test import APIClient

from coordinators.models import Delegate
from tests.conftest import MEMBER
from tests.coordinators.conftest import ACCOUNTS, DEVICES, GENERAL, HELP, desk_tree
from tests.seats.conftest import worker_md
from workforce.models import Session

PREFIX = f"{HELP}:{MEMBER}:"  # 18 characters


def open_session(session_id: str):
    return APIClient().post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER, "sessionId": session_id}, format="json")


def test_a_session_id_that_makes_the_conversation_id_longer_than_300_is_invalid_input(desk):
    desk(routing="everyone", open_session=False)
    response = open_session("s" * (301 - len(PREFIX)))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == {
        "reason": "invalid-input",
        "message": f"invalid-input: sessionId makes the conversation id {PREFIX}… 301 characters long; "
        f"ids are at most 300, so sessionId can be at most {300 - len(PREFIX)}.",
    }
    assert not Session.objects.filter(session_id__startswith=PREFIX).exists()


def test_a_conversation_whose_delegate_session_ids_would_not_fit_is_refused_when_opened(desk):
    """support.accounts (16 characters) is the longest delegate: its session is
    ``<conversation>:support.accounts``, which must fit in 300 too."""
    desk(routing="everyone", open_session=False)
    longest = 300 - len(PREFIX) - len(":" + ACCOUNTS)
    response = open_session("s" * (longest + 1))
    assert response.status_code == 400, response.content
    assert response.json()["error"] == {
        "reason": "invalid-input",
        "message": f"invalid-input: sessionId leaves no room for the session of delegate {ACCOUNTS} "
        f"({PREFIX}…:{ACCOUNTS} would be 301 characters; ids are at most 300), so sessionId can be "
        f"at most {longest}.",
    }
    assert not Session.objects.filter(session_id__startswith=PREFIX).exists()
    assert open_session("s" * longest).status_code == 201


def test_adding_a_delegate_whose_session_id_would_not_fit_is_invalid_input(desk, make_tree, org):
    """A longer worker id than the file's delegates: the conversation opened, the add is
    refused and the list is unchanged (before, the delivery failed in the cluster)."""
    long_worker = "support." + "w" * 40
    files = {
        **desk_tree(routing="everyone"),
        f"teams/support/workers/{'w' * 40}/WORKER.md": worker_md("Long-named helper.", model="embedded/echo"),
    }
    d = desk(files, open_session=False)
    session_id = "s" * (300 - len(PREFIX) - len(":" + ACCOUNTS))
    assert open_session(session_id).status_code == 201
    conversation = PREFIX + session_id
    request = d.act("addDelegate", {"worker": long_worker}, session_id=conversation)
    assert request.status == "failed"
    assert request.error == {
        "reason": "invalid-input",
        "message": f"invalid-input: {long_worker} can't be a delegate of this conversation: its session "
        f"({conversation[:40]}…:{long_worker}) would be {len(conversation) + 1 + len(long_worker)} "
        "characters, and ids are at most 300. Open a conversation with a shorter sessionId.",
    }
    listed = d.act("listDelegates", session_id=conversation)
    assert [entry["worker"] for entry in listed.output["delegates"]] == [DEVICES, ACCOUNTS, GENERAL]
    assert Delegate.objects.filter(conversation__session__session_id=conversation).count() == 3
