"""A conversation's ``sessionId`` and its delegates' sessions (spec 004 "Changing the
delegates": "Each delegate works this conversation's posts in a session of its own").

A further conversation is ``<worker>:<user>:<sessionId>``; a delegate's session under the
default conversation is ``<worker>:<user>:<delegate>``. A ``sessionId`` naming a worker
would take that delegate's session, and every post handed to it would fail in the
cluster. So a ``sessionId`` naming a worker (the file's delegates, or one the caller
reaches) is refused when the conversation would be created, and ``addDelegate`` refuses
a worker whose session id another conversation already holds."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from coordinators.models import DelegateSession
from tests.conftest import MEMBER
from tests.coordinators.conftest import CONVERSATION, DEVICES, GENERAL, HELP
from tests.seats.conftest import worker_md
from workforce.models import Session

LICENSES = "licenses"
LICENSES_MD = worker_md("Software license questions.", model="embedded/echo")


@pytest.fixture
def client():
    return APIClient()


def open_named(client, session_id: str):
    return client.post(f"/api/workers/{HELP}/sessions", {"userId": MEMBER, "sessionId": session_id}, format="json")


@pytest.mark.parametrize("named", [DEVICES, GENERAL])
def test_a_session_id_naming_a_delegate_is_refused_and_the_delegate_still_answers(desk, client, named):
    d = desk(routing="everyone", delegates=(DEVICES, GENERAL))
    refused = open_named(client, named)
    assert refused.status_code == 400, refused.content
    error = refused.json()["error"]
    assert error["reason"] == "invalid-input"
    assert error["message"] == (
        f'invalid-input: sessionId "{named}" names a worker: {CONVERSATION}:{named} is the session that worker works your '
        f"conversation {CONVERSATION}'s posts in as a delegate; choose a sessionId that names no worker."
    )
    assert not Session.objects.filter(session_id=f"{CONVERSATION}:{named}").exists()
    # The default conversation's delegate gets its own session and answers.
    d.run("My laptop won't charge.")
    assert sorted(name for name, _ in d.answers()) == sorted([DEVICES, GENERAL])
    delegate = DelegateSession.objects.select_related("session").get(worker=named)
    assert delegate.session.session_id == f"{CONVERSATION}:{named}" and delegate.session.flow_kind == "agent"


def test_a_session_id_naming_no_worker_is_a_further_conversation(desk, client):
    desk(routing="everyone", delegates=(DEVICES,))
    opened = open_named(client, "second")
    assert opened.status_code == 201 and opened.json()["sessionId"] == f"{CONVERSATION}:second"
    again = open_named(client, "second")
    assert again.status_code == 200 and again.json()["sessionId"] == f"{CONVERSATION}:second"


def test_a_worker_hired_after_the_conversation_is_refused_as_its_delegate(desk, client):
    """The other order: a conversation named "licenses" first, then a worker of one's own
    called licenses, added to the default conversation: its session id is held, so the
    add is refused (409) instead of every post to it failing in the cluster."""
    d = desk(routing="everyone", delegates=(DEVICES,))
    assert open_named(client, LICENSES).status_code == 201
    hired = client.post("/api/workers", {"userId": MEMBER, "id": LICENSES, "workerMd": LICENSES_MD}, format="json")
    assert hired.status_code == 201, hired.content
    added = d.act("addDelegate", {"worker": LICENSES})
    assert added.status == "failed"
    assert added.error == {
        "reason": "session-not-addressable",
        "message": f"session-not-addressable: {LICENSES} can't be a delegate of this conversation: the id of its session, "
        f'"{CONVERSATION}:{LICENSES}", is held by another conversation of yours.',
    }
    assert [d["worker"] for d in d.act("listDelegates").output["delegates"]] == [DEVICES]
    # The named conversation is still there, and opening it again answers it.
    assert open_named(client, LICENSES).status_code == 200
    # A fresh worker name is refused as a sessionId now that the caller reaches it.
    hired = client.post("/api/workers", {"userId": MEMBER, "id": "audits", "workerMd": LICENSES_MD}, format="json")
    assert hired.status_code == 201
    assert open_named(client, "audits").status_code == 400


def test_a_delegate_removed_and_added_again_keeps_its_own_session(desk):
    d = desk(routing="everyone", delegates=(DEVICES, GENERAL))
    d.run("First.")
    assert d.act("removeDelegate", {"worker": DEVICES}).status == "completed"
    assert d.act("addDelegate", {"worker": DEVICES}).status == "completed"
    d.run("Second.")
    assert DelegateSession.objects.filter(worker=DEVICES).count() == 1


def test_the_consequence_refused_a_held_delegate_session_id_leaves_that_delegate_unable_to_answer(desk, org):
    """The control: the session a delegate needs, held by a conversation (as a
    ``sessionId`` naming the worker made before the refusal), fails that delegate's
    every post, while the other delegate answers."""
    d = desk(routing="everyone", delegates=(DEVICES, GENERAL))
    Session.objects.create(organization=org, session_id=f"{CONVERSATION}:{DEVICES}", flow_kind="coordinator", user_id=MEMBER)
    d.run("My laptop won't charge.")
    assert [name for name, _ in d.answers()] == [GENERAL]
    failed = d.deliveries(worker=DEVICES).get()
    assert failed.status == "failed" and failed.error["reason"] == "session-not-addressable"
