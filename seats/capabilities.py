"""Capabilities: the tools a seat's kind can offer its model (spec "A seat answering in
the mailbox"). A seat is offered only the tools its WORKER.md ``tools:`` names.

``post-to-mailbox`` takes exactly ``{mailbox, body}``. The line's author is the seat's
id, set here, never by the model; the line has ``seatAuthored: true`` and
``authorVerified: false``. It goes through the mailbox kind's internal ``seatPost``, by
dispatch. Answers:

- ``{"ok": true, "handedOver": true, "mailbox": id, "requestId": ...}`` once the post
  is handed over, including when the mailbox refuses the author (``author-not-a-member``
  is a failed request on the mailbox's session; the seat is not told);
- on a turn answering a routed post, the first call into that post's mailbox is the
  post's answer: it goes through the mailbox's internal ``answer`` (at most one answer
  line per post); a later call there posts nothing and answers ``already-answered``;
- ``{"refused": "<reason>: <detail>"}`` (``workforce.tools.refused``) when the call fails by
  name: ``invalid-input`` (a key other than mailbox and body, an empty body),
  ``session-not-found`` (nobody opened that id; nothing is created),
  ``session-not-addressable`` (a session on another kind), ``external-dispatcher``, and
  any other refusal of the mailbox (``mailbox-not-bound``, ``mailbox-is-a-template``).
"""

from __future__ import annotations

from typing import Final

from workforce.dispatch import DispatchCall, dispatch, dispatch_once, external_dispatcher
from workforce.models import Session
from workforce.posted_by import seat_posted_by
from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext, ToolResult, refused

from .models import Seat
from .queries import reachable_seats
from .turns import SEAT_EXTRA

MAILBOX_KIND = "mailbox"
POST_TO_MAILBOX = "post-to-mailbox"
# The turn's answer slot (``workforce.facets.AnswerSlot``) in ``ToolContext.extras``: set
# when the turn's reply answers a post (a routed mailbox post).
ANSWER_EXTRA: Final = "answer"
# The mailbox session a woken turn was delivered from (``ToolContext.extras``), as read
# with the delivery: a post back into it needs no read of its own.
MAILBOX_EXTRA: Final = "mailbox_session"


def post_to_mailbox(ctx: ToolContext, args: dict) -> ToolResult:
    """The ``post-to-mailbox`` tool: see the module docstring.

    ``ctx.extras`` may carry ``idempotency_prefix`` (a delivery's key): the n-th call
    in a turn is then dispatched with key ``<prefix>:post-to-mailbox:<n>``, so a turn
    run again after a crash hands each post over once; and ``answer``, the turn's answer
    slot ``{postId, token}``: the call that answers that post is keyed
    ``<token>:post-to-mailbox:answer``.
    """
    try:
        mailbox_id, body = _check_args(args)
        if external_dispatcher():
            raise Refusal(
                "external-dispatcher",
                "This deployment hands dispatch to an external queue whose workers share no lease backend.",
            )
        session = _known_mailbox(ctx, mailbox_id) or Session.objects.filter(organization=ctx.org, session_id=mailbox_id).first()
        if session is None:
            raise Refusal("session-not-found", f'No mailbox "{mailbox_id}" was opened; nothing was posted.')
        if session.flow_kind != MAILBOX_KIND:
            raise Refusal(
                "session-not-addressable",
                f'"{mailbox_id}" runs on the {session.flow_kind} kind; only the built-in mailbox kind takes a seat\'s post.',
            )
        caller = ctx.extras.get(SEAT_EXTRA)
        if isinstance(caller, Seat) and not speaks_in(caller, session):
            raise Refusal(
                "author-not-a-member",
                f'"{ctx.seat_id}" in {mailbox_id} is not this worker: a person\'s own worker posts only in a mailbox '
                "whose principal reaches it; nothing was posted.",
            )
        prefix = ctx.extras.get("idempotency_prefix") or (f"{ctx.request.request_id}" if ctx.request is not None else None)
        user_id = ctx.session.user_id if ctx.session is not None else ctx.seat_id
        answering = _answers_routed_post(ctx, mailbox_id)
        if answering and ctx.extras.get("answer_handed"):
            raise Refusal(
                "already-answered",
                f"your answer to this post was already handed to {mailbox_id}; nothing was posted.",
            )
        if answering:
            slot = ctx.extras[ANSWER_EXTRA]
            key = f"{slot.get('token') or prefix}:{POST_TO_MAILBOX}:answer"
            action, payload = "answer", {"postId": slot["postId"], "body": body, "author": ctx.seat_id}
            if slot.get("token"):  # handed back: a room checks it is this seat's for this post
                payload["token"] = slot["token"]
        else:
            count = ctx.extras.get("post_count", 0) + 1
            ctx.extras["post_count"] = count
            key = f"{prefix}:{POST_TO_MAILBOX}:{count}"
            action, payload = "seatPost", {"body": body, "author": ctx.seat_id}
        kwargs = DispatchCall(
            org=ctx.org,
            kind=MAILBOX_KIND,
            session_id=mailbox_id,
            action=action,
            payload=payload,
            user_id=user_id,
            parent_request=ctx.request,
            posted_by=seat_posted_by(ctx.seat_id),  # the seat whose turn this is, never the model's say
        )
        try:
            if prefix:
                request = dispatch_once(idempotency_key=key, **kwargs)
            else:
                request = dispatch(**kwargs)
        except Refusal as refusal:
            if refusal.reason != "idempotency-key-reused":
                raise
            if answering:
                ctx.extras["answer_handed"] = True
            return {"ok": True, "handedOver": True, "mailbox": mailbox_id, "note": "already handed over"}
        if answering:
            ctx.extras["answer_handed"] = True
    except Refusal as refusal:
        return refused(refusal)
    if request.status == "failed" and request.error and request.error.get("reason") != "author-not-a-member":
        return refused(Refusal(request.error["reason"], request.error.get("message", "").partition(": ")[2]))
    return {"ok": True, "handedOver": True, "mailbox": mailbox_id, "requestId": request.request_id}


def _known_mailbox(ctx: ToolContext, mailbox_id: str) -> Session | None:
    """The mailbox the turn was woken in (``MAILBOX_EXTRA``, read with its delivery), when
    the call posts there: no read of a row the turn already holds."""
    known = ctx.extras.get(MAILBOX_EXTRA)
    if isinstance(known, Session) and known.session_id == mailbox_id and known.organization_id == ctx.org.pk:
        return known
    return None


def speaks_in(seat: Seat, mailbox: Session) -> bool:
    """True when ``seat`` may post in ``mailbox`` as its id: a standard (shared) seat
    always (the mailbox checks its membership); a person's own or an organization's only
    when it is the seat the mailbox's principal reaches for that id (``reachable_seats``),
    so one person's worker never speaks in a mailbox as the member it shadows for them
    (one query, for those seats only)."""
    if seat.scope == Seat.Scope.SHARED:
        return True
    reached = reachable_seats(mailbox.organization_id, mailbox.user_id, [seat.seat_id]).get(seat.seat_id)
    return reached is not None and reached.pk == seat.pk


def _answers_routed_post(ctx: ToolContext, mailbox_id: str) -> bool:
    """True when this call is a routed member's answer: the turn answers a routed post
    (its answer slot is set) and the call goes into that post's mailbox (spec "A seat
    answering in the mailbox": "the first call into that post's mailbox is the post's
    answer")."""
    return bool(ctx.extras.get(ANSWER_EXTRA)) and mailbox_id == ctx.extras.get("mailbox_id")


def _check_args(args: object) -> tuple[str, str]:
    if not isinstance(args, dict):
        raise Refusal("invalid-input", "post-to-mailbox takes a JSON object {mailbox, body}.")
    extra = sorted(set(args) - {"mailbox", "body"})
    if extra:
        raise Refusal(
            "invalid-input",
            f"post-to-mailbox takes exactly mailbox and body; it does not take {', '.join(repr(k) for k in extra)}.",
        )
    mailbox_id, body = args.get("mailbox"), args.get("body")
    if not isinstance(mailbox_id, str) or not mailbox_id.strip():
        raise Refusal("invalid-input", "mailbox: the id of the mailbox to post in is required.")
    if not isinstance(body, str) or not body.strip():
        raise Refusal("invalid-input", "body: what to say may not be empty.")
    return mailbox_id, body


POST_TO_MAILBOX_TOOL = Tool(
    name=POST_TO_MAILBOX,
    description=(
        "Post a line in a mailbox, under your own name. mailbox is the mailbox's id (a woken "
        "turn reads '<writer> in <mailbox>: <body>'); body is what to say."
    ),
    parameters={
        "type": "object",
        "properties": {
            "mailbox": {"type": "string", "description": "The mailbox's id, e.g. support.desk."},
            "body": {"type": "string", "description": "What to say."},
        },
        "required": ["mailbox", "body"],
        "additionalProperties": False,
    },
    call=post_to_mailbox,
)

# The built-in agent kind's catalog: what a worker's tools: line can name.
AGENT_CATALOG: dict[str, Tool] = {POST_TO_MAILBOX: POST_TO_MAILBOX_TOOL}
