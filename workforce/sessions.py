"""Running actions on sessions: one Request per call, items per session.

``do_run_action`` is the one way any action runs, whether a client called it over HTTP
or another flow dispatched it. It records a Request, runs the handler in the same
transaction, and records the outcome: completed with output in that transaction; or, when
the handler refuses or raises, that transaction is rolled back whole (so a Refusal leaves
nothing the action wrote) and the failed request (``{reason, message}``) is recorded in a
fresh one. The handler runs without a savepoint of its own: a savepoint costs two
statements on every action, the refused path one short transaction more.

A handler with work that must not run inside a transaction (a model call) returns
``AfterCommit(run)``: the action's transaction commits with its request still
``running``, then ``run()`` is called outside it and settles the request as a handler's
answer would (its output, or its refusal), unless the request was cancelled meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypedDict

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils import timezone

from . import org_cache, rows
from .backlog import check_backlog
from .contracts import in_callers_transaction
from .extras import ActionExtras
from .facets import client_creates_session
from .flows import Action, FlowKind, registry
from .models import Item, Organization, Request, Session
from .posted_by import PostedBy
from .privacy import may_read
from .refusals import Refusal, failure_text
from .streams import CARRIED_COLUMNS, carried_note_sql
from .streams import CHANNEL as STREAM_CHANNEL
from .wire import MAX_USER_ID_LENGTH, check_id, check_storable

logger = logging.getLogger(__name__)


CHILD_SEPARATOR = ":"  # child session ids: "<parent id>:<child name>"
COMPLETION_FIELDS = ("status", "output", "finished_at")  # what completing a request writes


def now_ms() -> int:
    """Milliseconds since the epoch (the spec's ``at`` unit)."""
    return int(time.time() * 1000)


def history_window() -> int:
    """How many of a session's most recent requests its history covers (``settings.WORKFORCE_HISTORY_WINDOW``)."""
    return int(settings.WORKFORCE_HISTORY_WINDOW)


@dataclass
class ActionContext:
    """What a handler gets besides its input.

    Attributes:
        org: the session's organization.
        session: the session row (its ``state`` as loaded; call ``lock_session`` to
            serialize against other writers and re-read it).
        request: the Request being run (status ``running``).
        user_id: the caller's user id (the session's owner is ``session.user_id``).
        flow: the kind the action belongs to.
        locked: ``session`` was read under its row lock in this transaction (an action
            declared with ``locks_session``, or after ``lock_session``).
        posted_by: who the server says is acting (the principal a view resolved, or the
            seat whose turn dispatched the action); None for the server on nobody's
            behalf. A line the action writes records it as ``postedBy``; it never comes
            from the input.
    """

    org: Organization
    session: Session
    request: Request
    user_id: str
    flow: FlowKind
    extras: ActionExtras = field(default_factory=lambda: ActionExtras())
    locked: bool = False
    settled: bool = False
    posted_by: PostedBy | None = None

    def completion_statement(self, output: Any, conn: BaseDatabaseWrapper | None = None) -> tuple[str, list]:
        """The request's completion with ``output`` as ``(sql, params)`` (an UPDATE,
        ``%s`` placeholders) for a handler that sends it inside its own last statement
        (a PostgreSQL CTE), saving a round trip. The handler must then return
        ``output``: ``do_run_action`` writes no completion of its own for it. A refusal
        or error after this still fails the request (the transaction is rolled back,
        the completion with it). PostgreSQL and SQLite only (``workforce.rows``);
        ``conn``: the default database's connection when the caller holds it."""
        self.request.status = Request.Status.COMPLETED
        self.request.output = output
        self.request.finished_at = timezone.now()
        self.settled = True
        return rows.update_statement(self.request, COMPLETION_FIELDS, conn)

    def lock_session(self) -> Session:
        """Take the session's row lock (``SELECT … FOR NO KEY UPDATE`` on PostgreSQL:
        writers of the session wait on each other, a foreign key's check of a row that
        references it does not) until the transaction ends, and return the freshly read
        row. Serializes writers of one session.

        When the row was already read under the lock in this transaction (``locked``),
        that row is returned as it is: nobody else can have changed it since."""
        if not self.locked:
            self.session = Session.objects.select_for_update(no_key=True).get(pk=self.session.pk)
            self.locked = True
        return self.session

    def emit(self, component: str, data: dict, *, type: str = "component") -> Item:
        """Store one item on this session, numbered after the last one."""
        return emit_item(self.session, component, data, type=type, request=self.request)

    def on_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` after the surrounding transaction commits (never if it rolls back)."""
        transaction.on_commit(fn)

    def end_running(self, *, output: Any = None, error: Refusal | None = None) -> bool:
        """End the request now, inside the caller's transaction, if it is still
        ``running``: completed with ``output``, or failed with ``error`` (one conditional
        UPDATE: a cancel and this end decide once). For an ``AfterCommit`` run, in the
        transaction that finishes its work, so the request's end commits with what the
        run wrote; ``do_run_action`` then writes no end of its own.

        Returns:
            True when this call ended it; False when it had ended (cancelled: aborted).
        """
        self.settled = True  # either way: this end is written, or a cancel's was
        return _end_running(self.request, output=output, error=None if error is None else error.as_error())


@dataclass(frozen=True)
class AfterCommit:
    """What a handler returns when the rest of its work must run outside any transaction
    (a seat's model call: ``seats.agent.on_mailbox_post``).

    ``do_run_action`` commits the action's transaction with the request ``running``
    (what the handler wrote, and the request, are kept), then calls ``run()``. ``run``
    returns the action's output or raises a Refusal, as a handler does; the request is
    then completed with that output, or failed with the refusal (``internal-error`` for
    any other exception), by a conditional UPDATE: a request cancelled meanwhile stays
    ``aborted``. ``run`` may complete the request itself inside the transaction that
    finishes its work (``ActionContext.end_running``), so its end and its writes commit
    together (a run that does raises nothing then: an exception there would spoil a
    transaction its caller holds open). A caller that dispatches inside a transaction of its own holds it
    across ``run`` (the run starts when the action's own block ends): don't.
    """

    run: Callable[[], Any]


def emit_item(session: Session, component: str, data: dict, *, type: str = "component", request: Request | None = None) -> Item:
    """Append an item to ``session`` with the next per-session ``seq``: the one place
    items are stored, but for a turn's first item, which
    ``do_record_running_request_with_item`` writes with its request in one statement (the
    same counter bump and streams' note).

    The counter is bumped with a conditional UPDATE, which holds the session row's lock
    until commit on PostgreSQL, so two emitters never get the same number, and the
    numbers of one session commit in order (the bump and the row are one transaction):
    a reader that has seen ``seq`` n has seen every item below it, which is what a live
    stream's cursor relies on (``workforce.streams``). On PostgreSQL the bump, the
    INSERT and the note to open streams (``pg_notify``, delivered when the transaction
    commits, dropped with a rollback of it or of the savepoint it ran in) are one
    statement; on SQLite (whose streams poll) the bump and the INSERT are two.
    """
    item = Item(session=session, request=request, type=type, component=component, data=data)
    if connection.vendor == "postgresql":
        _insert_item_postgresql(item)
        return item
    with transaction.atomic(savepoint=False):  # no extra query inside an action's transaction
        with connection.cursor() as cursor:
            cursor.execute(_BUMP_ITEM_SEQ, [session.pk])
            item.seq = cursor.fetchone()[0]
        rows.insert(item)  # the INSERT without the ORM's compile
    return item


_BUMP_ITEM_SEQ = f'UPDATE "{Session._meta.db_table}" SET "item_seq" = "item_seq" + 1 WHERE "id" = %s RETURNING "item_seq"'
# The item's columns and values (``rows.insert_parts``): its ``seq`` is the counter's.
_SEQ_FROM_COUNTER = (("seq", "counter.item_seq"),)


@cache
def _item_insert_postgresql(guarded: bool, *, reads_cancel: bool = False) -> str:
    """The item's statement on PostgreSQL: the counter's bump, the INSERT and the
    streams' note (``<session pk>:<seq>`` on ``workforce.streams.CHANNEL``), one CTE.
    ``guarded``: a conditional UPDATE (``{guard}``, with ``RETURNING 1``) runs first,
    and the item is written only when it updated a row; the statement then answers
    ``(rows the guard updated, item id, item seq)``, else ``(item id, item seq)``.
    ``reads_cancel`` (unguarded only): the answer ends with whether the request
    ``%s`` (the last parameters) has the status ``%s`` (aborted: cancelled)."""
    columns, values, _ = rows.insert_parts(Item, "postgresql", _SEQ_FROM_COUNTER)
    table, sessions = rows.quote(Item._meta.db_table), rows.quote(Session._meta.db_table)
    guard = "guard AS ({guard}), " if guarded else ""
    exists = " AND EXISTS (SELECT 1 FROM guard)" if guarded else ""
    notify = f"CASE WHEN item.id IS NOT NULL THEN pg_notify(%s, %s || {carried_note_sql('item')}) END"
    requests = rows.quote(Request._meta.db_table)
    aborted = f', EXISTS (SELECT 1 FROM {requests} WHERE "id" = %s AND "status" = %s)' if reads_cancel else ""
    answer = (
        f"SELECT (SELECT COUNT(*) FROM guard), item.id, item.seq, {notify} FROM (SELECT 1) AS one LEFT JOIN item ON TRUE"
        if guarded
        else f"SELECT item.id, item.seq, {notify}{aborted} FROM item"
    )
    return (
        f"WITH {guard}counter AS ("
        f'UPDATE {sessions} SET "item_seq" = "item_seq" + 1 WHERE "id" = %s{exists} RETURNING "item_seq"'
        f"), item AS (INSERT INTO {table} ({columns}) SELECT {values} FROM counter RETURNING id, {CARRIED_COLUMNS}) {answer}"
    )


def emit_item_reading_cancel(session: Session, component: str, data: dict, *, request: Request) -> tuple[Item, bool | None]:
    """``emit_item(session, component, data, request=request)`` that also reads whether
    ``request`` was cancelled (is ``aborted``, ``workforce.cancelling.is_cancelled``): on
    PostgreSQL in the item's own statement (its snapshot is the statement's, the same
    moment a read right after it would see), elsewhere not at all.

    Returns:
        ``(the item, True when cancelled / False when not)`` on PostgreSQL,
        ``(the item, None)`` elsewhere (the caller reads the flag itself).
    """
    if connection.vendor != "postgresql":
        return emit_item(session, component, data, request=request), None
    item = Item(session=session, request=request, type="component", component=component, data=data)
    return item, _insert_item_postgresql(item, cancel_of=request)


def _item_params(item: Item) -> list[Any]:
    """The counter's parameter, the item's values, the streams' note prefix."""
    plan = rows.insert_parts(Item, "postgresql", _SEQ_FROM_COUNTER)[2]
    return [item.session_id, *rows.insert_params(item, plan), STREAM_CHANNEL, f"{item.session_id}:"]


@in_callers_transaction
def do_update_then_emit_item(
    guard: tuple[str, list],
    session: Session,
    component: str,
    data: dict,
    *,
    type: str = "component",
    request: Request | None = None,
) -> tuple[int, Item | None]:
    """Run the UPDATE ``guard`` (``(sql, params)``, ``%s`` placeholders, no RETURNING)
    and, only when it updated a row, ``emit_item(session, component, data, ...)``: on
    PostgreSQL in one statement (a CTE), elsewhere in two. Call inside the transaction
    both belong to (a turn's end: its request settled unless cancelled, then its reply;
    ``seats.turns.TurnResult.finish``).

    Returns:
        ``(rows the guard updated, the item or None)``.
    """
    guard_sql, guard_params = guard
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(guard_sql, guard_params)
            updated = cursor.rowcount
        return updated, (emit_item(session, component, data, type=type, request=request) if updated else None)
    item = Item(session=session, request=request, type=type, component=component, data=data)
    sql = _item_insert_postgresql(True).format(guard=f"{guard_sql} RETURNING 1")
    with connection.cursor() as cursor:
        cursor.execute(sql, [*guard_params, *_item_params(item)])
        updated, pk, seq, _ = cursor.fetchone()
    if pk is None:
        return updated, None
    item.seq = seq
    rows.mark_saved(item, pk)
    return updated, item


def _insert_item_postgresql(item: Item, *, cancel_of: Request | None = None) -> bool | None:
    """Bump the session's item counter, INSERT ``item`` with the number and note it to
    the streams, in one statement; sets ``item.pk`` and ``item.seq``. Each field is
    prepared as the ORM's ``save`` would (``rows.insert_params``). With ``cancel_of`` the
    statement also reads whether that request is cancelled (``aborted``), and says so;
    else None."""
    params = _item_params(item)
    if cancel_of is not None:
        params += [cancel_of.pk, Request.Status.ABORTED]
    with connection.cursor() as cursor:
        cursor.execute(_item_insert_postgresql(False, reads_cancel=cancel_of is not None), params)
        row = cursor.fetchone()
    pk, item.seq = row[0], row[1]
    rows.mark_saved(item, pk)
    return bool(row[3]) if cancel_of is not None else None


def ensure_child_session(parent: Session, session_id: str, *, kind: str, state: dict) -> Session:
    """Session ``session_id`` as a child of ``parent`` on kind ``kind``: created on first
    use (in the parent's organization, owned by the parent's owner, with ``state``),
    found after (a seat's conversation in a mailbox, a delegate's session in a
    coordinator conversation; ids ``<parent id>:<child name>``).

    Raises:
        Refusal("session-not-addressable"): the id is held by a session on another kind.
    """
    session, _ = Session.objects.get_or_create(
        organization_id=parent.organization_id,
        session_id=session_id,
        defaults={"flow_kind": kind, "user_id": parent.user_id, "parent": parent, "state": state},
    )
    if session.flow_kind != kind:
        raise Refusal("session-not-addressable", f'"{session.session_id}" runs on the {session.flow_kind} kind, not {kind}.')
    return session


def ensure_organization(org_id: str) -> Organization:
    """The organization ``org_id``, created on first use. Every HTTP call without
    authentication asks for it: a committed row is kept per process for a few seconds
    (``workforce.org_cache``), so a call sends no statement for it; a miss is one read,
    SQL built once (``workforce.rows``)."""
    org = org_cache.cached_organization(org_id)
    if org is not None:
        return org
    since = org_cache.generation()
    org = rows.select_one(Organization, '"id" = %s', [org_id])
    if org is None:
        org, _ = Organization.objects.get_or_create(id=org_id)
    org_cache.remember(org, since)
    return org


class _Opening(TypedDict):
    """What ``_open_session`` opens: the session an action call names, and how."""

    org: Organization
    kind: str
    session_id: str
    user_id: str
    internal: bool
    parent_session: Session | None
    missing: str  # the refusal's sentence when there is no such session
    creates: bool


class _IdempotentReplay(Exception):
    def __init__(self, request: Request):
        self.request = request


class ActionFailed(Exception):
    """An action's handler refused or raised (``call_handler``): ``refusal`` is its
    Refusal, or ``internal-error`` for any other exception; ``error`` its
    ``{reason, message}``, recorded on the failed request."""

    def __init__(self, refusal: Refusal):
        super().__init__(refusal.message)
        self.refusal = refusal

    @property
    def error(self) -> dict:
        """``{reason, message}`` (``Refusal.as_error``)."""
        return self.refusal.as_error()


def call_handler(
    act: Action, ctx: ActionContext, input: Any, *, label: str, passthrough: tuple[type[Exception], ...] = ()
) -> Any:
    """The one call of an action's handler, for every way an action runs
    (``do_run_action``; a coordinator's delegated post, ``coordinators.delivery``, whose
    entry runs outside any transaction in a request it records and settles itself):
    ``input`` validated by the action's schema, then ``act.handler(ctx, data)``.

    Args:
        label: what the log names when the handler raises (``"<kind>.<action> on <session>"``).
        passthrough: exception types the caller handles itself, raised as they are
            (a delegated door's ``DelegatedRunCancelled``).

    Returns:
        The handler's output (an ``AfterCommit`` included: the caller runs it).

    Raises:
        ActionFailed: the input was refused (``invalid-input``), the handler refused, or
            it raised anything else (``internal-error: <type>: <message>``, logged).
    """
    try:
        return act.handler(ctx, act.validate(input))
    except passthrough:
        raise
    except Refusal as refusal:
        raise ActionFailed(refusal) from None
    except Exception as exc:  # a bug or a lost dependency: record it, don't lose the request
        logger.exception("action %s failed", label)
        raise ActionFailed(Refusal("internal-error", failure_text(exc))) from None


def do_run_action(
    *,
    org: Organization,
    kind: str,
    session_id: str,
    action: str,
    input: Any,
    user_id: str,
    internal: bool = False,
    idempotency_key: str | None = None,
    parent_request: Request | None = None,
    parent_session: Session | None = None,
    extras: ActionExtras | None = None,
    posted_by: PostedBy | None = None,
) -> Request:
    """Run ``action`` of ``kind`` on session ``session_id`` and record it as a Request.

    A session id nobody used yet gets an empty session on ``kind`` owned by ``user_id``
    (the registered instance answers for every id). The returned Request is
    ``completed`` (with ``output``) or ``failed`` (with ``error = {reason, message}``);
    either way it is stored. With ``idempotency_key``, a second call with the same key by
    the same user answers the first call's request instead of acting again.

    One transaction on the way that succeeds: the session read (``FOR UPDATE`` for an
    action declared ``locks_session``), the request's INSERT, the handler, the request's
    UPDATE. When the handler refuses or raises, that transaction (a savepoint when the
    caller holds one open) is rolled back whole and the failed request, with the same
    ``request_id``, is written in a fresh one (under the same session lock, taken before
    the request's INSERT as on the first way): nothing the handler wrote stays. Callers
    with one key at the same moment all answer the one request the key's unique
    constraint kept, a refused one included. A handler that returns ``AfterCommit``
    has its ``run`` called after that transaction commits, outside it (see
    ``AfterCommit``); the request returned is then as ``run`` ended it.

    Args:
        org: the caller's organization; the session is looked up inside it.
        kind: the flow kind (``"mailbox"``); session_id: the session's address.
        action: the action name; ``internal=True`` also reaches internal actions
            (dispatch only, never a client).
        input: the action's JSON input (validated by the action's schema).
        user_id: the caller.
        posted_by: who a line the action writes names as its ``postedBy``
            (``ActionContext.posted_by``): a view passes its principal's
            (``Principal.posted_by``), a seat's tool its seat's
            (``workforce.posted_by.seat_posted_by``); None records none.

    Raises:
        Refusal("flow-not-found" | "action-not-found"): nothing to record a request on.
        Refusal("session-not-addressable"): the id is held by a session on another kind.
        Refusal("session-not-found"): a client call on a session it may not read
            (``workforce.privacy.may_read``: another user's conversation or one under it).
        Refusal("idempotency-key-reused"): the key was used for a different call.
        Refusal("invalid-input"): an id or the input the store can't keep (wire.py).
        Refusal("backlog-full"): a client's call to an action that ``adds_work`` while
            the backlog is past ``WORKFORCE_BACKLOG_LIMIT`` (``workforce.backlog``);
            nothing is recorded, not even the failed request. A retry whose
            ``idempotency_key`` names a call that was taken answers that call instead.
    """
    flow = registry.require(kind)
    act = flow.find(action, internal=internal)
    if act is None:
        raise Refusal("action-not-found", f'The {kind} kind has no action "{action}".')
    check_id(session_id, label="The session id")
    check_id(user_id, label="userId", max_length=MAX_USER_ID_LENGTH)
    check_storable(input)
    stored_input = input if isinstance(input, dict) else {"_": input}
    if act.adds_work and not internal:
        try:
            check_backlog()  # before anything is written: a refused post leaves no row
        except Refusal:
            # A retry of a call that was taken answers it, as it would with room to spare.
            taken = _find_idempotent(org, user_id, idempotency_key) if idempotency_key else None
            if taken is None:
                raise
            return _check_replay(taken, session_id, action, stored_input)
    if idempotency_key and connection.vendor != "postgresql":
        # On PostgreSQL the request's INSERT finds a used key itself (_open_and_record).
        existing = _find_idempotent(org, user_id, idempotency_key)
        if existing is not None:
            return _check_replay(existing, session_id, action, stored_input)
    missing = f'No session "{session_id}" exists.'
    creates = True
    if not internal:
        creates = CHILD_SEPARATOR not in session_id and client_creates_session(flow, session_id, action)
        missing = f'No session "{session_id}" exists' + (
            f"; a {kind} session is opened by the server, not by this call." if not creates else "."
        )
    request = Request(
        organization=org,
        action=action,
        internal=internal,
        user_id=user_id,
        input=stored_input,
        status=Request.Status.RUNNING,
        idempotency_key=idempotency_key or None,
        parent_request=parent_request,
        started_at=timezone.now(),
    )
    opening: _Opening = {
        "org": org,
        "kind": kind,
        "session_id": session_id,
        "user_id": user_id,
        "internal": internal,
        "parent_session": parent_session,
        "missing": missing,
        "creates": creates,
    }
    try:
        with transaction.atomic():
            session = _open_and_record(request, opening, lock=act.locks_session)
            ctx = ActionContext(
                org=org,
                session=session,
                request=request,
                user_id=user_id,
                flow=flow,
                extras=extras or ActionExtras(),
                locked=act.locks_session,
                posted_by=posted_by,
            )
            output = call_handler(act, ctx, input, label=f"{kind}.{action} on {session_id}")
            if isinstance(output, AfterCommit):
                later = output  # run once this transaction has committed, outside it
            elif ctx.settled and output == request.output:
                return request  # the handler's own last statement completed it
            else:
                request.status = Request.Status.COMPLETED
                request.output = output
                request.finished_at = timezone.now()
                rows.update(request, COMPLETION_FIELDS)
                return request
    except _IdempotentReplay as replay:
        return _check_replay(replay.request, session_id, action, stored_input)
    except ActionFailed as failed:
        error = failed.error
    else:
        return _run_after_commit(later, ctx, f"{kind}.{action} on {session_id}")
    # The action's transaction is rolled back (its request with it): record the failed
    # request, same request id and start, on its own. It takes the session's row lock
    # first, as the action's transaction did, so two callers of one key both take the
    # session before the key: the second INSERT of the key waits for the first to commit
    # and replays it.
    request.pk = None
    request._state.adding = True
    request.status = Request.Status.FAILED
    request.output = None
    request.error = error
    request.finished_at = timezone.now()
    try:
        with transaction.atomic():
            _insert_request(request, _open_session(**opening, lock=act.locks_session))
    except _IdempotentReplay as replay:
        return _check_replay(replay.request, session_id, action, stored_input)
    return request


def _run_after_commit(later: AfterCommit, ctx: ActionContext, label: str) -> Request:
    """Run an action's ``AfterCommit`` (its transaction committed, its request running)
    and settle the request with what it answers; see ``AfterCommit``."""
    request = ctx.request
    try:
        output = later.run()
    except Refusal as refusal:
        error = refusal.as_error()
    except Exception as exc:  # a bug or a lost dependency: record it, don't lose the request
        logger.exception("action %s failed after its commit", label)
        error = Refusal("internal-error", failure_text(exc)).as_error()
    else:
        if not ctx.settled:
            with transaction.atomic():
                _end_running(request, output=output)
        return request
    with transaction.atomic():
        _end_running(request, error=error)
    return request


def _end_running(request: Request, *, output: Any = None, error: dict | None = None) -> bool:
    """End running ``request``: completed with ``output``, or failed with ``error``,
    by one conditional UPDATE; a request that ended first (cancelled) is read back as
    it is. Returns True when this call ended it."""
    finished_at = timezone.now()
    if error is None:
        fields: dict[str, Any] = {"status": Request.Status.COMPLETED, "output": output, "finished_at": finished_at}
    else:
        fields = {"status": Request.Status.FAILED, "error": error, "finished_at": finished_at}
    if Request.objects.filter(pk=request.pk, status=Request.Status.RUNNING).update(**fields):
        for name, value in fields.items():
            setattr(request, name, value)
        return True
    request.refresh_from_db(fields=["status", "output", "error", "finished_at"])
    return False


_SESSION_BY_ID = '"organization_id" = %s AND "session_id" = %s'
# The conflict target of the request_unique_idempotency_key index (workforce.models.Request).
_IDEMPOTENCY_TARGET = '("organization_id", "user_id", "idempotency_key") WHERE "idempotency_key" IS NOT NULL'


def _open_and_record(request: Request, opening: _Opening, *, lock: bool) -> Session:
    """``_open_session`` and ``_insert_request``: on PostgreSQL, for a session that
    exists, one statement reads the session (under its lock when ``lock``) and INSERTs
    the request (``rows.select_one_and_insert``); a refusal of the session then raises
    inside the transaction, which rolls the request back with it. A call with an
    idempotency key whose request exists inserts nothing there (``ON CONFLICT … DO
    NOTHING`` on the key's unique index, after a concurrent holder of the key commits or
    rolls back) and answers that request (``_IdempotentReplay``): a key's first call
    costs no read and no savepoint of its own."""
    if connection.vendor == "postgresql":
        org = opening["org"]
        session = rows.select_one_and_insert(
            Session,
            _SESSION_BY_ID,
            [org.pk, opening["session_id"]],
            request,
            "session_id",
            for_update=lock,
            on_conflict=_IDEMPOTENCY_TARGET if request.idempotency_key else "",
        )
        if session is not None:
            if request.pk is None:  # the key was used: its request answers
                raise _IdempotentReplay(_find_idempotent(org, request.user_id, request.idempotency_key))
            Session.organization.field.set_cached_value(session, org)
            request.session = session
            return _check_session(session, **opening)
        if request.idempotency_key:  # no such session yet: a used key still answers first
            existing = _find_idempotent(org, request.user_id, request.idempotency_key)
            if existing is not None:
                raise _IdempotentReplay(existing)
    session = _open_session(**opening, lock=lock)
    _insert_request(request, session)
    return session


def _open_session(
    *,
    org: Organization,
    kind: str,
    session_id: str,
    user_id: str,
    internal: bool,
    parent_session: Session | None,
    missing: str,
    creates: bool = True,
    lock: bool,
) -> Session:
    """The session an action runs on, created on first use, read under its row lock when
    ``lock``; refuses (``session-not-found``, ``session-not-addressable``) before
    anything is recorded on it."""
    sessions = Session.objects.select_for_update(no_key=True) if lock else Session.objects
    # The SQL built once: the ORM's compile costs more than the read.
    session = rows.select_one(Session, _SESSION_BY_ID, [org.pk, session_id], for_update=lock)
    if session is None and not creates:
        # "<mailbox>:<seat>" ids name conversations the server creates, and a kind whose
        # sessions are opened another way (a coordinator conversation, a talk address
        # before its join) creates none on a client's call: a client that could take an
        # id first would leave a seat unable to hear that mailbox, or a mailbox the tree
        # declares later unable to open.
        raise Refusal("session-not-found", missing)
    if session is None:
        session, _ = sessions.get_or_create(
            organization=org,
            session_id=session_id,
            defaults={"flow_kind": kind, "user_id": user_id, "parent": parent_session},
        )
    else:
        Session.organization.field.set_cached_value(session, org)
    return _check_session(session, org=org, kind=kind, session_id=session_id, user_id=user_id, internal=internal, missing=missing)


def _check_session(session: Session, *, kind: str, session_id: str, user_id: str, internal: bool, missing: str, **_) -> Session:
    """``session`` when the call may run on it; else the refusal (nothing recorded)."""
    if not internal and not may_read(session, user_id):
        # Another user's conversation, or a session under one: not found, and
        # nothing recorded in it (a refused call would take up the owner's
        # history window, and its answer would read the owner's history).
        raise Refusal("session-not-found", missing)  # word for word: ids don't leak
    if session.flow_kind != kind:
        raise Refusal(
            "session-not-addressable",
            f'Session "{session_id}" runs on the {session.flow_kind} kind, not {kind}.',
        )
    return session


def _insert_request(request: Request, session: Session) -> None:
    """INSERT ``request`` on ``session``. Two calls with one idempotency key at the same
    moment: the unique constraint picks the first, the second answers the first's
    request (``_IdempotentReplay``)."""
    request.session = session
    if request.idempotency_key:
        try:
            with transaction.atomic():
                rows.insert(request)
        except IntegrityError:
            existing = _find_idempotent(request.organization, request.user_id, request.idempotency_key)
            if existing is None:
                raise  # the unique constraint refused something else
            raise _IdempotentReplay(existing) from None
    else:
        rows.insert(request)


def find_idempotent_request(org: Organization, user_id: str, key: str) -> Request | None:
    """The request ``user_id`` made in ``org`` with Idempotency-Key ``key`` (any
    endpoint that records a request under the key: an action, a chat turn), or None."""
    return _find_idempotent(org, user_id, key)


def check_idempotent_replay(existing: Request, *, session_id: str, action: str, input: Any) -> Request:
    """``existing`` (``find_idempotent_request``'s answer), marked ``replayed``, when the
    retry asks for the same ``action`` on the same ``session_id`` with the same
    ``input`` (a dict, as stored); the action endpoint's rule for a key used again.

    Raises:
        Refusal("idempotency-key-reused"): the key was used for a different call.
    """
    return _check_replay(existing, session_id, action, input)


def _find_idempotent(org: Organization, user_id: str, key: str) -> Request | None:
    return Request.objects.select_related("session").filter(organization=org, user_id=user_id, idempotency_key=key).first()


def _check_replay(existing: Request, session_id: str, action: str, stored_input: Any) -> Request:
    if existing.session.session_id != session_id or existing.action != action or existing.input != stored_input:
        raise Refusal(
            "idempotency-key-reused",
            f"This Idempotency-Key was already used for {existing.action} on {existing.session.session_id} "
            f"({existing.request_id}); a retry must repeat the same session, action and input.",
        )
    existing.replayed = True
    return existing


def do_record_request(
    session: Session,
    *,
    action: str,
    input: Mapping[str, Any],
    user_id: str,
    output: Any = None,
    error: dict | None = None,
    parent: Request | int | None = None,
    internal: bool = True,
    running: bool = False,
    started_at=None,
) -> Request:
    """Record a request on ``session`` without running anything through the registry:
    a step the server took on its own (a post's fan-out, a route, a delivery that failed)
    or one it begins and settles itself (``running=True``: a seat's turn, a delegated
    post, a coordinator's judgment).

    Args:
        session: the session the request belongs to (its organization is the request's).
        action: the action name recorded; input: its JSON input; user_id: who it runs
            as (usually the session's owner).
        output: the JSON output of a completed request.
        error: ``{reason, message}`` (``Refusal.as_error()``): the request is failed.
        parent: the request this one was made by (``parent_request``), or its primary
            key (a caller that holds only the id: no Request is built to carry it).
        internal: recorded as an internal action (default True).
        running: record it ``running`` with no finish time; the caller settles it.
        started_at: when it started (default now).

    Returns:
        The stored Request: ``running``, else ``failed`` when ``error`` is given, else
        ``completed``; finished now unless running.
    """
    request = new_request(
        session,
        action=action,
        input=input,
        user_id=user_id,
        output=output,
        error=error,
        parent=parent,
        internal=internal,
        running=running,
        started_at=started_at,
    )
    rows.insert(request)  # a post's fan-out writes one: the INSERT without the ORM's compile
    return request


def new_request(
    session: Session,
    *,
    action: str,
    input: Mapping[str, Any],
    user_id: str,
    output: Any = None,
    error: dict | None = None,
    parent: Request | int | None = None,
    internal: bool = True,
    running: bool = False,
    started_at=None,
) -> Request:
    """The unsaved Request ``do_record_request`` stores (its arguments; ``created_at``,
    ``started_at`` and ``finished_at`` taken now): for a caller that writes it inside a
    statement of its own on PostgreSQL (``rows.insert_sql(Request, ...)`` as a CTE, then
    ``rows.mark_saved``), such as a post's fan-out (``mailboxes.notify``). ``parent``:
    as ``do_record_request``'s, a Request or its primary key."""
    now = timezone.now()
    if running:
        status = Request.Status.RUNNING
    else:
        status = Request.Status.FAILED if error else Request.Status.COMPLETED
    # A parent given by its key is set by its column: no Request built only to carry an id.
    parent_ref: dict[str, Any] = {"parent_request_id": parent} if isinstance(parent, int) else {"parent_request": parent}
    return Request(
        organization_id=session.organization_id,
        session=session,
        action=action,
        internal=internal,
        user_id=user_id,
        input=input,
        status=status,
        output=output,
        error=error,
        created_at=now,
        started_at=started_at or now,
        finished_at=None if running else now,
        **parent_ref,
    )


# A running request and its first item (a turn's start: its prompt) in one statement on
# PostgreSQL: the request's INSERT, the session's item counter bumped, the item's INSERT
# with both, and the streams' note (as ``_item_insert_postgresql``).
_ITEM_OF_NEW_REQUEST = (("seq", "counter.item_seq"), ("request_id", "req.id"))


@dataclass(frozen=True)
class StartNote:
    """A turn's ``on_started`` hook that is one conditional UPDATE (a delivery's link to
    its turn, ``mailboxes.deliveries``), so it can ride the start's own statement:
    ``do_record_running_request_with_item(note=...)`` runs ``sql`` on PostgreSQL as a
    data-modifying CTE of that statement; called as a hook (``note(request)``, SQLite)
    it runs the same UPDATE on its own. Either way ``missed()`` is called when it
    updated no row.

    Attributes:
        sql: an UPDATE with no RETURNING, ``{request}`` where the new request's id goes,
            ``%s`` placeholders for ``params``.
        params: ``sql``'s parameters.
        missed: called when the UPDATE matched no row (a caller raises there: its claim
            is gone, and the start rolls back with the caller's transaction).
    """

    sql: str
    params: Sequence[Any]
    missed: Callable[[], None]

    def __call__(self, request: Request) -> None:
        """The UPDATE on its own, the request's id written in (an integer key)."""
        with connection.cursor() as cursor:
            cursor.execute(self.sql.format(request=int(request.pk)), list(self.params))
            updated = cursor.rowcount
        if not updated:
            self.missed()


@cache
def _request_and_item_sql(noted: str | None = None) -> str:
    """``do_record_running_request_with_item``'s statement; with ``noted`` (a
    ``StartNote.sql``) also that UPDATE as the ``noted`` CTE, right after the request's
    (its parameters come after the request's), and the answer ends with the rows it
    updated."""
    req_columns, req_values, _ = rows.insert_parts(Request, "postgresql")
    columns, values, _ = rows.insert_parts(Item, "postgresql", _ITEM_OF_NEW_REQUEST)
    requests, items = rows.quote(Request._meta.db_table), rows.quote(Item._meta.db_table)
    sessions = rows.quote(Session._meta.db_table)
    note = f"noted AS ({noted.format(request='(SELECT id FROM req)')} RETURNING 1), " if noted else ""
    count = ", (SELECT COUNT(*) FROM noted)" if noted else ""
    return (
        f'WITH req AS (INSERT INTO {requests} ({req_columns}) VALUES ({req_values}) RETURNING id, "request_id"), {note}'
        f'counter AS (UPDATE {sessions} SET "item_seq" = "item_seq" + 1 WHERE "id" = %s RETURNING "item_seq"), '
        f"item AS (INSERT INTO {items} ({columns}) SELECT {values} FROM counter, req RETURNING id, {CARRIED_COLUMNS}) "
        # The request is this statement's: the note takes its id from req (a read by key would not see it).
        f"SELECT req.id, item.id, item.seq, pg_notify(%s, %s || {carried_note_sql('item', 'req.request_id')}){count} FROM req, item"
    )


@in_callers_transaction
def do_record_running_request_with_item(
    session: Session,
    component: str,
    data: dict,
    *,
    type: str = "component",
    action: str,
    input: Mapping[str, Any],
    user_id: str,
    parent: Request | int | None = None,
    started_at=None,
    note: StartNote | None = None,
) -> tuple[Request, Item]:
    """``do_record_request(session, ..., running=True)`` and then ``emit_item(session,
    component, data, type=type, request=<that request>)``: one statement on PostgreSQL (a
    turn's start writes its request and its prompt in one round trip), two elsewhere.
    Call inside the transaction both belong to.

    Args:
        parent: as ``do_record_request``'s (a Request or its primary key).
        note: the caller's ``on_started`` write (``StartNote``): on PostgreSQL a CTE of
            the same statement (``note.missed()`` is called when it updated no row),
            elsewhere ``note(request)`` after the two.

    Returns:
        ``(the running request, its item)``, both stored.

    Raises:
        What ``note`` (or its ``missed``) raises; the caller's transaction rolls back.
    """
    request = new_request(
        session, action=action, input=input, user_id=user_id, parent=parent, running=True, started_at=started_at
    )
    if connection.vendor != "postgresql":
        rows.insert(request)
        item = emit_item(session, component, data, type=type, request=request)
        if note is not None:
            note(request)
        return request, item
    item = Item(session=session, type=type, component=component, data=data)
    params = [
        *rows.insert_params(request, rows.insert_parts(Request, "postgresql")[2]),
        *(note.params if note is not None else ()),
        session.pk,
        *rows.insert_params(item, rows.insert_parts(Item, "postgresql", _ITEM_OF_NEW_REQUEST)[2]),
        STREAM_CHANNEL,
        f"{session.pk}:",
    ]
    with connection.cursor() as cursor:
        cursor.execute(_request_and_item_sql(note.sql if note is not None else None), params)
        request_pk, item_pk, item.seq, _, *noted = cursor.fetchone()
    rows.mark_saved(request, request_pk)
    rows.mark_saved(item, item_pk)
    item.request = request
    if note is not None and not noted[0]:
        note.missed()
    return request, item


def do_abort_request(request_pk: int, detail: str | None = None, *, now=None) -> bool:
    """Mark request ``request_pk`` ``aborted`` if it is still running (a turn a crashed
    or superseded task left behind); a request that already ended is left alone.

    Args:
        request_pk: the Request's primary key.
        detail: why, stored as the error ``{reason: "aborted", message}``; None stores
            no error.
        now: its finish time (default now).

    Returns:
        True when it was running and is now aborted.
    """
    changes: dict[str, Any] = {"status": Request.Status.ABORTED, "finished_at": now or timezone.now()}
    if detail is not None:
        changes["error"] = Refusal("aborted", detail).as_error()
    return bool(Request.objects.filter(pk=request_pk, status=Request.Status.RUNNING).update(**changes))


def do_record_failed_request(
    *, session: Session, action: str, input: dict, user_id: str, refusal: Refusal, internal: bool = True
) -> Request:
    """Record a failed request on ``session`` without running anything (a delivery that
    could not start, a refusal noticed outside an action); ``do_record_request`` with
    ``error=refusal.as_error()``."""
    return do_record_request(session, action=action, input=input, user_id=user_id, error=refusal.as_error(), internal=internal)
