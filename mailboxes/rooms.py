"""A project's room, through its members' talk sessions (spec "A room per project").

A talk session is a session on the built-in mailbox kind bound to one project
(``mailboxes.projects``). The mailbox kind's actions on it are the room's:

- ``join {projectId}`` binds the session to the project and lists it for its owner
  when the project lists none for them yet; answers the listed session;
- ``post {body}``: a person's line in the room (``author`` is refused:
  ``author-on-a-person-post``); it wakes each of the template's seats once, as the
  person who posted, through the mailbox's delivery machinery (``mailboxes.notify``,
  ``mailboxes.deliveries``): one ``Delivery`` per seat per post, whose input carries
  the room's last 20 lines and the seat's ``answerToken``;
- ``read {after?}`` -> ``{projectId, lines, nextCursor, charter, seats}``;
- the internal ``answer {postId, body, author, token}``: a woken seat's reply, handed
  back through the poster's session with its token; at most one per seat per post; it
  wakes nobody.

A post or read through a session the project does not list for its owner is refused
``talk-session-not-listed`` and wakes nobody; a room action on one's own unbound talk
session (an id without a dot that a ``join`` created and did not bind) is
``talk-not-bound``. Another user's talk session, bound or not, and a talk address nobody
holds answer every action alike: the kernel's ``session-not-found`` (the mailbox kind's
``PRIVATE_SESSION`` and ``CLIENT_CREATES_SESSIONS`` in ``mailboxes.flow``). Room
lines are in their own table (``RoomLine``), numbered gap-free per project under the
project's row lock, and in no session's history: each one written wakes the room's open
page streams when it commits (``workforce.streams.notify_topic``). The template's seats and charter are
read from the roster each time, so an edit reaches every room at the next start.
"""

from __future__ import annotations

import secrets
import uuid

from django.db import IntegrityError, transaction
from django.db.models import Case, F, Max, OuterRef, Subquery, When
from django.db.models.functions import Coalesce

from workforce.facets import NOTIFY
from workforce.models import Session
from workforce.notify import NotifyInput, RecentEntry
from workforce.refusals import Refusal
from workforce.sessions import ActionContext, now_ms
from workforce.streams import notify_topic, room_topic

from .inventory import template_refusal
from .models import Delivery, Line, Project, ProjectMember, RoomLine, TalkListing
from .notify import NotifyFanOut, do_wake_seats
from .projects import TALK_KEY, talk_state, unknown_project
from .queries import is_mailbox_state
from .roster import current_roster

RECENT_LINES = 20
READ_LIMIT = 200


def is_talk_address(session_id: str) -> bool:
    """True for an id a talk session can have: no dot (a mailbox id is ``<team>.<name>``)."""
    return "." not in session_id


def is_room_session(session: Session) -> bool:
    """True when the mailbox kind's actions on ``session`` are the room's: it is a bound
    talk session, or an empty session at a talk address."""
    if talk_state(session) is not None:
        return True
    return not session.state and is_talk_address(session.session_id)


def _not_bound(session: Session) -> Refusal:
    return Refusal(
        "talk-not-bound",
        f'"{session.session_id}" is not bound to a project; call join {{projectId}} on it first.',
    )


def _listed_project(ctx: ActionContext, *, lock: bool) -> Project:
    """The project ``ctx.session`` is the listed talk session of, for its caller.

    Raises:
        Refusal("talk-not-bound" | "talk-session-not-listed" | "no-such-project").
    """
    session = ctx.session
    talk = talk_state(session)
    if talk is None:
        raise _not_bound(session)
    if lock:
        project = lock_project(ctx.org.pk, talk["projectId"])
    else:
        project = Project.objects.filter(organization=ctx.org, project_id=talk["projectId"]).first()
    if project is None:
        raise Refusal("no-such-project", f'The project "{talk["projectId"]}" no longer exists.')
    listed = TalkListing.objects.filter(project=project, user_id=session.user_id).values_list("session_id", flat=True).first()
    if ctx.user_id != session.user_id or listed != session.pk:
        raise Refusal(
            "talk-session-not-listed",
            f'"{session.session_id}" is not the talk session {project.project_id} lists for you; post and read through '
            "the one join returns.",
        )
    return project


def post_request_of(delivery: Delivery | None = None) -> Coalesce:
    """The id of the request that carried ``delivery``'s post, as one SQL expression:
    the mailbox line's request, or for a room's post (``RoomLine``, through the poster's
    talk session) the room line's. A delivery's turn takes it as its ``parent_request``,
    so ``GET /api/sessions/{mailbox or talk session}/runs?startedBy=<post request>``
    lists the wakes of a room post as it does a mailbox post's. Without ``delivery``, the
    expression reads the delivery row of the outer query (an annotation on
    ``Delivery``)."""
    mailbox_id = delivery.mailbox_id if delivery is not None else OuterRef("mailbox_id")
    post_id = delivery.post_id if delivery is not None else OuterRef("post_id")
    # By the unique ``line_id`` alone, the mailbox checked on the row found: with the
    # mailbox in the WHERE clause, a planner without statistics may walk every line of
    # the mailbox by its session index instead (the growth of a wake with the mailbox).
    line = (
        Line.objects.filter(line_id=post_id)
        .order_by()
        .values(r=Case(When(session_id=mailbox_id, then=F("request_id")), default=None))[:1]
    )
    room = (
        RoomLine.objects.filter(line_id=post_id)
        .order_by()
        .values(r=Case(When(session_id=mailbox_id, then=F("request_id")), default=None))[:1]
    )
    return Coalesce(Subquery(line), Subquery(room))


def lock_project(org_id: str, project_id: str) -> Project | None:
    """The project row, locked (``SELECT … FOR UPDATE``) until the transaction ends: the
    room's lock, under which its lines get their gap-free ``seq`` and a post gets at
    most one answer per seat. None when there is no such project."""
    return Project.objects.select_for_update().filter(organization_id=org_id, project_id=project_id).first()


def room_template_view() -> dict:
    """``{charter, seats}`` of the room template this process serves (empty without one)."""
    template = current_roster().room_template()
    return {"charter": template.charter if template else "", "seats": list(template.seats) if template else []}


# ----------------------------------------------------------------------------- join


def do_join(ctx: ActionContext, *, project_id: str) -> dict:
    """Bind ``ctx.session`` to ``project_id`` and list it for its owner when the project
    lists no talk session for them yet (``join``). Idempotent.

    Returns:
        ``{projectId, sessionId, listed, charter, seats}``: ``sessionId`` is the session
        the project lists for the caller (post and read through that one); ``listed`` says
        whether it is this one.

    Raises:
        Refusal("mailbox-is-a-template"): the id is a room template's.
        Refusal("talk-on-a-mailbox"): the session is (or can only be) a declared mailbox's.
        Refusal("no-such-project"): no such project in the organization, or the caller
            is not one of its members (one answer for both).
        Refusal("talk-bound-elsewhere"): the session is bound to another project.
        Refusal("talk-session-not-listed"): the session belongs to another user.
    """
    session = ctx.lock_session()
    roster = current_roster()
    if roster.template(session.session_id) is not None:
        raise template_refusal(session.session_id)
    if (
        roster.mailbox(session.session_id) is not None
        or is_mailbox_state(session.state)
        or not is_talk_address(session.session_id)
    ):
        raise Refusal(
            "talk-on-a-mailbox",
            f'"{session.session_id}" is a mailbox\'s address, not a talk session; join through a session id without a dot.',
        )
    if session.state and talk_state(session) is None:
        raise Refusal("talk-on-a-mailbox", f'"{session.session_id}" holds state that is not a talk session.')
    project = Project.objects.filter(organization=ctx.org, project_id=project_id).first()
    if project is None or not ProjectMember.objects.filter(project=project, user_id=ctx.user_id).exists():
        # A project the caller is not in is one they can't see: the same refusal as an
        # unknown id, as GET /api/projects/{id} answers them (ids don't leak).
        raise unknown_project(project_id)
    talk = talk_state(session)
    if talk is not None and talk["projectId"] != project_id:
        raise Refusal("talk-bound-elsewhere", f'"{session.session_id}" is bound to the project {talk["projectId"]}.')
    if session.user_id != ctx.user_id:
        raise Refusal("talk-session-not-listed", f'"{session.session_id}" belongs to another user; join through your own.')
    if talk is None:
        session.state = {TALK_KEY: {"projectId": project_id}}
        session.save(update_fields=["state", "updated_at"])
    try:
        with transaction.atomic():
            listing, _ = TalkListing.objects.get_or_create(project=project, user_id=ctx.user_id, defaults={"session": session})
    except IntegrityError:  # another join listed one for this member at the same moment
        listing = TalkListing.objects.get(project=project, user_id=ctx.user_id)
    listed = Session.objects.filter(pk=listing.session_id).values_list("session_id", flat=True).get()
    return {"projectId": project_id, "sessionId": listed, "listed": listed == session.session_id, **room_template_view()}


# ----------------------------------------------------------------------------- post and read


def _recent(project: Project, before_seq: int) -> list[RecentEntry]:
    """The room's last ``RECENT_LINES`` lines before ``before_seq``, oldest first, as
    ``{from, text}`` (``from``: the seat, or the person who posted)."""
    lines = list(RoomLine.objects.filter(project=project, seq__lt=before_seq).order_by("-seq")[:RECENT_LINES])
    return [{"from": line.author or line.user_id, "text": line.body} for line in reversed(lines)]


def _next_seq(project: Project) -> int:
    return (RoomLine.objects.filter(project=project).aggregate(last=Max("seq"))["last"] or 0) + 1


def do_post_room_line(ctx: ActionContext, *, body: str, author: str | None = None) -> dict:
    """A person's post in the room (``post`` on a talk session), then the wake of each of
    the template's seats, once each, as the poster (``wake_room_seats``).

    Returns:
        The line: ``{id, seq, at, userId, body}``.

    Raises:
        Refusal("author-on-a-person-post"): ``author`` was given.
        Refusal("talk-not-bound" | "talk-session-not-listed"): nothing is written and
            nobody is woken.
    """
    if author is not None:
        raise Refusal("author-on-a-person-post", "a post in a room is the person's own; it takes no author.")
    session = ctx.lock_session()
    if talk_state(session) is None:
        raise _not_bound(session)
    project = _listed_project(ctx, lock=True)
    seq = _next_seq(project)
    line = RoomLine.objects.create(
        project=project,
        seq=seq,
        line_id=str(uuid.uuid4()),
        at=now_ms(),
        user_id=session.user_id,
        body=body,
        posted_by=ctx.posted_by,  # the principal the view resolved: never the input's
        session=session,
        request=ctx.request,
    )
    notify_topic(room_topic(project.pk), seq)
    wake_room_seats(ctx, project, line)
    return line.as_wire()


def wake_room_seats(ctx: ActionContext, project: Project, line: RoomLine) -> list[Delivery]:
    """Hand ``line`` to each of the template's seats, once each, through the mailbox
    kind's notify block (``mailboxes.notify.do_wake_seats``). Each delivery's input is
    ``{mailboxId: the poster's talk session, member: the seat, postId, body, principal:
    the poster, projectId, recent: the room's last 20 lines, answerToken}``; the token is
    the seat's own, fresh per post and recorded with the delivery, so a redelivery, a
    sweep or a fan-out run again wakes the seat once with the same token. Inside the
    post's transaction; the tasks go with the commit."""
    seats = room_template_view()["seats"]
    notify = NOTIFY.get(ctx.flow)
    if not seats or not isinstance(notify, NotifyFanOut):  # (a mailbox kind's notify is one)
        return []
    recent = _recent(project, line.seq)

    def notify_input(seat: str) -> NotifyInput:
        return {
            "mailboxId": ctx.session.session_id,
            "member": seat,
            "postId": line.line_id,
            "body": line.body,
            "principal": line.user_id,
            "projectId": project.project_id,
            "recent": recent,
            "answerToken": f"ans_{secrets.token_hex(16)}",
        }

    return do_wake_seats(ctx, line.line_id, notify, seats=seats, notify_input=notify_input)


def do_read_room(ctx: ActionContext, *, after: int = 0) -> dict:
    """The room's lines after the cursor ``after`` (``read`` on a talk session).

    Returns:
        ``{projectId, lines, nextCursor, charter, seats}``: at most 200 lines, oldest
        first; ``nextCursor`` is the ``after`` of the next read (the last seq seen).

    Raises:
        Refusal("talk-not-bound" | "talk-session-not-listed").
    """
    project = _listed_project(ctx, lock=False)
    lines = list(RoomLine.objects.filter(project=project, seq__gt=after).order_by("seq")[:READ_LIMIT])
    return {
        "projectId": project.project_id,
        "lines": [line.as_wire() for line in lines],
        "nextCursor": lines[-1].seq if lines else after,
        **room_template_view(),
    }


# ----------------------------------------------------------------------------- the answer


def do_answer_room_post(ctx: ActionContext, *, post_id: str, body: str, author: str, token: str | None) -> dict:
    """A woken seat's answer to a room post (the mailbox kind's internal ``answer`` on a
    talk session): lands as ``{author: seat, userId: poster, seatAuthored}`` when
    ``token`` is the ``answerToken`` of ``author``'s delivery of ``post_id`` through this
    session (the poster's). At most one answer per seat per post: a second lands
    nothing (the project's row lock, and a unique constraint behind it). Wakes nobody.

    Returns:
        ``{"landed": true, "postId", "line"}`` or ``{"landed": false, "postId", "answerId"}``.

    Raises:
        Refusal("answer-token-refused"): no token, a forged author, a token for another
            seat, or a token through another member's session; nothing is written.
        Refusal("talk-not-bound" | "post-not-found").
    """
    session = ctx.lock_session()
    talk = talk_state(session)
    if talk is None:
        raise _not_bound(session)
    project = lock_project(ctx.org.pk, talk["projectId"])
    post = RoomLine.objects.filter(project=project, line_id=post_id, seat_authored=False).first() if project else None
    if project is None or post is None:
        raise Refusal("post-not-found", f'"{post_id}" is not a person\'s post in this room.')
    delivery = Delivery.objects.filter(mailbox=session, post_id=post_id, member=author).only("notify_input").first()
    expected = (delivery.notify_input or {}).get("answerToken") if delivery is not None else None
    if not token or not expected or not secrets.compare_digest(str(token), str(expected)):
        raise Refusal(
            "answer-token-refused",
            f"the answer to {post_id} does not carry {author}'s token for it through this session; nothing was posted.",
        )
    existing = RoomLine.objects.filter(answer_to=post, author=author).values_list("line_id", flat=True).first()
    if existing:
        return {"landed": False, "postId": post_id, "answerId": existing}
    try:
        with transaction.atomic():
            line = RoomLine.objects.create(
                project=project,
                seq=_next_seq(project),
                line_id=str(uuid.uuid4()),
                at=now_ms(),
                user_id=post.user_id,
                author=author,
                seat_authored=True,
                body=body,
                posted_by=ctx.posted_by,  # the seat whose turn dispatched the answer
                session=session,
                request=ctx.request,
                answer_to=post,
            )
            notify_topic(room_topic(project.pk), line.seq)
    except IntegrityError:
        existing = RoomLine.objects.filter(answer_to=post, author=author).values_list("line_id", flat=True).first()
        if existing is None:
            raise
        return {"landed": False, "postId": post_id, "answerId": existing}
    return {"landed": True, "postId": post_id, "line": line.as_wire()}
