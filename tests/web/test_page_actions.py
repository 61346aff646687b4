"""The pages' actions in process (docs/pages.md "The pages", "Acting from the pages"): each form
runs the service the API runs, a refusal is shown beside its field with what was typed
kept, the plain (no-script) path is a POST and a redirect, htmx gets the form's fragment,
CSRF is checked, and another organization's object is 404. In a real browser:
``tests/e2e/test_web_pages_actions.py``."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client, override_settings
from django.utils import timezone

from boards.models import BoardTask
from boards.services.claims import do_claim_task
from mail.models import Thread
from mailboxes.models import Project
from seats.models import Seat
from tests.conftest import MEMBER, STANDARD_TREE, mailbox_md
from tests.mail.conftest import MAIL_TREE, agent_runtime, agents, committed, send, vaults  # noqa: F401
from web.views import SESSION_USER
from workforce.models import Membership, Request, Session
from workforce.sessions import do_record_request, do_run_action, ensure_child_session

HX = {"HTTP_HX_REQUEST": "true"}
ACTIONS_TREE = {
    **STANDARD_TREE,
    "teams/eng/mailboxes/triage/MAILBOX.md": mailbox_md("Triage.", boards="[queue]", boardActions="true"),
}
GOOD_WORKER = "---\ndescription: Answers.\nmodel: embedded/echo\n---\n\nAnswer.\n"


def acting_as(client, user_id=MEMBER):
    session = client.session
    session[SESSION_USER] = user_id
    session.save()
    return client


@pytest.fixture
def acting(client, db):
    return acting_as(client)


def shown(client, url) -> str:
    return client.get(url).content.decode()


# ----------------------------------------------------------------------------- mail


def test_the_mail_page_sends_a_mail_and_goes_to_its_thread(acting, agents):
    agents()
    page = shown(acting, "/mail/")
    assert 'id="mail-send"' in page and 'action="/mail/send"' in page and "csrfmiddlewaretoken" in page
    answer = acting.post("/mail/send", {"to": "eng.alpha", "subject": "Build", "body": "Is it green?", "next": "/mail/"})
    thread = Thread.objects.get()
    assert answer.status_code == 302 and answer["Location"] == f"/mail/{thread.thread_id}/"
    assert thread.recipient == "eng.alpha" and thread.subject == "Build"
    followed = shown(acting, answer["Location"])
    assert f'<span id="state">{thread.state}</span>' in followed and 'hx-trigger="every 3s"' in followed


def test_a_refused_mail_shows_the_reason_beside_the_field_and_keeps_what_was_typed(acting, agents):
    agents()
    answer = acting.post("/mail/send", {"to": "eng.nobody", "subject": "Hi", "body": "kept text", "next": "/mail/"})
    assert answer.status_code == 302 and answer["Location"] == "/mail/"
    page = shown(acting, "/mail/")
    field = page.split('data-field="to"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="recipient-not-found"' in field and "recipient-not-found: " in field
    assert 'value="eng.nobody"' in field and ">kept text</textarea>" in page
    assert 'data-reason="recipient-not-found"' not in shown(acting, "/mail/")  # shown once
    fragment = acting.post("/mail/send", {"to": "eng.nobody", "body": "again", "next": "/mail/"}, **HX)
    text = fragment.content.decode()
    assert fragment.status_code == 200 and text.startswith('<form id="mail-send"')
    assert 'data-reason="recipient-not-found"' in text and ">again</textarea>" in text
    assert Thread.objects.count() == 0


def test_a_desk_sends_to_its_agent(acting, agents):
    agents()
    page = shown(acting, "/mail/desk/eng.alpha/")
    assert 'name="to" value="eng.alpha"' in page and 'name="next" value="/mail/desk/eng.alpha/"' in page
    answer = acting.post("/mail/send", {"to": "eng.alpha", "body": "from the desk", "next": "/mail/desk/eng.alpha/"}, **HX)
    thread = Thread.objects.get()
    assert answer.status_code == 204 and answer["HX-Redirect"] == f"/mail/{thread.thread_id}/"


@override_settings(WORKFORCE_AUTH="token")
def test_with_tokens_sending_mail_needs_the_mail_send_permission(client, agents, org, other_org):
    agents()
    bob = User.objects.create_user("bob", password="pw")
    Membership.objects.create(user=bob, organization=org)
    client.force_login(bob)
    client.post("/mail/send", {"to": "eng.alpha", "body": "hello", "next": "/mail/"})
    page = shown(client, "/mail/")
    assert 'data-reason="mail-send-not-permitted"' in page and "mail.send" in page
    assert Thread.objects.count() == 0
    bob.user_permissions.add(Permission.objects.get(codename="send", content_type__app_label="mail"))
    client.force_login(User.objects.get(pk=bob.pk))
    answer = client.post("/mail/send", {"to": "eng.alpha", "body": "hello", "next": "/mail/"})
    assert answer.status_code == 302 and Thread.objects.get().organization == org


# ----------------------------------------------------------------------------- boards


def test_the_board_page_files_a_task_and_shows_each_cards_fields(acting, open_tree, org):
    open_tree()
    page = shown(acting, "/boards/eng.incidents.followups/")
    assert 'id="file-task"' in page and "In progress" in page and ">in_progress<" not in page
    answer = acting.post(
        "/boards/eng.incidents.followups/file", {"title": "Postmortem", "goal": "Write it up", "assignee": "eng.lead"}
    )
    assert answer.status_code == 302 and answer["Location"] == "/boards/eng.incidents.followups/"
    task = BoardTask.objects.get()
    assert (task.title, task.goal, task.assignee, task.board_id) == (
        "Postmortem",
        "Write it up",
        "eng.lead",
        "eng.incidents.followups",
    )
    assert Request.objects.get(action="fileTask").user_id == MEMBER
    page = shown(acting, "/boards/eng.incidents.followups/")
    assert f"Filed {task.task_id}." in page
    card = page.split(f'id="task-{task.task_id}"', 1)[1].split("</li>", 1)[0]
    assert "Write it up" in card and "eng.lead" in card and "0 of " in card
    BoardTask.objects.filter(pk=task.pk).update(
        status="errored", error="it broke", run="eng.incidents.followups:eng.lead", completed_at=timezone.now()
    )
    card = shown(acting, "/boards/eng.incidents.followups/").split(f'id="task-{task.task_id}"', 1)[1].split("</li>", 1)[0]
    assert "it broke" in card and 'href="/sessions/eng.incidents.followups:eng.lead/"' in card
    assert "Act on this row" not in card  # no boardActions: true on eng.incidents


def test_a_refused_filing_is_shown_beside_its_field(acting, open_tree):
    open_tree()
    answer = acting.post("/boards/eng.incidents.followups/file", {"title": "Kept title", "goal": "  "}, **HX)
    text = answer.content.decode()
    goal = text.split('data-field="goal"', 1)[1].split("</div>", 1)[0]
    assert answer.status_code == 200 and 'data-reason="invalid-input"' in goal and "goal:" in goal
    assert 'value="Kept title"' in text and BoardTask.objects.count() == 0


def test_rows_are_settled_reassigned_and_cancelled_where_the_mailbox_has_board_actions(acting, open_tree, org):
    open_tree(ACTIONS_TREE)
    acting.post("/boards/eng.triage.queue/file", {"goal": "Sort it"})
    task = BoardTask.objects.get()
    page = shown(acting, "/boards/eng.triage.queue/")
    assert "Act on this row" in page and f'action="/boards/eng.triage.queue/tasks/{task.task_id}"' in page
    url = f"/boards/eng.triage.queue/tasks/{task.task_id}"
    answer = acting.post(url, {"op": "assign", "assignee": "eng.lead", "note": ""})
    assert answer.status_code == 302
    task.refresh_from_db()
    assert task.assignee == "eng.lead"
    refused = acting.post(url, {"op": "complete", "note": "done!", "assignee": "eng.lead"}, **HX).content.decode()
    assert 'data-reason="illegal_status_transition"' in refused and 'value="done!"' in refused  # a pending row
    acting.post(url, {"op": "cancel", "note": "not needed", "assignee": ""})
    task.refresh_from_db()
    assert task.status == "cancelled"
    assert acting.post("/boards/eng.incidents.followups/tasks/" + task.task_id, {"op": "cancel"}).status_code == 404


def _card(page: str, task_id: str) -> str:
    return page.split(f'id="task-{task_id}"', 1)[1].split("</li>", 1)[0]


def _buttons(card: str) -> list[str]:
    return [part.split('"', 1)[0] for part in card.split('name="op" value="')[1:]]


def test_each_card_offers_only_the_row_actions_legal_from_its_status(acting, open_tree, org):
    """The buttons follow the boards' transition table: pending blocks or cancels, blocked
    unblocks or cancels, in progress completes, fails or cancels; every open row reassigns.
    A refused move is said in words (the spec's code its reason), a success above the
    board, and without script a refused card's actions stay open with the refusal."""
    open_tree(ACTIONS_TREE)
    acting.post("/boards/eng.triage.queue/file", {"goal": "Sort it"})
    task = BoardTask.objects.get()
    url = f"/boards/eng.triage.queue/tasks/{task.task_id}"
    assert _buttons(_card(shown(acting, "/boards/eng.triage.queue/"), task.task_id)) == ["block", "cancel", "assign"]
    refused = acting.post(url, {"op": "complete", "note": "early", "assignee": ""}, **HX).content.decode()
    assert 'data-reason="illegal_status_transition"' in refused
    assert "A pending row can&#x27;t be completed; it can be blocked, cancelled or reassigned." in refused
    assert "completeTask_" not in refused and 'value="early"' in refused
    acting.post(url, {"op": "complete", "note": "early", "assignee": ""})  # without script: the card opens on it
    card = _card(shown(acting, "/boards/eng.triage.queue/"), task.task_id)
    assert "<details open>" in card and 'data-reason="illegal_status_transition"' in card and 'value="early"' in card
    blocked = acting.post(url, {"op": "block", "note": "waiting on legal", "assignee": ""}, **HX).content.decode()
    task.refresh_from_db()
    assert task.status == "blocked" and 'id="row-done"' in blocked and 'hx-swap-oob="true"' in blocked
    assert _buttons(blocked) == ["unblock", "cancel", "assign"]
    acting.post(url, {"op": "unblock", "note": "", "assignee": ""})
    task.refresh_from_db()
    assert task.status == "pending" and f"Unblocked {task.task_id}; it is now pending." in shown(
        acting, "/boards/eng.triage.queue/"
    )
    reassigned = acting.post(url, {"op": "assign", "note": "", "assignee": "eng.lead"}, **HX).content.decode()
    assert f"Reassigned {task.task_id} to eng.lead." in reassigned.split('id="row-done"', 1)[1]
    do_claim_task(org, "eng.triage.queue", worker_key="eng.lead")  # as a drain claims it
    assert _buttons(_card(shown(acting, "/boards/eng.triage.queue/"), task.task_id)) == ["complete", "fail", "cancel", "assign"]
    failed = acting.post(url, {"op": "fail", "note": " ", "assignee": ""}, **HX).content.decode()
    note = failed.split('data-field="note"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="invalid-input"' in note and "error is required" in note


# ----------------------------------------------------------------------------- projects


def test_home_creates_a_project_and_its_room_adds_members(acting, open_tree, org):
    open_tree()
    assert 'id="project-create"' in shown(acting, "/")
    answer = acting.post("/projects/new", {"title": "Launch", "brief": "Ship it", "id": "launch", "members": "u_7, u_8"})
    assert answer.status_code == 302 and answer["Location"] == "/projects/launch/"
    project = Project.objects.get()
    assert project.owner_user_id == MEMBER and 'href="/projects/launch/"' in shown(acting, "/")
    room = shown(acting, "/projects/launch/")
    assert 'id="project-member"' in room
    acting.post("/projects/launch/members", {"member": "u_9"})
    assert sorted(project.members.values_list("user_id", flat=True)) == [MEMBER, "u_7", "u_8", "u_9"]
    assert "Added u_9." in shown(acting, "/projects/launch/")
    refused = acting.post("/projects/launch/members", {"member": "a:b"}, **HX).content.decode()
    assert 'data-field="member"' in refused and 'data-reason="invalid-input"' in refused.split('data-field="member"')[1]
    again = acting.post("/projects/new", {"title": "Again", "id": "launch"}, **HX).content.decode()
    assert 'data-reason="project-exists"' in again.split('data-field="id"')[1] and 'value="Again"' in again


def test_a_project_of_someone_else_is_404(client, open_tree, org):
    open_tree()
    acting_as(client, "u_other").post("/projects/new", {"title": "Theirs", "id": "theirs"})
    acting_as(client)
    assert client.post("/projects/theirs/members", {"member": "u_9"}).status_code == 404


# ----------------------------------------------------------------------------- roster


def test_your_roster_hires_forks_and_fires(acting, open_tree, org):
    open_tree()
    assert 'id="hire"' in shown(acting, "/roster/")
    acting.post("/roster/hire", {"id": "helper", "workerMd": GOOD_WORKER})
    assert Seat.objects.get(seat_id="helper").scope == "own" and "Hired helper." in shown(acting, "/roster/")
    acting.post("/roster/helper/fork", {"id": "helper-two"})
    assert Seat.objects.filter(seat_id="helper-two", scope="own").exists()
    acting.post("/roster/helper-two/fire", {})
    assert not Seat.objects.filter(seat_id="helper-two").exists()
    assert acting.post("/roster/nobody/fire", {}).status_code == 404


def test_a_refused_hire_lists_every_problem_beside_the_text(acting, open_tree):
    open_tree()
    bad = "---\ndescription: 7\nmodel: [x]\nnonsense: 1\n---\n"
    text = acting.post("/roster/hire", {"id": "helper", "workerMd": bad}, **HX).content.decode()
    field = text.split('data-field="workerMd"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="invalid-worker"' in field and field.count("<li>") >= 2
    assert "nonsense: 1" in field and 'value="helper"' in text
    assert not Seat.objects.filter(seat_id="helper").exists()


def test_a_refused_hire_shows_every_problem_once(acting, open_tree):
    """A bad flow does not hide a bad tool grant, and each problem is listed once (the
    message above the list does not repeat them)."""
    open_tree()
    robot = "---\ndescription: Refunds.\nmodel: embedded/echo\nflow: robot\ntools: [billing/refund]\n---\n\nRefund.\n"
    text = acting.post("/roster/hire", {"id": "refunder", "workerMd": robot}, **HX).content.decode()
    field = text.split('data-field="workerMd"', 1)[1].split("</div>", 1)[0]
    flow, grant = "names the kind &quot;robot&quot;", "names the tool server &quot;billing&quot;"
    assert field.count("<li>") == 2 and field.count(flow) == 1 and field.count(grant) == 1
    assert "2 problems. Nothing was written." in field and 'data-reason="invalid-worker"' in field
    assert not Seat.objects.filter(seat_id="refunder").exists()


# ----------------------------------------------------------------------------- cancel


def _running(org, user_id=MEMBER, mailbox="eng.standup"):
    first = do_run_action(org=org, kind="mailbox", session_id=mailbox, action="post", input={"body": "hi"}, user_id=user_id)
    parent = Session.objects.get(organization=org, session_id=mailbox)
    child = ensure_child_session(parent, f"{mailbox}:eng.lead", kind="agent", state={})
    return do_record_request(child, action="onMailboxPost", input={"body": "hi"}, user_id=user_id, running=True, parent=first)


def test_a_running_request_is_cancelled_from_the_busy_list(acting, open_tree, org):
    open_tree()
    run = _running(org)
    busy = shown(acting, "/mailboxes/eng.standup/busy")
    assert f'action="/requests/{run.request_id}/cancel"' in busy
    answer = acting.post(f"/requests/{run.request_id}/cancel", {"next": "/mailboxes/eng.standup/"})
    assert answer.status_code == 302 and answer["Location"] == "/mailboxes/eng.standup/"
    run.refresh_from_db()
    assert run.status == "aborted"
    again = acting.post(f"/requests/{run.request_id}/cancel", {}, **HX).content.decode()
    assert "cancelled" in again  # idempotent, as the API


def test_someone_elses_request_shows_no_cancel_and_is_404(acting, open_tree, org):
    open_tree()
    run = _running(org, user_id="u_other")
    assert "/cancel" not in shown(acting, "/mailboxes/eng.standup/busy")
    assert acting.post(f"/requests/{run.request_id}/cancel", {}).status_code == 404


# ----------------------------------------------------------------------------- CSRF, other orgs


def test_every_form_needs_its_csrf_token(db, open_tree, agents):
    open_tree(ACTIONS_TREE)
    strict = acting_as(Client(enforce_csrf_checks=True))
    for url, data in [
        ("/mail/send", {"to": "eng.alpha", "body": "x"}),
        ("/boards/eng.incidents.followups/file", {"goal": "x"}),
        ("/boards/eng.triage.queue/tasks/t_x", {"op": "cancel"}),
        ("/projects/new", {"title": "x"}),
        ("/projects/p/members", {"member": "u_1"}),
        ("/roster/hire", {"id": "x", "workerMd": GOOD_WORKER}),
        ("/roster/x/fork", {"id": "y"}),
        ("/roster/x/fire", {}),
        ("/requests/r_x/cancel", {}),
        ("/conversations/new", {"worker": "support.help"}),
        ("/sessions/support.help:u_42/delegates", {"op": "add", "worker": "x"}),
        ("/mail/desk/eng.alpha/chat", {"message": "x"}),
    ]:
        assert strict.post(url, data).status_code == 403, url
    assert BoardTask.objects.count() == Project.objects.count() == Thread.objects.count() == 0


@override_settings(WORKFORCE_AUTH="token")
def test_another_organizations_objects_are_404(client, open_tree, org, other_org):
    open_tree(ACTIONS_TREE)
    do_run_action(
        org=org, kind="mailbox", session_id="eng.triage", action="fileTask", input={"board": "queue", "goal": "x"}, user_id=MEMBER
    )
    task = BoardTask.objects.get()
    run = _running(org, user_id="bob")
    bob = User.objects.create_user("bob", password="pw")
    Membership.objects.create(user=bob, organization=org)
    client.force_login(bob)
    client.post("/projects/new", {"title": "Ours", "id": "ours"})
    alice = User.objects.create_user("alice", password="pw")
    Membership.objects.create(user=alice, organization=other_org)
    client.force_login(alice)
    assert client.post("/boards/eng.triage.queue/file", {"goal": "x"}).status_code == 404
    assert client.post(f"/boards/eng.triage.queue/tasks/{task.task_id}", {"op": "cancel"}).status_code == 404
    assert client.post("/projects/ours/members", {"member": "alice"}).status_code == 404
    assert client.post(f"/requests/{run.request_id}/cancel", {}).status_code == 404
    assert BoardTask.objects.count() == 1 and Request.objects.get(pk=run.pk).status == "running"


# ----------------------------------------------------------------------------- conversations


@pytest.fixture
def desk(make_tree, org):
    from tests.conftest import hire_tree
    from tests.coordinators.conftest import desk_tree

    return hire_tree(make_tree(desk_tree(delegates=("support.devices",))))


def test_home_starts_a_conversation_and_its_page_changes_the_delegates(acting, desk, org):
    home = shown(acting, "/")
    assert 'id="conversation-start"' in home and "<code>support.help</code>" in home
    answer = acting.post("/conversations/new", {"worker": "support.help", "sessionId": ""})
    assert answer.status_code == 302 and answer["Location"] == f"/sessions/support.help:{MEMBER}/"
    url = answer["Location"]
    page = shown(acting, url)
    assert 'data-worker="support.devices"' in page and 'id="fallback">none<' in page
    acting.post(url + "delegates", {"op": "add", "worker": "support.accounts", "note": "billing"})
    acting.post(url + "delegates", {"op": "fallback", "worker": "support.accounts", "note": ""})
    page = shown(acting, url)
    assert 'data-worker="support.accounts"' in page and 'id="fallback">support.accounts<' in page and "billing" in page
    removed = acting.post(url + "delegates", {"op": "remove", "worker": "support.devices"}, **HX).content.decode()
    assert 'data-worker="support.devices"' not in removed and "remove: support.devices." in removed
    refused = acting.post(url + "delegates", {"op": "add", "worker": "support.nobody", "note": "x"}, **HX).content.decode()
    field = refused.split('data-field="worker"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="worker-not-on-roster"' in field and 'value="support.nobody"' in field
    assert 'value="x"' in refused


def test_a_refused_start_is_shown_beside_the_worker(acting, desk):
    text = acting.post("/conversations/new", {"worker": "support.devices", "sessionId": "later"}, **HX).content.decode()
    assert 'data-reason="worker-not-on-roster"' in text.split('data-field="worker"', 1)[1]
    assert 'value="later"' in text


def test_a_refused_conversation_post_keeps_what_was_typed(acting, desk):
    url = acting.post("/conversations/new", {"worker": "support.help", "sessionId": ""})["Location"]
    refused = acting.post(url + "post", {"message": "z" * 33_000}, **HX)
    assert "HX-Trigger" not in refused and b'data-reason="invalid-input"' in refused.content
    assert acting.post(url + "post", {"message": "   "}).status_code == 302
    form = shown(acting, url).split('id="post-form"', 1)[1].split("</form>", 1)[0]
    assert ">   </textarea>" in form and 'data-reason="invalid-input"' in form and "hx-on:posted=" in form


def test_a_conversation_name_held_by_another_is_refused_beside_the_name(acting, desk, org):
    """The API takes any name without ":" (``Bad Name!`` too); a name whose session is held
    by another conversation is refused (``session-not-addressable``) beside the Name field."""
    taken = acting.post("/conversations/new", {"worker": "support.help", "sessionId": "Bad Name!"})
    assert taken["Location"] == f"/sessions/support.help:{MEMBER}:Bad%20Name!/"
    Session.objects.create(organization=org, session_id=f"support.help:{MEMBER}:held", flow_kind="mailbox", user_id=MEMBER)
    text = acting.post("/conversations/new", {"worker": "support.help", "sessionId": "held"}, **HX).content.decode()
    field = text.split('data-field="sessionId"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="session-not-addressable"' in field and 'value="held"' in field
    assert "form-error" not in text


def test_another_persons_conversation_is_404(client, desk, org):
    acting_as(client, "u_other").post("/conversations/new", {"worker": "support.help"})
    acting_as(client)
    url = "/sessions/support.help:u_other/"
    assert client.get(url).status_code == 404
    assert client.post(url + "delegates", {"op": "add", "worker": "support.devices"}).status_code == 404
    assert client.get(url + "busy").status_code == 404


# ----------------------------------------------------------------------------- chat


CHATTY = "---\ndescription: Chats.\nmodel: embedded/echo\nrun:\n  triggers: [chat]\n---\n\nAnswer.\n"


def test_a_desk_holds_the_persons_chat_with_its_agent(acting, agents, org):
    from mail.models import ChatRun

    agents({**MAIL_TREE, "teams/eng/workers/chatty/WORKER.md": CHATTY})
    page = shown(acting, "/mail/desk/eng.chatty/")
    assert (
        'id="chat-form"' in page
        and 'action="/mail/desk/eng.chatty/chat"' in page
        and "sse-connect" not in page.split('id="chat"')[1].split("</section>")[0]
    )
    answer = acting.post("/mail/desk/eng.chatty/chat", {"message": "hello there"}, **HX)
    text = answer.content.decode()
    session = Session.objects.get(session_id=f"chat:eng.chatty:{MEMBER}")
    assert (
        answer.status_code == 200 and 'id="chat"' in text and 'sse-connect="/sessions/chat:eng.chatty:u_42/events?after=' in text
    )
    assert session.user_id == MEMBER and ChatRun.objects.get().request.input["message"] == "hello there"
    plain = acting.post("/mail/desk/eng.chatty/chat", {"message": "again"})
    assert plain.status_code == 302 and plain["Location"] == "/mail/desk/eng.chatty/"
    silent = shown(acting, "/mail/desk/eng.alpha/")  # its run.triggers lack chat: no form, a sentence
    chat = silent.split('id="chat"', 1)[1].split("</section>", 1)[0]
    assert 'id="chat-form"' not in chat and "eng.alpha takes no chat" in chat
    refused = acting.post("/mail/desk/eng.alpha/chat", {"message": "kept words"}, **HX).content.decode()
    assert 'data-reason="trigger-not-allowed"' in refused and ">kept words</textarea>" in refused  # a page opened before
    acting_as(acting, "u_other")
    assert f"chat:eng.chatty:{MEMBER}" not in shown(acting, "/mail/desk/eng.chatty/")
    assert acting.get(f"/sessions/chat:eng.chatty:{MEMBER}/events").status_code == 404


@override_settings(WORKFORCE_AUTH="token")
def test_a_desk_chat_to_an_agent_with_no_desk_here_is_404(client, agents, org, other_org):
    """The desk's chat form answers like its page: an agent the caller cannot reach (another
    organization's person's own worker, or none) is 404, not a refusal beside the field."""
    from mail.models import ChatRun
    from seats.services import do_hire_worker

    agents()
    do_hire_worker(other_org, "carol", "eng.mine", CHATTY)
    eve = User.objects.create_user("eve", password="pw")
    Membership.objects.create(user=eve, organization=org)
    client.force_login(eve)
    assert client.get("/mail/desk/eng.mine/").status_code == 404
    for url in ("/mail/desk/eng.mine/chat", "/mail/desk/nobody.here/chat"):
        assert client.post(url, {"message": "x"}).status_code == 404
        assert client.post(url, {"message": "x"}, **HX).status_code == 404
    assert ChatRun.objects.count() == 0


def test_a_hire_refused_for_its_id_alone_is_shown_beside_the_id(acting, open_tree):
    open_tree()
    acting.post("/roster/hire", {"id": "Bad Id", "workerMd": GOOD_WORKER})
    page = shown(acting, "/roster/")
    field = page.split('data-field="id"', 1)[1].split("</div>", 1)[0]
    assert 'data-reason="invalid-worker"' in field and "is not a worker id" in field and 'value="Bad Id"' in field
    assert "Answers." in page.split('data-field="workerMd"', 1)[1].split("</div>", 1)[0]  # the text kept
