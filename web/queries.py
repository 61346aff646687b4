"""What the pages read, always through the organization and the kernel's read rule
(docs/architecture.md "Apps", ``workforce.privacy``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Max

from boards.models import BoardTask, TaskStatus
from boards.naming import board_id_for
from boards.transitions import CALLS
from mailboxes.models import Project, RoomLine, TalkListing
from mailboxes.projects import list_projects
from mailboxes.queries import held_boards, is_mailbox_state
from mailboxes.rooms import room_template_view
from mailboxes.roster import current_roster
from seats.agent import KIND as AGENT_KIND
from seats.queries import list_seats, reachable_seats
from workforce.api.serializers import RunSerializer
from workforce.facets import MAIL_READER, OPEN_SESSION, PRIVATE_SESSIONS, MailReader
from workforce.flows import registry
from workforce.models import Item, Organization, Session
from workforce.principals import Principal
from workforce.privacy import PARENT_JOIN, may_read
from workforce.queries import list_active_runs
from workforce.sessions import do_run_action

MESSAGE_ITEM = "message"  # a conversation's messages (seats.turns.MESSAGE)
# A conversation page offers a post form when its kind takes this public action with
# {message} (a coordinator conversation's "run", spec 004 "Talking to one").
CONVERSATION_POST_ACTION = "run"
POST_ITEM = "mailbox-post"
ROUTE_ITEM = "mailbox-route"
# The page shows the newest this many lines and route decisions; older ones are in the
# transcript endpoint (GET /api/mailboxes/{id}/transcript).
PAGE_LINES = 200
# Board columns, in the order a row moves through them.
BOARD_COLUMNS = [
    TaskStatus.PENDING,
    TaskStatus.IN_PROGRESS,
    TaskStatus.BLOCKED,
    TaskStatus.PARKED,
    TaskStatus.COMPLETED,
    TaskStatus.ERRORED,
    TaskStatus.CANCELLED,
]


OPEN_STATUSES = (TaskStatus.PENDING, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED, TaskStatus.PARKED)


@dataclass(frozen=True)
class RowOp:
    """A board card's row action (``boardActions: true``): the task ``tool`` it calls,
    the ``call`` of ``boards.transitions.CALLS`` that moves the row (which statuses
    offer it), the input key the card's note goes to (None: the note is not sent), the
    ``button``'s words and the ``past`` a message says it with."""

    tool: str
    call: str
    note: str | None
    button: str
    past: str
    extra: tuple[tuple[str, object], ...] = ()


# The order the card shows them in. Reassign (assignTask) moves no row and is offered on
# every open row ("any row not yet finished"), so it is not here.
ROW_OPS: dict[str, RowOp] = {
    "complete": RowOp("completeTask", "completeTask", "output", "Complete", "completed"),
    "fail": RowOp("failTask", "failTask", "error", "Fail", "failed"),
    "block": RowOp("blockTask", "blockTask", "reason", "Block", "blocked"),
    "unblock": RowOp("blockTask", "unblock", None, "Unblock", "unblocked", (("unblock", True),)),
    "cancel": RowOp("cancelTask", "cancelTask", "reason", "Cancel row", "cancelled"),
}


def row_ops(status: str) -> list[tuple[str, RowOp]]:
    """The row actions a card in ``status`` offers: those whose call moves a row out of
    ``status`` in the boards' transition table (``boards.transitions.CALLS``); none for
    a finished row."""
    moving = {call.name for call in CALLS if call.tool and status in call.moves}
    return [(op, row_op) for op, row_op in ROW_OPS.items() if row_op.call in moving]


def row_refusal_message(op: str, status: str) -> str:
    """``illegal_status_transition`` in words for a person: what a row in ``status``
    can't be, and what it can be instead (from the same table as the buttons)."""
    said = status.replace("_", " ")
    tried = ROW_OPS[op].past if op in ROW_OPS else op
    if status not in OPEN_STATUSES:
        return f"This row is {said} and can't be changed any more."
    can = [row_op.past for _, row_op in row_ops(status)] + ["reassigned"]
    listed = ", ".join(can[:-1]) + f" or {can[-1]}" if len(can) > 1 else can[0]
    return f"A {said} row can't be {tried}; it can be {listed}."


@dataclass(frozen=True)
class MailboxEntry:
    mailbox_id: str
    description: str
    members: list[str]
    boards: list[str]


def list_mailboxes(org: Organization, *, reader: str | None) -> list[MailboxEntry]:
    """The opened mailboxes of ``org`` that ``reader`` may read, by id, with the boards
    each holds (their ledger ids)."""
    sessions = Session.objects.filter(organization=org, parent__isnull=True).exclude(flow_kind="channel").order_by("session_id")
    entries = []
    for session in sessions.select_related(PARENT_JOIN):
        if not is_mailbox_state(session.state) or not may_read(session, reader):
            continue
        entries.append(
            MailboxEntry(
                mailbox_id=session.session_id,
                description=session.state["description"],
                members=list(session.state["members"]),
                boards=[board_id_for(session.session_id, b) for b in held_boards(session)],
            )
        )
    return entries


def list_workers(principal: Principal) -> list:
    """The seats ``principal`` reaches (its own, its organization's, shared), by id."""
    ids = sorted({seat.seat_id for seat in list_seats()})
    reached = reachable_seats(principal.org.pk, principal.user_id, ids)
    return [reached[i] for i in ids if i in reached]


def busy_runs(session: Session, principal: Principal) -> list[dict]:
    """The session's active runs as ``GET /api/sessions/{id}/runs`` shows them, each
    with ``mine``: ``principal`` may cancel it (it runs as them, ``do_cancel_request``)."""
    rows = list(list_active_runs(session, reader=principal.reader))
    shown = RunSerializer(rows, many=True).data
    return [{**run, "mine": row.user_id == principal.user_id} for run, row in zip(shown, rows, strict=True)]


# A coordinator conversation's delegate actions (spec 004 "Changing the delegates"), run on
# the conversation's session as the API runs them.
LIST_DELEGATES, ADD_DELEGATE, REMOVE_DELEGATE, SET_FALLBACK = "listDelegates", "addDelegate", "removeDelegate", "setFallback"


def keeps_delegates(session: Session) -> bool:
    """True when the conversation's kind has the delegate actions (a coordinator's)."""
    flow = registry.get(session.flow_kind)
    return flow is not None and all(a in flow.actions for a in (LIST_DELEGATES, ADD_DELEGATE, REMOVE_DELEGATE, SET_FALLBACK))


def conversation_workers(principal: Principal) -> list:
    """The workers on ``principal``'s roster a conversation is started with (their kind
    has the ``OPEN_SESSION`` facet: coordinators), by id."""
    return [seat for seat in list_workers(principal) if OPEN_SESSION.of(seat.kind) is not None]


def list_delegates_of(session: Session, principal: Principal) -> dict | None:
    """A coordinator conversation's delegates as its ``listDelegates`` action answers
    them (``{delegates: [{worker, note?}], fallback: {worker} | None, max}``), run as
    ``principal`` like the API's call (it is recorded as a request); None when the
    kind keeps none or the action refused."""
    if not keeps_delegates(session):
        return None
    row = do_run_action(
        org=session.organization,
        kind=session.flow_kind,
        session_id=session.session_id,
        action=LIST_DELEGATES,
        input={},
        user_id=principal.user_id,
        posted_by=principal.posted_by,
    )
    return row.output if row.status == "completed" else None


def window_items(session: Session, *, cursor: int, component: str, limit: int = PAGE_LINES) -> list[Item]:
    """The newest ``limit`` items of ``component`` with ``seq <= cursor``, oldest first:
    what the page shows before its stream takes over after ``cursor``."""
    rows = list(Item.objects.filter(session=session, component=component, seq__lte=cursor).order_by("-seq")[:limit])
    rows.reverse()
    return rows


def board_rows(org: Organization, board_id: str) -> list[tuple[str, list[BoardTask]]]:
    """A board's rows by status, in ``BOARD_COLUMNS`` order (empty columns included)."""
    columns: dict[str, list[BoardTask]] = {status: [] for status in BOARD_COLUMNS}
    for task in BoardTask.objects.filter(organization=org, board_id=board_id).order_by("id"):
        columns.setdefault(task.status, []).append(task)
    return list(columns.items())


def board_actions_context(mailbox_id: str) -> dict:
    """``actions``: the mailbox says ``boardActions: true`` (its rows are settled,
    reassigned and cancelled from the board page); ``open_statuses``: the rows that can
    still be acted on (not finished)."""
    actions = any(m.id == mailbox_id and m.board_actions for m in current_roster().mailboxes)
    return {"actions": actions, "open_statuses": OPEN_STATUSES}


def board_signature(org: Organization, board_id: str) -> str:
    """Changes whenever a row of the board is filed or changes: its row count and the
    latest ``updated_at``."""
    agg = BoardTask.objects.filter(organization=org, board_id=board_id).aggregate(n=Count("id"), at=Max("updated_at"))
    return f"{agg['n']}:{agg['at'].isoformat() if agg['at'] else '-'}"


def list_conversations(principal: Principal) -> list[Session]:
    """``principal``'s own private conversations (sessions on a kind with the
    ``private_sessions`` facet, a coordinator's), newest first."""
    kinds = [name for name in registry.kinds() if PRIVATE_SESSIONS.of(name)]
    return list(
        Session.objects.filter(organization=principal.org, user_id=principal.user_id, flow_kind__in=kinds, parent__isnull=True)
        .order_by("-pk")
        .select_related(PARENT_JOIN)[:100]
    )


def takes_posts(session: Session) -> bool:
    """True when the conversation's kind has the public ``CONVERSATION_POST_ACTION``."""
    flow = registry.get(session.flow_kind)
    return flow is not None and CONVERSATION_POST_ACTION in flow.actions


def conversation_items(session: Session, *, cursor: int, limit: int = PAGE_LINES) -> tuple[list[Item], list[Item]]:
    """The newest ``limit`` messages and component items (its notes: route decisions and
    the like) with ``seq <= cursor``, each oldest first."""
    messages = list(Item.objects.filter(session=session, type=MESSAGE_ITEM, seq__lte=cursor).order_by("-seq")[:limit])
    notes = list(Item.objects.filter(session=session, type="component", seq__lte=cursor).order_by("-seq")[:limit])
    messages.reverse()
    notes.reverse()
    return messages, notes


def list_rooms(principal: Principal) -> list[Project]:
    """The projects whose room ``principal`` may read (those it is a member of), by id."""
    return list(list_projects(principal.org, reader=principal.reader))


def room_lines(project: Project, *, limit: int = PAGE_LINES) -> list[RoomLine]:
    """The room's newest ``limit`` lines, oldest first (a person's post, or a seat's
    answer with its ``author``)."""
    rows = list(RoomLine.objects.filter(project=project).order_by("-seq")[:limit])
    rows.reverse()
    return rows


def room_signature(project: Project) -> str:
    """Changes whenever a line lands in the room: its line count and last ``seq``."""
    agg = RoomLine.objects.filter(project=project).aggregate(n=Count("id"), last=Max("seq"))
    return f"{agg['n']}:{agg['last'] or 0}"


def room_talk_sessions(project: Project) -> list[int]:
    """The pks of the project's talk sessions: a seat answering a room's post runs in a
    conversation under the poster's, so the room page shows the answers being written
    there (``workforce.previews``)."""
    return list(TalkListing.objects.filter(project=project).values_list("session_id", flat=True))


def room_context(project: Project, user_id: str) -> dict:
    """What a room page shows besides its lines: ``members`` (by the order added),
    ``charter`` and ``seats`` (the room template's), and ``talk_session_id``, the talk
    session the project lists for ``user_id`` (None before they join)."""
    listing = TalkListing.objects.filter(project=project, user_id=user_id).select_related("session").first()
    return {
        "members": list(project.members.order_by("pk").values_list("user_id", flat=True)),
        "talk_session_id": listing.session.session_id if listing else None,
        **room_template_view(),
    }


def mail_reader() -> MailReader | None:
    """How the agents' mail reads (the agent kind's ``MAIL_READER`` facet, set by the mail
    app); None when no app set it (no Mail page then)."""
    return MAIL_READER.of(AGENT_KIND)


def desk_chat(reader: MailReader, principal: Principal, agent: str) -> dict:
    """The person's chat with ``agent`` as its desk shows it: ``session_id``,
    ``session`` (None before the first message), ``messages`` (the newest
    ``PAGE_LINES``, oldest first), ``cursor`` (the stream sends what comes after) and
    ``takes_chat`` (the agent's ``run.triggers`` include ``chat``: else no chat form)."""
    session_id = reader.chat_session_id(agent, principal.user_id)
    takes = reader.takes_chat(principal.org, user_id=principal.user_id, worker=agent)
    session = Session.objects.filter(organization=principal.org, session_id=session_id, user_id=principal.user_id).first()
    if session is None:
        return {"session_id": session_id, "session": None, "messages": [], "cursor": 0, "takes_chat": takes}
    messages, _ = conversation_items(session, cursor=session.item_seq)
    return {"session_id": session_id, "session": session, "messages": messages, "cursor": session.item_seq, "takes_chat": takes}


def mail_desk(reader: MailReader, principal: Principal, agent: str) -> list[tuple[str, list[dict]]] | None:
    """``agent``'s desk: the organization's threads to it, by state (every state, in the
    reader's order, empty ones included); None when ``agent`` is neither a worker
    ``principal`` reaches nor the recipient of any thread here."""
    threads = reader.threads(principal.org, recipient=agent, limit=1000)
    if not threads and agent not in {seat.seat_id for seat in list_workers(principal)}:
        return None
    desk: dict[str, list[dict]] = {state: [] for state in reader.states}
    for thread in threads:
        desk.setdefault(thread["state"], []).append(thread)
    return list(desk.items())
