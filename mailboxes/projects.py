"""Projects and their members (spec "A room per project"): the write side
(``do_create_project``, ``do_add_project_member``), the reads (``access_project``,
``list_projects``), talk sessions readied for a member (``do_ready_talk_session``), and
the ``create-project`` tool a seat can hold.

A project's members are the people who can read and post in its room; the seats a post
wakes come from the room template (``Roster.room_template()``), never from here. A talk
session is a session on the built-in mailbox kind whose state is ``{"talk": {"projectId"}}``;
the project lists at most one per member (``TalkListing``). Talk session ids have no dot,
so they never collide with a mailbox id (``<team>.<mailbox>``).
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet

from workforce.contracts import in_callers_transaction
from workforce.facets import TOOL_CATALOG
from workforce.flows import registry
from workforce.models import Membership, Organization, Session
from workforce.principals import check_user_id
from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext, ToolResult, refuse, refused
from workforce.tree import name_problem
from workforce.wire import check_storable

from .models import Project, ProjectMember, TalkListing
from .roster import current_roster

MAILBOX_KIND = "mailbox"
TALK_KEY = "talk"
TALK_ID_PREFIX = "talk-"
CREATE_PROJECT = "create-project"
MAX_TITLE = 200


def talk_state(session: Session) -> dict | None:
    """``{"projectId": ...}`` when ``session`` is a bound talk session, else None."""
    state = session.state if isinstance(session.state, dict) else {}
    talk = state.get(TALK_KEY)
    return talk if isinstance(talk, dict) and isinstance(talk.get("projectId"), str) else None


def mint_talk_session_id() -> str:
    """A fresh talk session id, ``talk-<20 hex digits>`` (no dot: never a mailbox id)."""
    return f"{TALK_ID_PREFIX}{secrets.token_hex(10)}"


def unknown_project(project_id: str) -> Refusal:
    """The one refusal for a project a caller can't see: none with that id in the
    organization, or one the caller is not a member of (ids don't leak). A long id is
    shown cut (a message never echoes a whole input)."""
    shown = project_id if len(project_id) <= 80 else f"{project_id[:80]}..."
    return Refusal("no-such-project", f'No project "{shown}" in this organization.')


def check_members(org: Organization, members: list[str] | tuple[str, ...]) -> None:
    """Refuse a project member who is not a person of ``org``.

    Every member is a user id (``workforce.principals.USER_ID_RULE``). With
    ``WORKFORCE_AUTH=token`` a member is also the user name of an account whose
    ``Membership`` is in ``org``: a user of another organization, and a name nobody
    holds, get the same refusal, so the answer says nothing about other organizations.
    Without authentication every caller acts in the default organization, so any user
    id is one of its people.

    Raises:
        Refusal("invalid-input"): a member that is not a user id (400).
        Refusal("member-not-in-organization"): 404.
    """
    for member in members:
        check_user_id(member, label="member")
    if settings.WORKFORCE_AUTH == "none" or not members:
        return
    known = set(
        Membership.objects.filter(organization=org, user__username__in=list(members)).values_list("user__username", flat=True)
    )
    missing = [m for m in dict.fromkeys(members) if m not in known]
    if missing:
        raise Refusal(
            "member-not-in-organization",
            f'"{missing[0]}" is not a user of this organization; a project\'s members are its people.',
        )


def access_project(org: Organization, project_id: str, *, reader: str | None = None) -> Project:
    """The project ``project_id`` in ``org``; with ``reader``, only when that user is a
    member (another organization's project, or one the reader is not in, is not found:
    ids don't leak).

    Raises:
        Refusal("no-such-project").
    """
    qs = Project.objects.filter(organization=org, project_id=project_id)
    if reader is not None:
        qs = qs.filter(members__user_id=reader)
    project = qs.first()
    if project is None:
        raise unknown_project(project_id)
    return project


def list_projects(org: Organization, *, reader: str | None, after: str = "", limit: int = 100) -> QuerySet[Project]:
    """The projects ``reader`` is a member of, by id, after ``after``, at most ``limit``
    (none for a caller that named nobody)."""
    if reader is None:
        return Project.objects.none()
    qs = Project.objects.filter(organization=org, members__user_id=reader).order_by("project_id")
    if after:
        qs = qs.filter(project_id__gt=after)
    return qs[:limit]


def project_wire(project: Project, *, talk_session_id: str | None = None) -> dict:
    """``{id, title, brief, status, owner, members, createdAt, talkSessionId?}`` (members
    by the order they were added)."""
    data = {
        "id": project.project_id,
        "title": project.title,
        "brief": project.brief,
        "status": project.status,
        "owner": project.owner_user_id,
        "members": list(project.members.order_by("pk").values_list("user_id", flat=True)),
        "createdAt": project.created_at.isoformat(),
    }
    if talk_session_id:
        data["talkSessionId"] = talk_session_id
    return data


@in_callers_transaction
def do_ready_talk_session(project: Project, user_id: str) -> Session:
    """The talk session the project lists for ``user_id``, created (bound and listed) when
    there is none. Call inside a transaction."""
    listing = TalkListing.objects.select_related("session").filter(project=project, user_id=user_id).first()
    if listing is not None:
        return listing.session
    session = Session.objects.create(
        organization_id=project.organization_id,
        session_id=mint_talk_session_id(),
        flow_kind=MAILBOX_KIND,
        user_id=user_id,
        state={TALK_KEY: {"projectId": project.project_id}},
    )
    TalkListing.objects.create(project=project, user_id=user_id, session=session)
    return session


def do_create_project(
    org: Organization,
    *,
    owner: str,
    title: str,
    brief: str = "",
    project_id: str | None = None,
    members: list[str] | tuple[str, ...] = (),
    ready_talk: bool = False,
) -> tuple[Project, Session | None]:
    """Create a project owned by ``owner`` (its first member), with ``members`` added.

    With ``ready_talk`` the owner's talk session is readied in the same transaction
    (spec: "createProject does that with or without a template"; the API and the
    ``create-project`` tool pass it). A row written without it gets none, and its
    members reach the room through ``join``.

    Args:
        project_id: the project's id (the tree's name rule); default ``p-<10 hex digits>``.
        title: a line of text (at most 200 characters); brief: free text (at most
            ``WORKFORCE_MAX_TEXT_CHARS``, 32,000 characters).

    Returns:
        ``(project, talk session or None)``.

    Raises:
        Refusal("invalid-input"): a bad id, an empty title, or a member that is not a
            user id.
        Refusal("member-not-in-organization"): a member who is not a person of ``org``
            (``check_members``).
        Refusal("project-exists"): the id is taken by a project ``owner`` is a member of.
        Refusal("no-such-project"): the id is taken by a project ``owner`` is not a
            member of. Ids are unique in the organization, so that create can't
            succeed; it answers what ``GET /api/projects/{id}`` answers that caller
            (404, word for word), not a 409 that would say the project exists.
    """
    if not isinstance(title, str) or not title.strip() or len(title) > MAX_TITLE:
        raise Refusal("invalid-input", f"title: a project needs a title of 1 to {MAX_TITLE} characters.")
    brief = brief or ""
    if not isinstance(brief, str) or len(brief) > settings.WORKFORCE_MAX_TEXT_CHARS:
        # Every project listing carries the brief: a text is capped where it is taken.
        raise Refusal("invalid-input", f"brief: text of at most {settings.WORKFORCE_MAX_TEXT_CHARS} characters.")
    check_storable({"title": title, "brief": brief})
    project_id = project_id or f"p-{secrets.token_hex(5)}"
    problem = name_problem(project_id)
    if problem:
        raise Refusal("invalid-input", f"id: {problem}")
    people = [owner] + [m for m in dict.fromkeys(members) if m != owner]
    check_members(org, people[1:])
    try:
        with transaction.atomic():
            project = Project.objects.create(
                organization=org, project_id=project_id, title=title, brief=brief, owner_user_id=owner
            )
            ProjectMember.objects.bulk_create([ProjectMember(project=project, user_id=u, added_by=owner) for u in people])
            session = do_ready_talk_session(project, owner) if ready_talk else None
    except IntegrityError:
        taken = Project.objects.filter(organization=org, project_id=project_id)
        if taken.filter(members__user_id=owner).exists():
            raise Refusal("project-exists", f'A project "{project_id}" already exists in this organization.') from None
        if taken.exists():
            raise unknown_project(project_id) from None
        raise
    return project, session


def do_add_project_member(org: Organization, project_id: str, *, user_id: str, by: str) -> ProjectMember:
    """Add ``user_id`` to the project's members, as ``by`` (its owner). Idempotent: a
    member already in it is answered as it is. The new member reaches the room through
    ``join``.

    Raises:
        Refusal("no-such-project"): no such project, or ``by`` is not one of its members.
        Refusal("not-project-owner"): ``by`` is a member but not the owner.
        Refusal("invalid-input" | "member-not-in-organization"): ``user_id`` is not a
            person of ``org`` (``check_members``).
    """
    with transaction.atomic():
        project = access_project(org, project_id, reader=by)
        if project.owner_user_id != by:
            raise Refusal("not-project-owner", f"Only the project's owner ({project.owner_user_id}) adds its members.")
        check_members(org, [user_id])
        member, _ = ProjectMember.objects.get_or_create(project=project, user_id=user_id, defaults={"added_by": by})
    return member


# ----------------------------------------------------------------------------- the tool


def create_project_tool(ctx: ToolContext, args: dict) -> ToolResult:
    """The ``create-project`` tool (``{title, brief?}``): a project created from inside a
    flow turn, owned by the person the turn runs for (the conversation's owner). When a
    room template is in place, that person's talk session is readied in the same
    transaction (spec "A room per project")."""
    if not isinstance(args, dict) or set(args) - {"title", "brief"}:
        return refuse("invalid-input", "create-project takes {title, brief?}.")
    owner = ctx.session.user_id if ctx.session is not None else ctx.seat_id
    try:
        project, session = do_create_project(
            ctx.org,
            owner=owner,
            title=args.get("title") or "",
            brief=args.get("brief") or "",
            ready_talk=current_roster().room_template() is not None,
        )
    except Refusal as refusal:
        return refused(refusal)
    answer = {"ok": True, "projectId": project.project_id}
    if session is not None:
        answer["talkSessionId"] = session.session_id
    return answer


CREATE_PROJECT_TOOL = Tool(
    name=CREATE_PROJECT,
    description="Create a project for the person you are working for; they own it and can talk in its room.",
    parameters={
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "The project's title."},
            "brief": {"type": "string", "description": "What the project is for."},
        },
        "required": ["title"],
        "additionalProperties": False,
    },
    call=create_project_tool,
)


def configure_project_tool(kind: str = "agent") -> None:
    """Put ``create-project`` in worker kind ``kind``'s tool catalog (a worker's
    ``tools:`` can then name it). Idempotent; the composition root calls it at start-up.

    Raises:
        Refusal("flow-not-found"): no such kind.
    """
    flow = registry.require(kind)
    TOOL_CATALOG.set(flow, {**(TOOL_CATALOG.get(flow) or {}), CREATE_PROJECT: CREATE_PROJECT_TOOL})
