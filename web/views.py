"""The pages (docs/pages.md "The pages"): thin views over the kernel's and the apps' reads and
the one way an action runs (``workforce.sessions.do_run_action``).

Who is acting: with ``WORKFORCE_AUTH=token`` the logged-in user (Django's login at
``/accounts/login/``) in its organization; in development (``none``) the user id the
person typed on ``/who``, kept in their browser session, in the default organization.
Every read goes through the organization and the read rule; another organization's
mailbox or board is 404.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from mailboxes.projects import access_project, mint_talk_session_id
from mailboxes.queries import access_mailbox_session
from web.htmx import HtmxHttpRequest
from workforce.api.throttles import principal_wait, retry_after, throttled
from workforce.models import Item, Session
from workforce.principals import Principal, access_held, resolve_principal
from workforce.queries import access_session, list_items
from workforce.refusals import Refusal
from workforce.sessions import do_run_action
from workforce.streams import carried_item, item_events, release_connection, room_topic

from .forms import FormState, refused, respond
from .live import html_event, state_events
from .queries import (
    CONVERSATION_POST_ACTION,
    MESSAGE_ITEM,
    POST_ITEM,
    ROUTE_ITEM,
    board_actions_context,
    board_rows,
    board_signature,
    busy_runs,
    conversation_items,
    conversation_workers,
    desk_chat,
    list_conversations,
    list_delegates_of,
    list_mailboxes,
    list_rooms,
    list_workers,
    mail_desk,
    mail_reader,
    room_context,
    room_lines,
    room_signature,
    room_talk_sessions,
    takes_posts,
    window_items,
)

SESSION_USER = "workforce_user_id"


class NotActing(Exception):
    """Nobody is acting yet: the page sends the person to ``/who`` or the login."""


def acting(request: HtmxHttpRequest) -> Principal:
    """The principal the page acts as.

    Raises:
        NotActing: no user chosen (development) or not logged in (token auth).
        Refusal: what ``resolve_principal`` refuses (a user with no organization).
    """
    if settings.WORKFORCE_AUTH == "none":
        user_id = request.session.get(SESSION_USER)
        if not user_id:
            raise NotActing()
        return resolve_principal(request, user_id)
    if not request.user.is_authenticated:
        raise NotActing()
    return resolve_principal(request, None)


def _who_url(request: HtmxHttpRequest) -> str:
    if settings.WORKFORCE_AUTH == "none":
        return f"{reverse('web:who')}?{urlencode({'next': request.get_full_path()})}"
    return f"{settings.LOGIN_URL}?{urlencode({'next': request.get_full_path()})}"


def page(view):
    """Resolve who is acting before ``view(request, principal, ...)``; nobody yet: to
    ``/who`` (or the login)."""

    def wrapped(request: HtmxHttpRequest, *args, **kwargs):
        try:
            principal = acting(request)
        except NotActing:
            return redirect(_who_url(request))
        except Refusal as refusal:
            return render(request, "web/refused.html", {"refusal": refusal}, status=refusal.http_status)
        if request.method == "POST":
            # A form's action counts against the API's write rates, as the same call there.
            wait = principal_wait(principal, getattr(request, "user", None))
            if wait is not None:
                limited = throttled(wait)
                refused = "web/_refused.html" if getattr(request, "htmx", False) else "web/refused.html"
                answer = render(request, refused, {"refusal": limited}, status=limited.http_status)
                answer["Retry-After"] = retry_after(wait)
                return answer
        try:
            return view(request, principal, *args, **kwargs)
        except Refusal as refusal:
            # A refusal the view does not show in its form (a post past the backlog's
            # bound, workforce.backlog): the refused page, at its status, with Retry-After;
            # to htmx only its message, which web.js swaps into the form's status.
            template = "web/_refused.html" if getattr(request, "htmx", False) else "web/refused.html"
            answer = render(request, template, {"refusal": refusal}, status=refusal.http_status)
            if refusal.retry_after is not None:
                answer["Retry-After"] = str(refusal.retry_after)
            return answer

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


def _mailbox(principal: Principal, mailbox_id: str):
    try:
        return access_mailbox_session(principal.org, mailbox_id, reader=principal.reader)
    except Refusal:
        raise Http404(f"No mailbox {mailbox_id!r}.") from None


def _board(principal: Principal, board_id: str) -> str:
    """The mailbox holding ``board_id``, when the principal may read it."""
    for entry in list_mailboxes(principal.org, reader=principal.reader):
        if board_id in entry.boards:
            return entry.mailbox_id
    raise Http404(f"No board {board_id!r}.")


@require_http_methods(["GET", "POST"])
def who(request: HtmxHttpRequest) -> HttpResponse:
    """Development mode: ask which user id to act as (kept in the browser session)."""
    if settings.WORKFORCE_AUTH != "none":
        return redirect(settings.LOGIN_URL)
    next_url = request.POST.get("next") or request.GET.get("next") or reverse("web:home")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        next_url = reverse("web:home")
    error = ""
    typed = request.session.get(SESSION_USER) or ""  # a refused id is shown again as typed
    if request.method == "POST":
        typed = request.POST.get("userId", "")
        user_id = typed.strip()
        try:
            resolve_principal(request, user_id)
        except Refusal as refusal:
            error = refusal.message
        else:
            request.session[SESSION_USER] = user_id
            return redirect(next_url)
    return render(request, "web/who.html", {"next": next_url, "error": error, "typed": typed})


@require_GET
@page
def home(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """The organization's mailboxes, workers and boards."""
    mailboxes = list_mailboxes(principal.org, reader=principal.reader)
    context = {
        "principal": principal,
        "mailboxes": mailboxes,
        "workers": list_workers(principal),
        "boards": [(board, entry.mailbox_id) for entry in mailboxes for board in entry.boards],
        "conversations": list_conversations(principal),
        "conversation_workers": conversation_workers(principal),
        "rooms": list_rooms(principal),
    }
    return render(request, "web/home.html", context)


@require_GET
@page
def mailbox(request: HtmxHttpRequest, principal: Principal, mailbox_id: str) -> HttpResponse:
    """A mailbox: its transcript (live), a post form, who is working now, and its route
    decisions apart from the lines."""
    session = _mailbox(principal, mailbox_id)
    cursor = session.item_seq  # first: every item at or below it is shown, the stream sends the rest
    context = {
        "principal": principal,
        "mailbox_id": mailbox_id,
        "state": session.state,
        "cursor": cursor,
        "lines": window_items(session, cursor=cursor, component=POST_ITEM),
        "routes": window_items(session, cursor=cursor, component=ROUTE_ITEM),
        "runs": busy_runs(session, principal),
        "back": reverse("web:mailbox", args=[mailbox_id]),
    }
    return render(request, "web/mailbox.html", context)


def partials_event(preview: dict, shown: list[dict]) -> str:
    """The pages' ``partial`` event: every answer being written now (``shown``), as the
    ``#partials`` list's HTML (``workforce.previews``); an ended one is gone from it."""
    return html_event("partial", render_to_string("web/_partials.html", {"partials": shown}))


Fragment = tuple[str, str]  # an HTML event's name and its HTML


def page_stream_items(
    session: Session, item_types: list[str], fragment: Callable[[Item], Fragment | None]
) -> tuple[Callable[[int, int], list[tuple[int, Fragment | None]]], Callable[[int, str], Fragment | None]]:
    """A page stream's ``read`` and ``carried`` (``workforce.streams.item_events``): the
    session's items of ``item_types`` past a cursor, read, or as a note carried one
    (``carried_item``), each as ``fragment(item)`` (an event's name and HTML, None for
    none); the templates use an item's ``seq``, ``type``, ``component`` and ``data``,
    which a carried item has as the row has them.

    Args:
        session: a session the caller may read (``access_session``).
    """
    types = frozenset(item_types)

    def read(cursor: int, limit: int) -> list[tuple[int, Fragment | None]]:
        try:
            rows = list(list_items(session, item_types=item_types, after=cursor, limit=limit))
            return [(row.seq, fragment(row)) for row in rows]
        finally:
            release_connection()

    def carried(seq: int, text: str) -> Fragment | None:
        type_, component, data, _request_id, created_at = carried_item(text)
        if type_ not in types:
            return None
        return fragment(Item(session_id=session.pk, seq=seq, type=type_, component=component, data=data, created_at=created_at))

    return read, carried


def _fragment_event(seq: int, fragment: Fragment | None) -> str | None:
    return None if fragment is None else html_event(fragment[0], fragment[1], id=seq)


def _item_fragment(item: Item) -> tuple[str, str] | None:
    if item.component == POST_ITEM:
        return "line", render_to_string("web/_line.html", {"item": item})
    if item.component == ROUTE_ITEM:
        return "route", render_to_string("web/_route.html", {"item": item})
    return None


@require_GET
@page
def mailbox_events(request: HtmxHttpRequest, principal: Principal, mailbox_id: str) -> StreamingHttpResponse:
    """The mailbox page's stream: each new line (``event: line``) and route decision
    (``event: route``) as HTML, ``id: <seq>`` (``Last-Event-ID`` resumes), and the
    answers its seats are writing (``event: partial``, ``partials_event``)."""
    session = _mailbox(principal, mailbox_id)
    last = request.headers.get("Last-Event-ID", "") or request.GET.get("after", "")
    after = int(last) if last.isascii() and last.isdigit() and len(last) < 19 else session.item_seq

    read, carried = page_stream_items(session, ["component"], _item_fragment)
    held = access_held(request, principal, lambda: _mailbox(principal, mailbox_id))
    events = item_events(
        session.pk, after=after, read=read, render=_fragment_event, partial=partials_event, carried=carried, still_allowed=held
    )
    return _event_stream(events)


@require_GET
@page
def mailbox_busy(request: HtmxHttpRequest, principal: Principal, mailbox_id: str) -> HttpResponse:
    """Who is working now (the runs the mailbox's posts started that have not finished)."""
    session = _mailbox(principal, mailbox_id)
    back = reverse("web:mailbox", args=[mailbox_id])
    return render(request, "web/_busy.html", {"runs": busy_runs(session, principal), "back": back})


@require_POST
@page
def mailbox_post(request: HtmxHttpRequest, principal: Principal, mailbox_id: str) -> HttpResponse:
    """The post form (htmx): runs the mailbox's ``post`` as the acting user; the line
    itself arrives over the page's stream."""
    _mailbox(principal, mailbox_id)
    payload = {"body": request.POST.get("body", "")}
    if request.POST.get("author"):
        payload["author"] = request.POST["author"]
    row = do_run_action(
        org=principal.org,
        kind="mailbox",
        session_id=mailbox_id,
        action="post",
        input=payload,
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    return _post_answer(request, row, field="body", page_url=reverse("web:mailbox", args=[mailbox_id]))


POSTED = "posted"  # the event a post form clears its text on (HX-Trigger): only a post that was taken


def _post_answer(request: HtmxHttpRequest, row, *, field: str, page_url: str) -> HttpResponse:
    """The answer to a page's post form (a mailbox's, a conversation's, a room's).

    With htmx: the post's status (``web/_post_status.html``, 200 either way), and
    ``HX-Trigger: posted`` only when the post was taken, which is what the form clears its
    text on: a refused post keeps what was typed. Without script: back to the page with
    the form's state flashed (``web.forms``): the refusal beside the text, the text kept.
    """
    failed = row is None or row.status == "failed"
    if request.htmx:
        answer = render(request, "web/_post_status.html", {"row": row})
        if not failed:
            answer["HX-Trigger"] = POSTED
        return answer
    form = FormState(name="post", values={field: request.POST.get(field, "")})
    if failed:
        error = (row.error if row is not None else None) or {}
        refused(form, error.get("reason", "failed"), error.get("message", "failed"), ())
    else:
        form = FormState(name="post", done="posted")
    return respond(request, form, page_url=page_url, fragment="web/_post_status.html")


@require_GET
@page
def board(request: HtmxHttpRequest, principal: Principal, board_id: str) -> HttpResponse:
    """A board's rows by status, updating live."""
    mailbox_id = _board(principal, board_id)
    context = {
        "principal": principal,
        "board_id": board_id,
        "mailbox_id": mailbox_id,
        "signature": board_signature(principal.org, board_id),
        "columns": board_rows(principal.org, board_id),
        **board_actions_context(mailbox_id),
    }
    return render(request, "web/board.html", context)


@require_GET
@page
def board_events(request: HtmxHttpRequest, principal: Principal, board_id: str) -> StreamingHttpResponse:
    """The board page's stream: the whole board (``event: board``) each time its rows
    change, from the page's ``since`` signature on."""
    extra = {"board_id": board_id, **board_actions_context(_board(principal, board_id))}
    org = principal.org

    def read() -> tuple[str, str]:
        try:
            signature = board_signature(org, board_id)
            html = render_to_string("web/_board_columns.html", {"columns": board_rows(org, board_id), **extra})
            return signature, html
        finally:
            release_connection()

    held = access_held(request, principal, lambda: _board(principal, board_id))
    return _event_stream(state_events(read, since=request.GET.get("since", ""), event="board", still_allowed=held))


def _session(principal: Principal, session_id: str):
    try:
        return access_session(principal.org, session_id, reader=principal.reader)
    except Refusal:
        raise Http404(f"No session {session_id!r}.") from None


@require_GET
@page
def conversation(request: HtmxHttpRequest, principal: Principal, session_id: str) -> HttpResponse:
    """A conversation (a coordinator's, or a seat's in a mailbox): its messages, each
    answer under its agent's name (a delegate's worker id), live; its notes (route
    decisions) apart; a post form when its kind takes posts."""
    session = _session(principal, session_id)
    cursor = session.item_seq
    messages, notes = conversation_items(session, cursor=cursor)
    context = {
        "principal": principal,
        "session": session,
        "cursor": cursor,
        "messages": messages,
        "notes": notes,
        "takes_posts": takes_posts(session),
        "delegates": list_delegates_of(session, principal),
        "runs": busy_runs(session, principal),
        "back": reverse("web:conversation", args=[session.session_id]),
    }
    return render(request, "web/conversation.html", context)


def _conversation_fragment(item: Item) -> tuple[str, str]:
    if item.type == MESSAGE_ITEM:
        return "message", render_to_string("web/_message.html", {"item": item})
    return "note", render_to_string("web/_note.html", {"item": item})


@require_GET
@page
def conversation_events(request: HtmxHttpRequest, principal: Principal, session_id: str) -> StreamingHttpResponse:
    """The conversation page's stream: each new message (``event: message``) and note
    (``event: note``) as HTML, ``id: <seq>``, and the answers being written in it or its
    delegates' sessions (``event: partial``, ``partials_event``)."""
    session = _session(principal, session_id)
    last = request.headers.get("Last-Event-ID", "") or request.GET.get("after", "")
    after = int(last) if last.isascii() and last.isdigit() and len(last) < 19 else session.item_seq

    read, carried = page_stream_items(session, [MESSAGE_ITEM, "component"], _conversation_fragment)
    held = access_held(request, principal, lambda: _session(principal, session_id))
    events = item_events(
        session.pk, after=after, read=read, render=_fragment_event, partial=partials_event, carried=carried, still_allowed=held
    )
    return _event_stream(events)


@require_POST
@page
def conversation_post(request: HtmxHttpRequest, principal: Principal, session_id: str) -> HttpResponse:
    """The conversation's post form (htmx): its kind's ``run`` with ``{message}``."""
    session = _session(principal, session_id)
    if not takes_posts(session):
        raise Http404("This conversation takes no posts.")
    row = do_run_action(
        org=principal.org,
        kind=session.flow_kind,
        session_id=session.session_id,
        action=CONVERSATION_POST_ACTION,
        input={"message": request.POST.get("message", "")},
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    return _post_answer(request, row, field="message", page_url=reverse("web:conversation", args=[session.session_id]))


def _project(principal: Principal, project_id: str):
    """The project, when the principal is one of its members (anyone else: 404)."""
    if principal.reader is None:
        raise Http404(f"No project {project_id!r}.")
    try:
        return access_project(principal.org, project_id, reader=principal.reader)
    except Refusal:
        raise Http404(f"No project {project_id!r}.") from None


@require_GET
@page
def room(request: HttpRequest, principal: Principal, project_id: str) -> HttpResponse:
    """A project's room (docs/rooms.md "Projects and rooms"): its title, brief, members, charter
    and seats, its lines (each under its author: the person, or the seat that answered),
    live, and a post form. Members only."""
    project = _project(principal, project_id)
    signature = room_signature(project)  # first: the stream sends what lands after it
    context = {
        "principal": principal,
        "project": project,
        "signature": signature,
        "lines": room_lines(project),
        **room_context(project, principal.user_id),
    }
    return render(request, "web/room.html", context)


@require_GET
@page
def room_events(request: HtmxHttpRequest, principal: Principal, project_id: str) -> StreamingHttpResponse:
    """The room page's stream: the room's lines (``event: room``) each time one lands,
    from the page's ``since`` signature on, and the seats' answers being written
    (``event: partial``; members who join after the page opened: after a reload). Room lines are in no session's history: the
    stream is woken by the room's own note (``room_topic``) on PostgreSQL, and re-reads
    on SQLite."""
    project = _project(principal, project_id)

    def read() -> tuple[str, str]:
        try:
            signature = room_signature(project)
            return signature, render_to_string("web/_room_lines.html", {"lines": room_lines(project)})
        finally:
            release_connection()

    events = state_events(
        read,
        since=request.GET.get("since", ""),
        event="room",
        topic=room_topic(project.pk),
        previews=room_talk_sessions(project),
        partial=partials_event,
        still_allowed=access_held(request, principal, lambda: _project(principal, project_id)),
    )
    return _event_stream(events)


@require_POST
@page
def room_post(request: HtmxHttpRequest, principal: Principal, project_id: str) -> HttpResponse:
    """The room's post form (htmx): ``post {body}`` through the acting person's own talk
    session, joining one first (``join {projectId}`` on a fresh talk id) when the project
    lists none for them; the line arrives over the page's stream."""
    project = _project(principal, project_id)
    talk_session_id = room_context(project, principal.user_id)["talk_session_id"]
    row = None
    if talk_session_id is None:
        row = do_run_action(
            org=principal.org,
            kind="mailbox",
            session_id=mint_talk_session_id(),
            action="join",
            input={"projectId": project.project_id},
            user_id=principal.user_id,
            posted_by=principal.posted_by,
        )
        talk_session_id = (row.output or {}).get("sessionId") if row.status == "completed" else None
    if talk_session_id is not None:
        row = do_run_action(
            org=principal.org,
            kind="mailbox",
            session_id=talk_session_id,
            action="post",
            input={"body": request.POST.get("body", "")},
            user_id=principal.user_id,
            posted_by=principal.posted_by,
        )
    return _post_answer(request, row, field="body", page_url=reverse("web:room", args=[project.project_id]))


def _mail():
    reader = mail_reader()
    if reader is None:
        raise Http404("No mail here.")
    return reader


@require_GET
@page
def mail(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    """The organization's mail threads, newest first, with a link to each agent's desk."""
    threads = _mail().threads(principal.org)
    agents = sorted({t["to"] for t in threads} | {seat.seat_id for seat in list_workers(principal)})
    return render(request, "web/mail.html", {"principal": principal, "threads": threads, "agents": agents})


@require_GET
@page
def mail_thread(request: HtmxHttpRequest, principal: Principal, thread_id: str) -> HttpResponse:
    """One thread (``<agent>:<number>``): its messages and its ledger; another
    organization's thread is 404."""
    try:
        thread = _mail().thread(principal.org, thread_id)
    except Refusal:
        raise Http404(f"No mail {thread_id!r}.") from None
    return render(request, "web/mail_thread.html", {"principal": principal, "thread": thread})


@require_GET
@page
def mail_desk_page(request: HtmxHttpRequest, principal: Principal, agent: str) -> HttpResponse:
    """An agent's desk: the threads to it, by state."""
    desk = mail_desk(_mail(), principal, agent)
    if desk is None:
        raise Http404(f"No agent {agent!r}.")
    context = {"principal": principal, "agent": agent, "desk": desk, "chat": desk_chat(_mail(), principal, agent)}
    return render(request, "web/mail_desk.html", context)


def _event_stream(events) -> StreamingHttpResponse:
    response = StreamingHttpResponse(events, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
