"""The pages' actions (docs/pages.md "The pages", "Acting from the pages"): one form, one
service call, the same one the API makes (``do_*``), with the API's refusal shown
beside the field it is about (``web.forms``). An object of another organization, or one
the person may not read, is 404, as on the API and the pages that show it.
"""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from boards.errors import ILLEGAL_STATUS_TRANSITION
from boards.models import BoardTask
from boards.naming import split_board_id, tool_suffix
from mailboxes.projects import do_add_project_member, do_create_project
from seats.queries import list_roster
from seats.services import do_fire_worker, do_fork_worker, do_hire_worker
from web.htmx import HtmxHttpRequest
from workforce.cancelling import do_cancel_request
from workforce.facets import OPEN_SESSION
from workforce.principals import Principal
from workforce.refusals import Refusal
from workforce.sessions import do_run_action

from .forms import FormState, from_refusal, refused, respond, typed
from .queries import (
    ADD_DELEGATE,
    REMOVE_DELEGATE,
    ROW_OPS,
    SET_FALLBACK,
    board_actions_context,
    busy_runs,
    conversation_workers,
    desk_chat,
    keeps_delegates,
    list_delegates_of,
    list_workers,
    mail_desk,
    room_context,
    row_refusal_message,
)
from .views import _board, _mail, _mailbox, _project, _session, page

MAIL_FIELDS = ("to", "subject", "body")
FILE_FIELDS = ("title", "goal", "assignee")
TASK_FIELDS = ("assignee", "note")
PROJECT_FIELDS = ("title", "brief", "id", "members")
HIRE_FIELDS = ("id", "workerMd")
# The flashed form that carries a row action's success to the board page (no script).
ROW_DONE = "row_done"


def _back(request: HtmxHttpRequest, default: str) -> str:
    """The page a form came from (its ``next`` field), when it is on this site."""
    wanted = request.POST.get("next") or ""
    if wanted and url_has_allowed_host_and_scheme(wanted, allowed_hosts={request.get_host()}):
        return wanted
    return default


def _row_refused(form: FormState, row, fields: tuple[str, ...], by_reason=None) -> bool:
    """Place a failed request's ``error`` on ``form``; True when it failed."""
    if row is None or row.status != "failed":
        return False
    error = row.error or {}
    refused(form, error.get("reason", "failed"), error.get("message", "failed"), fields, by_reason)
    return True


# ----------------------------------------------------------------------------- mail


@require_POST
@page
def mail_send(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """Send a mail (the Mail page's and each desk's form): ``do_send_person_mail``, as
    ``POST /api/mail``; with ``WORKFORCE_AUTH=token`` the user needs ``mail.send``. On
    success, to the new thread's page."""
    mail = _mail()
    form = typed(request, "mail_send", MAIL_FIELDS)
    back = _back(request, reverse("web:mail"))
    user = request.user if getattr(request.user, "is_authenticated", False) else None
    go = None
    try:
        thread = mail.send(
            principal, user, to=form.values["to"].strip(), subject=form.values["subject"] or None, body=form.values["body"]
        )
    except Refusal as refusal:
        from_refusal(form, refusal, MAIL_FIELDS, {"recipient-not-found": "to"})
    else:
        form.done = f"Sent {thread['thread']}."
        go = reverse("web:mail-thread", args=[thread["thread"]])
    return respond(request, form, page_url=back, fragment="web/forms/mail_send.html", context={"next": back}, go=go)


# ----------------------------------------------------------------------------- boards


@require_POST
@page
def board_file(request: HtmxHttpRequest, principal: Principal, board_id: str) -> HttpResponse:
    """File a task on a board (title, goal, assignee): the holding mailbox's
    ``fileTask``, as ``POST /api/flows/mailbox/{id}/actions/fileTask``."""
    mailbox_id = _board(principal, board_id)
    session = _mailbox(principal, mailbox_id)
    form = typed(request, "file_task", FILE_FIELDS)
    payload = {"board": split_board_id(board_id)[1], "goal": form.values["goal"]}
    payload.update({key: form.values[key] for key in ("title", "assignee") if form.values[key].strip()})
    row = do_run_action(
        org=principal.org,
        kind=session.flow_kind,
        session_id=mailbox_id,
        action="fileTask",
        input=payload,
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    if not _row_refused(form, row, FILE_FIELDS, {"unknown-assignee": "assignee"}):
        form = FormState(name="file_task", done=f"Filed {(row.output or {}).get('taskId')}.")
    page_url = reverse("web:board", args=[board_id])
    return respond(request, form, page_url=page_url, fragment="web/forms/file_task.html", context={"board_id": board_id})


@require_POST
@page
def board_task(request: HtmxHttpRequest, principal: Principal, board_id: str, task_id: str) -> HttpResponse:
    """Act on a row where its mailbox has ``boardActions: true``: complete (with an
    output), fail (with an error), block or unblock, cancel, or reassign it: the mailbox's
    task-tool action (``completeTask_<suffix>`` and the like) on its own session, as the
    API runs it. A refused move is said in words (``row_refusal_message``), its reason
    the spec's code; a success is said above the board (``row-done``), which survives the
    board's live re-render."""
    mailbox_id = _board(principal, board_id)
    session = _mailbox(principal, mailbox_id)
    task = BoardTask.objects.filter(organization=principal.org, board_id=board_id, task_id=task_id).first()
    if task is None or not board_actions_context(mailbox_id)["actions"]:
        raise Http404(f"No row {task_id!r} to act on.")
    form = typed(request, f"task-{task_id}", TASK_FIELDS)
    op = request.POST.get("op", "")
    assignee = form.values["assignee"].strip() or None
    payload: dict[str, object] = {"taskId": task_id}
    if op == "assign":
        tool = "assignTask"
        payload["assignee"] = assignee
    elif op in ROW_OPS:
        row_op = ROW_OPS[op]
        tool = row_op.tool
        payload.update(row_op.extra)
        if row_op.note is not None and form.values["note"].strip():
            payload[row_op.note] = form.values["note"]
    else:
        raise Http404(f"No row action {op!r}.")
    row = do_run_action(
        org=principal.org,
        kind=session.flow_kind,
        session_id=mailbox_id,
        action=f"{tool}_{tool_suffix(board_id)}",
        input=payload,
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    task.refresh_from_db()
    # An argument refused (the action's own check says invalid-input, the tool's
    # invalid_arguments) is about the field it came from: the assignee or the note.
    about = "assignee" if op == "assign" else "note"
    by_reason = {"unknown_assignee": "assignee", "invalid_arguments": about, "invalid-input": about}
    context = {"task": task, "board_id": board_id}
    page_url = reverse("web:board", args=[board_id])
    if _row_refused(form, row, TASK_FIELDS, by_reason):
        if form.reason == ILLEGAL_STATUS_TRANSITION:
            form.error = row_refusal_message(op, task.status)
        return respond(request, form, page_url=page_url, fragment="web/forms/task_actions.html", context=context)
    if op == "assign":
        done = f"Reassigned {task_id} to {assignee or 'anyone'}."
    else:
        done = f"{ROW_OPS[op].past.capitalize()} {task_id}; it is now {task.status.replace('_', ' ')}."
    if request.htmx:  # the card's form afresh, and the message above the board (out of band)
        fresh = FormState(name=f"task-{task_id}")
        return respond(
            request, fresh, page_url=page_url, fragment="web/forms/task_actions.html", context={**context, "row_done": done}
        )
    return respond(request, FormState(name=ROW_DONE, done=done), page_url=page_url, fragment="web/forms/task_actions.html")


# ----------------------------------------------------------------------------- projects


@require_POST
@page
def project_create(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """Create a project (title, brief, id, members separated by commas or spaces):
    ``do_create_project`` with the owner's talk session readied, as ``POST
    /api/projects``. On success, to its room."""
    form = typed(request, "project_create", PROJECT_FIELDS)
    members = [m for m in form.values["members"].replace(",", " ").split() if m]
    go = None
    try:
        project, _ = do_create_project(
            principal.org,
            owner=principal.user_id,
            title=form.values["title"].strip(),
            brief=form.values["brief"],
            project_id=form.values["id"].strip() or None,
            members=members,
            ready_talk=True,
        )
    except Refusal as refusal:
        by_reason = {"project-exists": "id", "member-not-in-organization": "members"}
        from_refusal(form, refusal, PROJECT_FIELDS, by_reason)
        if form.field == "" and "member" in refusal.message:
            form.field = "members"
    else:
        go = reverse("web:room", args=[project.project_id])
    return respond(request, form, page_url=reverse("web:home"), fragment="web/forms/project_create.html", go=go)


@require_POST
@page
def project_member(request: HtmxHttpRequest, principal: Principal, project_id: str) -> HttpResponse:
    """Add a member to a project (its owner only): ``do_add_project_member``, as ``POST
    /api/projects/{id}/members``."""
    project = _project(principal, project_id)
    form = typed(request, "project_member", ("member",))
    try:
        do_add_project_member(principal.org, project.project_id, user_id=form.values["member"].strip(), by=principal.user_id)
    except Refusal as refusal:
        from_refusal(form, refusal, ("member",), {"member-not-in-organization": "member", "invalid-input": "member"})
    else:
        form = FormState(name="project_member", done=f"Added {form.values['member'].strip()}.")
    page_url = reverse("web:room", args=[project.project_id])
    context = {"project": project, "members": room_context(project, principal.user_id)["members"]}
    return respond(request, form, page_url=page_url, fragment="web/forms/project_member.html", context=context)


# ----------------------------------------------------------------------------- roster


def _roster_context(principal: Principal) -> dict:
    return {"principal": principal, "roster": list_roster(principal.org, principal.user_id)}


@require_GET
@page
def roster(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """Your roster: your own workers, the organization's and the standard ones (the
    scope rule), with the hire, fork and fire forms."""
    return render(request, "web/roster.html", _roster_context(principal))


@require_POST
@page
def roster_hire(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """Hire a worker of your own from a ``WORKER.md`` text: ``do_hire_worker``, as
    ``POST /api/workers``; every problem of the text is listed at once."""
    form = typed(request, "hire", HIRE_FIELDS)
    try:
        seat = do_hire_worker(principal.org, principal.user_id, form.values["id"].strip(), form.values["workerMd"])
    except Refusal as refusal:
        from_refusal(form, refusal, HIRE_FIELDS, {"worker-already-on-roster": "id"})
        if refusal.reason == "invalid-worker":
            id_only = [p for p in form.problems if p.startswith("id:")]
            form.field = "id" if id_only and len(id_only) == len(form.problems) else "workerMd"
    else:
        form = FormState(name="hire", done=f"Hired {seat.seat_id}.")
    return _roster_answer(request, principal, form)


def _roster_answer(request: HtmxHttpRequest, principal: Principal, form: FormState) -> HttpResponse:
    """The roster page answers every form with the whole roster (a hire, fork or fire
    changes its list)."""
    if request.htmx:
        return render(request, "web/_roster.html", {**_roster_context(principal), "forms": {form.name: form}})
    return respond(request, form, page_url=reverse("web:roster"), fragment="web/_roster.html")


@require_POST
@page
def roster_fork(request: HtmxHttpRequest, principal: Principal, worker: str) -> HttpResponse:
    """Fork a worker on your roster into one of your own: ``do_fork_worker``, as ``POST
    /api/workers/{worker}/fork``."""
    form = typed(request, f"fork-{worker}", ("id",))
    try:
        seat = do_fork_worker(principal.org, principal.user_id, worker, form.values["id"].strip() or None)
    except Refusal as refusal:
        if refusal.reason == "worker-not-on-roster":
            raise Http404(refusal.message) from None
        from_refusal(form, refusal, ("id",), {"invalid-worker": "id", "worker-already-on-roster": "id"})
    else:
        form = FormState(name=f"fork-{worker}", done=f"Forked into {seat.seat_id}.")
    return _roster_answer(request, principal, form)


@require_POST
@page
def roster_fire(request: HtmxHttpRequest, principal: Principal, worker: str) -> HttpResponse:
    """Fire a worker of your own: ``do_fire_worker``, as ``DELETE /api/workers/{worker}``."""
    form = FormState(name=f"fire-{worker}")
    try:
        do_fire_worker(principal.org, principal.user_id, worker)
    except Refusal as refusal:
        if refusal.reason == "worker-not-on-roster":
            raise Http404(refusal.message) from None
        from_refusal(form, refusal, ())
    else:
        form = FormState(name="hire", done=f"Fired {worker}.")
    return _roster_answer(request, principal, form)


# ----------------------------------------------------------------------------- cancel


@require_POST
@page
def request_cancel(request: HtmxHttpRequest, principal: Principal, request_id: str) -> HttpResponse:
    """Cancel a running request (its owner only): ``do_cancel_request``, as ``POST
    /api/requests/{id}/cancel``. Not yours, or not here: 404 (the page offers no cancel
    for a request that is not yours)."""
    form = FormState(name=f"cancel-{request_id}")
    try:
        do_cancel_request(principal.org, request_id, user_id=principal.user_id)
    except Refusal as refusal:
        if refusal.reason in ("request-not-found", "not-request-owner"):
            raise Http404(refusal.message) from None
        from_refusal(form, refusal, ())
    else:
        form.done = "cancelled"
    back = _back(request, reverse("web:home"))
    context = {"request_id": request_id, "next": back}
    return respond(request, form, page_url=back, fragment="web/forms/cancel.html", context=context)


# ----------------------------------------------------------------------------- conversations


@require_POST
@page
def conversation_start(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """Start (or reopen) your conversation with a coordinator (worker, an optional name
    for a further one): the kind's ``OPEN_SESSION`` (``do_ensure_worker_session``), as
    ``POST /api/workers/{worker}/sessions``. On success, to the conversation."""
    form = typed(request, "conversation_start", ("worker", "sessionId"))
    worker = form.values["worker"].strip()
    seat = next((s for s in list_workers(principal) if s.seat_id == worker), None)
    opener = OPEN_SESSION.of(seat.kind) if seat is not None else None
    go = None
    if opener is None:
        message = f'No worker "{worker}" on your roster that a conversation is started with.'
        refused(form, "worker-not-on-roster", f"worker-not-on-roster: {message}", ("worker",), {"worker-not-on-roster": "worker"})
    else:
        try:
            session, _ = opener(principal.org, principal.user_id, worker, session_id=form.values["sessionId"].strip() or None)
        except Refusal as refusal:
            by_reason = {"worker-not-on-roster": "worker", "invalid-input": "sessionId", "session-not-addressable": "sessionId"}
            from_refusal(form, refusal, ("worker", "sessionId"), by_reason)
        else:
            go = reverse("web:conversation", args=[session.session_id])
    context = {"conversation_workers": conversation_workers(principal)}
    return respond(
        request, form, page_url=reverse("web:home"), fragment="web/forms/conversation_start.html", context=context, go=go
    )


@require_POST
@page
def conversation_delegates(request: HtmxHttpRequest, principal: Principal, session_id: str) -> HttpResponse:
    """Add (worker, note) or remove a delegate, or set (worker) or clear (empty) the
    fallback of your coordinator conversation: its ``addDelegate``, ``removeDelegate``
    and ``setFallback`` actions, as the API runs them. Another's conversation: 404."""
    session = _session(principal, session_id)
    if not keeps_delegates(session):
        raise Http404("This conversation keeps no delegates.")
    form = typed(request, "delegates", ("worker", "note"))
    op = request.POST.get("op", "")
    worker = form.values["worker"].strip()
    payload: dict[str, str | None]
    if op == "add":
        action, payload = ADD_DELEGATE, {"worker": worker, **({"note": form.values["note"]} if form.values["note"] else {})}
    elif op == "remove":
        action, payload = REMOVE_DELEGATE, {"worker": worker}
    elif op == "fallback":
        action, payload = SET_FALLBACK, {"worker": worker or None}
    else:
        raise Http404(f"No delegate action {op!r}.")
    row = do_run_action(
        org=principal.org,
        kind=session.flow_kind,
        session_id=session.session_id,
        action=action,
        input=payload,
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    listed = row.output if row.status == "completed" else None
    if not _row_refused(form, row, ("worker", "note"), {}):
        form = FormState(name="delegates", done=f"{op}: {worker or 'cleared'}.")
    elif form.field == "":
        form.field = "worker"  # every delegate refusal is about the worker named
    page_url = reverse("web:conversation", args=[session.session_id])
    context = {"session": session, "delegates": listed or list_delegates_of(session, principal)}
    return respond(request, form, page_url=page_url, fragment="web/forms/delegates.html", context=context)


@require_GET
@page
def conversation_busy(request: HtmxHttpRequest, principal: Principal, session_id: str) -> HttpResponse:
    """Who is working now in a conversation (a delegate's run), each run of yours with
    a Cancel button."""
    session = _session(principal, session_id)
    back = reverse("web:conversation", args=[session.session_id])
    return render(request, "web/_busy.html", {"runs": busy_runs(session, principal), "back": back})


# ----------------------------------------------------------------------------- chat


@require_POST
@page
def desk_chat_post(request: HtmxHttpRequest, principal: Principal, agent: str) -> HttpResponse:
    """A chat turn with the desk's agent: the mail reader's ``chat`` (``do_start_chat``),
    as ``POST /api/workers/{worker}/chat``. The answer arrives over the chat's stream.
    An agent with no desk in the caller's organization is 404, as its page is."""
    mail = _mail()
    if mail_desk(mail, principal, agent) is None:
        raise Http404(f"No agent {agent!r}.")
    form = typed(request, "chat", ("message",))
    try:
        mail.chat(
            principal.org,
            user_id=principal.user_id,
            worker=agent,
            message=form.values["message"],
            posted_by=principal.posted_by,  # the page's principal: the form's own fields are all it reads
        )
    except Refusal as refusal:
        from_refusal(form, refusal, ("message",), {"invalid-input": "message"})
    else:
        form = FormState(name="chat", done="sent")
    context = {"agent": agent, "chat": desk_chat(mail, principal, agent)}
    page_url = reverse("web:mail-desk", args=[agent])
    return respond(request, form, page_url=page_url, fragment="web/_desk_chat.html", context=context)
