"""Typed seams between the apps: the facets a flow kind carries (see the facet table
in ``docs/architecture.md``).

A facet is something one app puts on a kind and another reads, without importing it:
the mailbox kind's ``notify`` block is set by the composition root (built by
``mailboxes.notify``) and read by ``mailboxes.services.do_post_line``; the agent kind's
``post_turn`` is set by ``seats.agent`` and read by ``mailboxes.deliveries``. Each facet
here has a named key (the string stored in ``FlowKind.facets``) and a Protocol saying
what its value must be; read and write facets through them (``NOTIFY.get(flow)``,
``ROUTE.set(flow, route)``), never by a bare string.

The protocols name kernel types (sessions, requests, organizations, the notify input,
a transcript line as ``workforce.notify.PostLine``). A seat, a board row and a declared
worker are the apps' own models, which the kernel may not import, and an implementation
takes its app's model (a parameter typed wider here would refuse it): those stay ``Any``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypedDict, TypeVar

from .flows import ActionFamily, FlowKind, registry

if TYPE_CHECKING:  # pragma: no cover
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    from .models import Organization, Request, Session
    from .notify import NotifyInput, PostLine, RecentEntry
    from .posted_by import PostedBy
    from .principals import Principal
    from .refusals import Refusal
    from .sessions import ActionContext
    from .tools import Tool

T = TypeVar("T")


@dataclass(frozen=True)
class Facet(Generic[T]):
    """One facet: ``key`` in ``FlowKind.facets``, the Protocol (or type) its value
    satisfies, and the value a kind without it reads as (``default``)."""

    key: str
    protocol: Any
    default: Any = None
    doc: str = ""

    def get(self, flow: FlowKind | None) -> T | None:
        """The facet's value on ``flow`` (``default`` when unset or ``flow`` is None)."""
        if flow is None:
            return self.default
        return flow.facets.get(self.key, self.default)

    def of(self, kind: str) -> T | None:
        """The facet's value on the registered kind ``kind`` (``default`` when the kind
        is not registered)."""
        return self.get(registry.get(kind))

    def set(self, flow: FlowKind, value: T | None) -> None:
        """Put ``value`` in ``flow``'s facet (None clears it to unset)."""
        flow.facets[self.key] = value

    def set_on(self, kind: str, value: T | None) -> None:
        """``set`` on the registered kind ``kind``.

        Raises:
            Refusal("flow-not-found"): no such kind.
        """
        self.set(registry.require(kind), value)


# ----------------------------------------------------------------------------- protocols


class AnswerSlot(TypedDict):
    """What a turn answers, when its reply is a post's answer (a routed mailbox post;
    later a room's): ``postId`` the post answered, ``token`` the idempotency prefix its
    hand-overs are keyed by, so a turn run again hands its answer over once."""

    postId: str
    token: str


class Turn(Protocol):
    """What a kind's turn hands its caller (``seats.turns.TurnResult``): the reply, the
    error (a Refusal, or None), the request it is recorded in (None for a turn that
    started no model run: a coordinator's job that best fit placed, a delivery
    dispatched as a post), and ``finish()``, which the caller runs inside the
    transaction that settles its own work item."""

    reply: str
    error: Refusal | None

    @property
    def request(self) -> Request | None: ...

    def finish(self, *, output: dict | None = None) -> None: ...


class NotifyFacet(Protocol):
    """A mailbox kind's notify block (``mailboxes.notify.NotifyFanOut``)."""

    def __call__(self, ctx: ActionContext, line: PostLine) -> list:
        """Plan and hand out a post's deliveries, inside the post's transaction."""

    def deliver_routed(
        self, ctx: ActionContext, line: PostLine, member: str, recent: list[RecentEntry], *, seat: Any = None
    ) -> str:
        """Hand a routed post to its one member (``seat``: its seat as the route found
        it); returns what it got."""

    def run_block(self, mode: str, notify_input: NotifyInput) -> Any:
        """Run a delivery that is not a seat's turn (a fallback or plain block); what the
        block returned (any JSON value)."""


class RouteFacet(Protocol):
    """A mailbox kind's route (``mailboxes.routing.MailboxRoute``). Its ``line`` is a
    ``mailboxes.models.Line`` and its ``route`` a ``Route``: the app's own models."""

    def takes_post(self, ctx: ActionContext, line: Any) -> bool:
        """True when ``on_line`` will take the post, known before the line is written."""

    def ledger_append(self, line: Any, *, routed: bool) -> Any:
        """The ledger's append for the line's own statement (PostgreSQL), or None."""

    def on_line(self, ctx: ActionContext, line: Any, *, folded: Any = None) -> bool:
        """Keep the ledger (unless ``folded`` appended it); True when the route took the post."""

    def decide(self, route: Any) -> Any:
        """Where a route's post goes (outside any transaction)."""

    def fallback_problem(self, member: str) -> str | None:
        """Why ``member`` can't be a routed mailbox's fallback."""


class PostTurn(Protocol):
    """A worker kind's woken turn on a mailbox post (``seats.agent.hear_post``): runs
    the model outside any transaction in ``conversation`` (the seat's child session of
    ``mailbox``) and returns the Turn; the delivery (its caller) settles itself in the
    transaction that runs ``turn.finish()``. ``on_started(request)`` runs in the
    transaction that starts the turn; ``key`` prefixes the turn's idempotency keys;
    ``answer`` is set when the reply answers a routed post."""

    def __call__(
        self,
        *,
        seat: Any,
        mailbox: Session,
        conversation: Session,
        notify_input: NotifyInput,
        key: str,
        answer: AnswerSlot | None,
        on_started: Callable[[Request], None],
    ) -> Turn: ...


class BoardRowTurn(Protocol):
    """A worker kind's turn on one claimed board row (``seats.agent.work_board_row``);
    the drain (its caller) settles the row. A facet may also have ``begin`` (same
    arguments), which starts the turn inside the caller's transaction with no SAVEPOINT
    and returns an object whose ``run()`` runs it (``seats.agent.begin_board_row``):
    the drain then starts the turn in ``seats.turns.drive_turn``'s start step."""

    def __call__(self, *, task: Any, seat: Any, session: Session) -> Turn: ...


class OnTaskFiled(Protocol):
    """Told when ``fileTask`` filed a row (``seats.drains.on_task_filed``), inside its
    transaction."""

    def __call__(self, ctx: ActionContext, board_id: str, task: Any) -> object: ...


class ValidateWorker(Protocol):
    """A kind's own checks of what its workers declare, one sentence per problem
    (``coordinators.config.coordinator_worker_problems``)."""

    def __call__(self, worker: Any, workers: Iterable[Any]) -> list[str]: ...


class Capability(Protocol):
    """Tools every seat of a kind is offered whatever its ``tools:`` says
    (``seats.board_tools.board_task_capability``)."""

    def __call__(self, seat: Any) -> list[Tool]: ...


class MailReader(Protocol):
    """What a worker kind's mail reads like to an app that may not import the mail app
    (``mail.pages.IndexReader``, read by the web pages): plain dicts in the mail API's
    wire shape (``mail.queries.thread_wire``), one organization at a time."""

    states: tuple[str, ...]

    def threads(
        self, org: Organization, *, recipient: str | None = None, state: str | None = None, limit: int = 200
    ) -> list[dict]:
        """The organization's threads, newest first: ``thread_wire`` dicts."""

    def thread(self, org: Organization, thread_id: str) -> dict:
        """One thread with its ``messages`` and its ``ledger`` entries (in order).

        Raises:
            Refusal("thread-not-found"): no such thread in ``org``.
        """

    def send(
        self,
        principal: Principal,
        user: AbstractBaseUser | AnonymousUser | None,
        *,
        to: str,
        body: str,
        subject: str | None = None,
    ) -> dict:
        """A person's mail (the pages' send form), as ``POST /api/mail`` sends it; the
        new thread as a ``thread_wire`` dict.

        Raises:
            Refusal: the API's refusals (``mail-send-not-permitted`` and the like).
        """

    def chat(self, org: Organization, *, user_id: str, worker: str, message: str, posted_by: PostedBy) -> Request:
        """A person's chat turn with an agent, as ``POST /api/workers/{worker}/chat``
        starts it: the turn's request, running; ``posted_by`` is the page's principal's
        (``Principal.posted_by``), which the person's message item carries.

        Raises:
            Refusal: the API's refusals (``trigger-not-allowed`` and the like).
        """

    def chat_session_id(self, worker: str, user_id: str) -> str:
        """The person's chat session with ``worker``."""

    def takes_chat(self, org: Organization, *, user_id: str, worker: str) -> bool:
        """True when the person reaches ``worker`` and it takes chat (its
        ``run.triggers`` include ``chat``): the desk offers a chat form only then."""


class RequestOnFinished(Protocol):
    """A worker kind's ``request_on_finished`` (the spec's ``request.onFinished``;
    ``workforce.delegation.delegated_post_on_finished`` is the built-in one): asked,
    with how a delegated run ended (``"cancelled"``), whether the coordinator hears of
    it at once (True) or its round waits for its deadline (False). Called by
    ``workforce.delegation.reports_cancellation``, inside the transaction that settles
    the run's delivery: it must not write."""

    def __call__(self, outcome: str) -> bool: ...


# ----------------------------------------------------------------------------- the facets


MAILBOX: Facet[bool] = Facet("mailbox", bool, False, "the kind is a mailbox kind")
NOTIFY: Facet[NotifyFacet] = Facet("notify", NotifyFacet, None, "a mailbox kind's notify block")
ROUTE: Facet[RouteFacet] = Facet("route", RouteFacet, None, "a mailbox kind's route")
ON_TASK_FILED: Facet[OnTaskFiled] = Facet("on_task_filed", OnTaskFiled, None, "told when a row is filed")
WORKER: Facet[bool] = Facet("worker", bool, False, "a worker can run on the kind")
HEARS_POSTS: Facet[bool] = Facet("hears_posts", bool, False, "informational: the kind hears posts")
TOOL_CATALOG: Facet[dict] = Facet("tools", dict, None, "the tools a worker's tools: line is read against")
CAPABILITIES: Facet[list] = Facet("capabilities", list, None, "Capability functions of the kind")
POST_TURN: Facet[PostTurn] = Facet("post_turn", PostTurn, None, "the kind's woken turn on a mailbox post")
BOARD_ROW_TURN: Facet[BoardRowTurn] = Facet("board_row_turn", BoardRowTurn, None, "the kind's turn on a board row")
TAKES_TASKS: Facet[bool] = Facet("takes_tasks", bool, False, "the kind takes board tasks")
REQUEST_ON_FINISHED: Facet[RequestOnFinished] = Facet("request_on_finished", RequestOnFinished, None, "told when a request ends")
VALIDATE_WORKER: Facet[ValidateWorker] = Facet("validate_worker", ValidateWorker, None, "the kind's worker checks")
COORDINATOR: Facet[Any] = Facet("coordinator", object, None, "a coordinator kind's CoordinatorSetup")
STATE_FIELDS: Facet[tuple] = Facet("state_fields", tuple, (), "session state only the kind writes")
PRIVATE_SESSIONS: Facet[bool] = Facet("private_sessions", bool, False, "a session is its owner's only")
# A kind whose sessions are private one by one, by what they hold (a mailbox kind's talk
# session is its member's own; its mailboxes are the organization's): ``(Session) -> bool``.
PRIVATE_SESSION: Facet[Callable[[Session], bool]] = Facet(
    "private_session", object, None, "which of the kind's sessions are their owner's only"
)
# Whether a client's action call naming an id nobody holds creates the session: a bool,
# or ``(session_id, action) -> bool`` for a kind that creates some only (the mailbox kind:
# a talk address is created by ``join`` alone, so an id nobody holds answers every other
# action as another user's private session does: session-not-found).
CLIENT_CREATES_SESSIONS: Facet[bool | Callable[[str, str], bool]] = Facet(
    "client_creates_sessions", object, True, "an action call naming a new id creates the session"
)


def client_creates_session(flow: FlowKind | None, session_id: str, action: str) -> bool:
    """True when a client's ``action`` call on ``flow`` naming the id ``session_id``,
    which no session holds, creates it (``CLIENT_CREATES_SESSIONS``)."""
    value = CLIENT_CREATES_SESSIONS.get(flow)
    return bool(value(session_id, action)) if callable(value) else bool(value)


# How a person opens (or reopens) their session with a worker of the kind, as the API's
# POST /api/workers/{worker}/sessions does (the pages' "Start a conversation"):
# ``(org, user_id, worker, *, session_id=None) -> (Session, created)``.
OPEN_SESSION: Facet[Callable[..., Any]] = Facet("open_session", object, None, "how a person opens a session with a worker")
MAIL_READER: Facet[MailReader] = Facet("mail_reader", MailReader, None, "how a worker kind's mail reads (the Mail page)")
ACTION_FAMILIES: Facet[tuple[ActionFamily, ...]] = Facet(
    "action_families", tuple, (), "public actions named at run time (resolve), as the schema documents them"
)

ALL_FACETS: tuple[Facet, ...] = (
    MAILBOX,
    NOTIFY,
    ROUTE,
    ON_TASK_FILED,
    WORKER,
    HEARS_POSTS,
    TOOL_CATALOG,
    CAPABILITIES,
    POST_TURN,
    BOARD_ROW_TURN,
    TAKES_TASKS,
    REQUEST_ON_FINISHED,
    VALIDATE_WORKER,
    COORDINATOR,
    STATE_FIELDS,
    PRIVATE_SESSIONS,
    PRIVATE_SESSION,
    CLIENT_CREATES_SESSIONS,
    MAIL_READER,
    ACTION_FAMILIES,
    OPEN_SESSION,
)
