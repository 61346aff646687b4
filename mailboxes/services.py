"""Write side of mailboxes: opening the roster, posting lines, and landing a routed
post's answer (``do_answer_post``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from workforce.contracts import in_callers_transaction
from workforce.facets import NOTIFY, ROUTE
from workforce.models import Organization, Session
from workforce.refusals import Refusal
from workforce.sessions import ActionContext, emit_item, now_ms

from .binder import BoundMailbox
from .inventory import do_register_inventory, do_retire_templates
from .lines import insert_line
from .models import Line
from .notify import NotifyFanOut, do_fan_out, plan_fan_out
from .queries import access_mailbox_state, is_mailbox_state

OLD_KIND = "channel"


# The item an applied file leaves on the mailbox's session (``do_open_mailboxes(apply=True)``):
# a record of the change beside the lines, never a line itself (the transcript is the
# mailbox-post items and nothing else), as a route decision is a mailbox-route item.
APPLIED_ITEM = "mailbox-applied"
APPLIED = "applied"


@dataclass(frozen=True)
class OpenOutcome:
    """What ``do_open_mailboxes`` did with one record: ``opened``, ``already open``,
    ``adopted`` (an empty session a premature post created, now bound) or ``applied``
    (an open mailbox given its file's members, charter and description, on request).

    ``drift`` names how an ``already open`` mailbox's file differs from what it was
    opened with (``members (the file adds x; drops y)``, ``charter``, ``description``),
    or, for ``applied``, what was rewritten; empty when nothing differs. Without
    ``apply`` the mailbox keeps what it was opened with (spec "Opening it").
    """

    mailbox_id: str
    outcome: str
    drift: tuple[str, ...] = ()

    @property
    def drift_warning(self) -> str | None:
        """The sentence ``open_mailboxes`` and ``serve`` print for a drifted mailbox that
        was left alone, or None."""
        if not self.drift or self.outcome == APPLIED:
            return None
        return (
            f"mailbox {self.mailbox_id}'s MAILBOX.md differs from what it was opened with: {', '.join(self.drift)}. "
            "An open mailbox keeps the members, charter and description it was opened with. To serve the file's, "
            "run `python manage.py open_mailboxes --apply` (its lines are kept; the change is recorded on it as a "
            "mailbox-applied item), or open a fresh mailbox: give it a new id (rename its folder; the old transcript "
            "stays under the old id)."
        )


def _quoted(text: str, most: int = 60) -> str:
    text = " ".join(text.split())
    return f'"{text[:most]}…"' if len(text) > most else f'"{text}"'


def mailbox_drift(state: dict, mailbox: BoundMailbox) -> tuple[str, ...]:
    """How ``mailbox`` (the file, as bound) differs from ``state`` (what the session was
    opened with): one phrase per field that differs, in the order members, charter,
    description. A reordered members list is not a difference."""
    drift = []
    opened = list(state.get("members") or [])
    added = [m for m in mailbox.members if m not in opened]
    dropped = [m for m in opened if m not in mailbox.members]
    if added or dropped:
        parts = ([f"the file adds {', '.join(added)}"] if added else []) + ([f"drops {', '.join(dropped)}"] if dropped else [])
        drift.append(f"members ({'; '.join(parts)})")
    if (state.get("charter") or "") != (mailbox.charter or ""):
        drift.append("charter (the file's body was rewritten)")
    if (state.get("description") or "") != (mailbox.description or ""):
        drift.append(
            f"description (opened as {_quoted(state.get('description') or '')}, "
            f"the file says {_quoted(mailbox.description or '')})"
        )
    return tuple(drift)


class OpenRefused(Exception):
    """``open_mailboxes`` stopped: an id is held by something it will not clear away.

    Attributes: ``mailbox_id``, ``occupant`` (a sentence naming what holds the id).
    """

    def __init__(self, mailbox_id: str, occupant: str):
        self.mailbox_id = mailbox_id
        self.occupant = occupant
        super().__init__(f"{mailbox_id}: {occupant}")


def _occupant_problem(session: Session, mailbox: BoundMailbox, user_id: str) -> str | None:
    label = f'session "{session.session_id}" (kind {session.flow_kind}, owner {session.user_id})'
    if session.flow_kind == OLD_KIND:
        return (
            f"the id is held by {label} on the old channel kind, from before mailboxes were renamed. "
            "Its lines are not read; start from an empty store (see find_pre_rename_marks)."
        )
    if session.flow_kind != mailbox.kind:
        return f"the id is held by {label}, which belongs to another flow. Rename the mailbox."
    if not session.state:
        return None  # an empty session a premature post created (by anyone): adopted
    if session.user_id != user_id:
        return f"the id is held by {label}, which belongs to another user. Rename the mailbox."
    if session.state and not is_mailbox_state(session.state):
        return f"the id is held by {label}, whose state is not a readable mailbox. Rename the mailbox."
    return None


def do_open_mailboxes(
    org: Organization,
    mailboxes: list[BoundMailbox],
    *,
    user_id: str,
    template_ids: list[str] | tuple[str, ...] = (),
    apply: bool = False,
) -> list[OpenOutcome]:
    """Open one session per bound record, at the record's id (spec "Opening it").

    Idempotent: an open mailbox is left alone (members, charter and description keep
    what they were opened with); its outcome's ``drift`` names what its file changed.
    With ``apply``, an open mailbox whose file differs is given the file's members,
    charter and description instead (outcome ``applied``): its lines, counters and
    route ledger are kept, its inventory rows follow, and one ``mailbox-applied`` item
    on its session records what changed (``{"changed": [...], "before": {...},
    "after": {...}, "appliedBy": user_id, "appliedAt": ms}``); it is never a line, so
    it wakes nobody. An empty session on the mailbox's kind (a premature
    post, by whichever user) is adopted and from then on owned by ``user_id``. Each
    opened mailbox gets its inventory rows (``mailboxes.inventory``: memberships first,
    the mailbox row last), with what it was opened with; the rows of ``template_ids``
    are retired. All or nothing, in one transaction.

    Args:
        org: the organization the sessions are created in (fixed from then on).
        mailboxes: the roster's bound mailboxes (templates are never passed here).
        user_id: the owner of the sessions; every line's principal.
        template_ids: the ids of the tree's ``mintFor:`` records (``Roster.templates``).

    Raises:
        OpenRefused: an id is held by another kind, another user, unreadable state, or
            a session on the old ``channel`` kind. Nothing is opened then.
        Refusal("mailbox-is-a-template"): a mailbox passed is a template's id.
    """
    outcomes: list[OpenOutcome] = []
    with transaction.atomic():
        do_retire_templates(org, template_ids)
        existing = {
            s.session_id: s
            for s in Session.objects.select_for_update()
            .filter(organization=org, session_id__in=[m.id for m in mailboxes])
            .order_by("pk")
        }
        for mailbox in mailboxes:
            session = existing.get(mailbox.id)
            if session is not None:
                problem = _occupant_problem(session, mailbox, user_id)
                if problem:
                    raise OpenRefused(mailbox.id, problem)
        for mailbox in mailboxes:
            state: dict[str, Any] = {
                "members": list(mailbox.members),
                "charter": mailbox.charter,
                "description": mailbox.description,
            }
            session = existing.get(mailbox.id)
            if session is None:
                Session.objects.create(
                    organization=org, session_id=mailbox.id, flow_kind=mailbox.kind, user_id=user_id, state=state
                )
                outcome = "opened"
            elif not session.state:
                session.state = state
                session.user_id = user_id  # the opener owns it: every line's principal
                session.save(update_fields=["state", "user_id", "updated_at"])
                outcome = "adopted"
            else:
                drift = mailbox_drift(session.state, mailbox)
                if apply and drift:
                    _apply_file(session, state, drift, user_id=user_id)
                    outcome = APPLIED
                else:
                    outcome = "already open"
                    state = session.state
            do_register_inventory(
                org,
                mailbox,
                members=list(state["members"]),
                description=state["description"],
                opened_by=user_id,
                template_ids=template_ids,
            )
            outcomes.append(OpenOutcome(mailbox.id, outcome, drift if outcome in ("already open", APPLIED) else ()))
    return outcomes


def _apply_file(session: Session, state: dict, drift: tuple[str, ...], *, user_id: str) -> None:
    """Rewrite an open mailbox's members, charter and description with ``state`` (the
    file's), keeping every other key of its state, and record the change as one
    ``mailbox-applied`` item. Inside ``do_open_mailboxes``' transaction, the session
    row locked."""
    before = {key: session.state.get(key) for key in ("members", "charter", "description")}
    session.state = {**session.state, **state}
    session.save(update_fields=["state", "updated_at"])
    emit_item(
        session,
        APPLIED_ITEM,
        {"changed": list(drift), "before": before, "after": dict(state), "appliedBy": user_id, "appliedAt": now_ms()},
    )


@in_callers_transaction
def do_post_line(
    ctx: ActionContext,
    *,
    body: str,
    author: str | None = None,
    seat_authored: bool = False,
    answer_to: Line | None = None,
    answers_line: bool = False,
) -> Line:
    """Append one line to the mailbox ``ctx.session`` (spec "Posting and reading").

    Runs inside the action's transaction (``@in_callers_transaction``). Takes the
    mailbox session's row lock (already taken when the action is declared
    ``locks_session``), so posts on one mailbox are serialized and each line gets the
    next gap-free ``seq`` (the session's ``line_seq``, bumped with its item counter in
    one write: ``mailboxes.lines.insert_line``); posts on two mailboxes never wait on
    each other. Leaves one ``mailbox-post`` item carrying the line. On a kind built with a
    route, the route's ledger records the line and a client post on a mailbox that
    declares ``routing:`` goes to the route (``mailboxes.routing``); every other line is
    handed to the kind's notify block (its fan-out runs after commit). On PostgreSQL a
    ``NotifyFanOut``'s plan is made before the line's statement, which then writes the
    fan-out request when no delivery's INSERT will (``mailboxes.notify.plan_fan_out``).

    The line's ``postedBy`` is ``ctx.posted_by`` (the principal the view resolved, or
    the seat whose turn dispatched ``seatPost``/``answer``; docs/architecture.md "Who
    said what").

    Args:
        body: the text, verbatim; author: an unverified label that must name a member.
        seat_authored: True only for a seat's own line (it wakes nobody).
        answer_to: the client post this line answers (a routed answer; unique, so a
            second answer raises IntegrityError: call inside a savepoint).
        answers_line: the action answers this line's ``as_wire()`` (``post``,
            ``seatPost``): its request is completed by the line's own write
            (``mailboxes.lines.insert_line(settle=True)``).

    Raises:
        Refusal("mailbox-not-bound" | "mailbox-is-a-template" | "author-not-a-member").
    """
    session = ctx.lock_session()
    state = access_mailbox_state(session)
    if author is not None and author not in state["members"]:
        raise Refusal(
            "author-not-a-member",
            f'"{author}" is not a member of {session.session_id}; its members are {", ".join(state["members"]) or "none"}.',
        )
    line = Line(
        session=session,
        line_id=str(uuid.uuid4()),
        at=now_ms(),
        principal=session.user_id,
        author=author,
        seat_authored=seat_authored,
        body=body,
        posted_by=ctx.posted_by,  # who the server says is acting: never the input's
        request=ctx.request,
        answer_to=answer_to,
    )
    route = ROUTE.get(ctx.flow)
    notify = NOTIFY.get(ctx.flow)
    # On PostgreSQL the fan-out is planned before the line's statement (the plan reads no
    # line number), so that one which writes no delivery (a seat's own line) has its
    # request written by the line's statement; one with deliveries has it written by theirs.
    routed = route is not None and route.takes_post(ctx, line)
    early = notify if not routed and isinstance(notify, NotifyFanOut) and connection.vendor == "postgresql" else None
    planned = plan_fan_out(ctx, line, early) if early is not None else None
    carried = planned.request if planned is not None and not planned.deliveries else None
    # On PostgreSQL the route ledger's append rides on the line's statement too.
    ledger = route.ledger_append(line, routed=routed) if route is not None else None
    # The line's seq and its item's from the locked session row, in one write.
    insert_line(ctx, line, settle=answers_line, request=carried, ledger=ledger)
    if route is not None and route.on_line(ctx, line, folded=ledger):
        return line  # the route hands the post to its one member
    if early is not None:
        do_fan_out(ctx, line, early, planned=planned)
    elif notify is not None:
        notify(ctx, line)
    return line


def do_answer_post(ctx: ActionContext, *, post_id: str, body: str, author: str) -> dict:
    """Land a routed member's answer to ``post_id`` as its line (the mailbox's internal
    ``answer`` entry; spec "The answer lands in the mailbox").

    The line is the seat's (``seatAuthored: true``, author = the seat id, checked
    against the members like a post's) and names the post it answers. A post gets at
    most one answer line: once one landed, any other lands nothing, even one sent at
    the same moment (the mailbox's row lock, and a unique constraint behind it).

    Returns:
        ``{"landed": true, "postId", "line": {...}}``, or ``{"landed": false, "postId",
        "answerId"}`` when the post was already answered.

    Raises:
        Refusal("post-not-found"): ``post_id`` is not a client post of this mailbox.
        Refusal("author-not-a-member" | "mailbox-not-bound" | ...): as ``post`` refuses;
            nothing is written and the post's one answer line is not used up.
    """
    session = ctx.lock_session()
    access_mailbox_state(session)
    post = Line.objects.filter(session=session, line_id=post_id).first()
    if post is None or post.seat_authored:
        raise Refusal("post-not-found", f'"{post_id}" is not a client post of {session.session_id}.')
    existing = Line.objects.filter(answer_to=post).values_list("line_id", flat=True).first()
    if existing:
        return {"landed": False, "postId": post_id, "answerId": existing}
    try:
        with transaction.atomic():
            line = do_post_line(ctx, body=body, author=author, seat_authored=True, answer_to=post)
    except IntegrityError:
        existing = Line.objects.filter(answer_to=post).values_list("line_id", flat=True).first()
        if existing is None:
            raise
        return {"landed": False, "postId": post_id, "answerId": existing}
    return {"landed": True, "postId": post_id, "line": line.as_wire()}
