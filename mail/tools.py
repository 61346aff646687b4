"""The agent's mail tools (spec "How mail becomes work", "Who an agent can write to"):

- ``mail_send`` ``{to, subject?, body}``: offered to a seat whose WORKER.md grants
  ``capabilities: {mail.send: [...]}`` (the agent kind's capability, in every turn):
  ``["*"]`` reaches any agent, a list of worker ids only those. A recipient outside the
  list is denied (``recipient-not-allowed``), ledgered ``run.denied``, and nothing is
  sent.
- ``mail_reply`` ``{body, thread?}`` and ``mail_close`` ``{thread?}``: offered in a mail
  run; ``thread`` defaults to the mail the run is for, and may name any mail in the
  agent's own vault.

Tools answer ``{"ok": true, "thread": ...}`` or refuse (``{"refused": "<code>: <sentence>"}``).
"""

from __future__ import annotations

from typing import Final

from seats.workers import MAIL_SEND, worker_capability
from workforce.refusals import Refusal
from workforce.tools import Tool, ToolContext, ToolResult, refused

from .constants import MAIL_CLOSE_TOOL, MAIL_REPLY_TOOL, MAIL_SEND_TOOL, RUN_DENIED
from .ledger import ledger
from .queries import access_thread
from .services import agent_principal, do_close_mail, do_reply_mail, do_send_mail

# The mail a run is for, in ToolContext.extras.
THREAD_EXTRA: Final = "mail_thread"


def call_key(ctx: ToolContext, tool: str) -> str | None:
    """The n-th call of ``tool`` in this turn, keyed under the turn's
    ``idempotency_prefix`` (``mail<run>:mail_reply:1``): a turn run again after a crash
    acts once per call. None outside a keyed turn."""
    prefix = ctx.extras.get("idempotency_prefix")
    if not prefix:
        return None
    counts = ctx.extras.setdefault("call_counts", {})
    count = counts[tool] = counts.get(tool, 0) + 1
    return f"{prefix}:{tool}:{count}"


def _exact(args: object, tool: str, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    if not isinstance(args, dict):
        raise Refusal("invalid-input", f"{tool} takes a JSON object.")
    extra = sorted(set(args) - set(required) - set(optional))
    if extra:
        raise Refusal("invalid-input", f"{tool} does not take {', '.join(repr(k) for k in extra)}.")
    missing = [k for k in required if not isinstance(args.get(k), str) or not args[k].strip()]
    if missing:
        raise Refusal("invalid-input", f"{tool} needs {', '.join(missing)}.")
    for key in optional:
        if key in args and not isinstance(args[key], str):
            raise Refusal("invalid-input", f"{tool}: {key} must be text.")
    return args


def mail_send_tool(recipients: list[str]) -> Tool:
    """``mail_send`` for a seat allowed to write to ``recipients`` (``["*"]``: anyone)."""
    allowed = set(recipients)

    def mail_send(ctx: ToolContext, args: dict) -> ToolResult:
        try:
            args = _exact(args, MAIL_SEND_TOOL, ("to", "body"), ("subject",))
            to = args["to"].strip()
            if "*" not in allowed and to not in allowed:
                ledger(
                    ctx.org,
                    RUN_DENIED,
                    agent_principal(ctx.seat_id),
                    tool=MAIL_SEND_TOOL,
                    to=to,
                    reason="recipient-not-allowed",
                    allowed=sorted(allowed),
                )
                raise Refusal(
                    "recipient-not-allowed",
                    f"your {MAIL_SEND} capability does not list {to}; nothing was sent.",
                )
            thread = do_send_mail(
                ctx.org,
                sender=agent_principal(ctx.seat_id),
                to=to,
                subject=args.get("subject"),
                body=args["body"],
                key=call_key(ctx, MAIL_SEND_TOOL),
            )
        except Refusal as refusal:
            return refused(refusal)
        return {"ok": True, "thread": thread.thread_id, "to": to}

    return Tool(
        name=MAIL_SEND_TOOL,
        description=(
            "Send a durable mail to another agent, under your own name. to is the agent's id; "
            "subject a line (optional); body what you ask or tell."
        ),
        parameters={
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "The recipient agent's id, e.g. support.devices."},
                "subject": {"type": "string", "description": "One line."},
                "body": {"type": "string", "description": "What the mail says."},
            },
            "required": ["to", "body"],
            "additionalProperties": False,
        },
        call=mail_send,
    )


def mail_send_capability(seat) -> list[Tool]:
    """The agent kind's mail capability (its ``capabilities`` facet): ``mail_send`` for a
    seat whose WORKER.md grants ``mail.send``; nothing otherwise."""
    recipients = worker_capability(seat.config or {}, MAIL_SEND)
    return [mail_send_tool(list(recipients))] if isinstance(recipients, list) else []


def _thread(ctx: ToolContext, args: dict):
    thread_id = (args.get("thread") or "").strip() or ctx.extras.get(THREAD_EXTRA)
    if not thread_id:
        raise Refusal("invalid-input", "thread: which mail (none is being worked in this run).")
    return access_thread(ctx.org, thread_id)


def mail_reply(ctx: ToolContext, args: dict) -> ToolResult:
    """``mail_reply``: see the module docstring."""
    try:
        args = _exact(args, MAIL_REPLY_TOOL, ("body",), ("thread",))
        thread = _thread(ctx, args)
        if thread.recipient != ctx.seat_id:
            raise Refusal("thread-not-found", f"No mail {thread.thread_id} in your vault.")
        notified = do_reply_mail(ctx.org, thread, author=ctx.seat_id, body=args["body"], key=call_key(ctx, MAIL_REPLY_TOOL))
    except Refusal as refusal:
        return refused(refusal)
    answer = {"ok": True, "thread": thread.thread_id}
    if notified.pk != thread.pk:
        answer["delivered"] = notified.thread_id
    return answer


def mail_close(ctx: ToolContext, args: dict) -> ToolResult:
    """``mail_close``: see the module docstring."""
    try:
        args = _exact(args, MAIL_CLOSE_TOOL, (), ("thread",))
        thread = _thread(ctx, args)
        if thread.recipient != ctx.seat_id:
            raise Refusal("thread-not-found", f"No mail {thread.thread_id} in your vault.")
        do_close_mail(ctx.org, thread, author=ctx.seat_id)
    except Refusal as refusal:
        return refused(refusal)
    return {"ok": True, "thread": thread.thread_id}


_THREAD = {"type": "string", "description": "The mail, <agent>:<number> (default: the one this run is for)."}
MAIL_REPLY = Tool(
    name=MAIL_REPLY_TOOL,
    description="Reply on a mail in your inbox. body is your reply; thread which mail (default: this run's).",
    parameters={
        "type": "object",
        "properties": {"body": {"type": "string", "description": "Your reply."}, "thread": _THREAD},
        "required": ["body"],
        "additionalProperties": False,
    },
    call=mail_reply,
)
MAIL_CLOSE = Tool(
    name=MAIL_CLOSE_TOOL,
    description="Mark a mail in your inbox done. thread: which mail (default: this run's).",
    parameters={"type": "object", "properties": {"thread": _THREAD}, "additionalProperties": False},
    call=mail_close,
)


def mail_run_tools() -> list[Tool]:
    """What a mail run offers beside the seat's own tools: ``mail_reply`` and ``mail_close``."""
    return [MAIL_REPLY, MAIL_CLOSE]
