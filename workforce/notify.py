"""The input a mailbox's notify block gets, once per declared member per post (spec
"Waking members": ``mailboxNotifyInputSchema``).

``{mailboxId, member, postId, body, principal, author?, seatAuthored?, routed?, recent?,
projectId?, answerToken?}``:
``postId`` is the line's id; ``principal`` the mailbox session's user (the same on every
line, so it does not name the poster; on a room's post, the person who posted);
``author`` the line's unverified label; ``projectId`` and ``answerToken`` (the seat's
token, which its answer hands back as ``token``) on a room's post;
``seatAuthored`` is ``true`` on a seat's own line and absent otherwise. A kind hears
posts by declaring an internal action ``onMailboxPost`` that takes this input (spec
"Making a kind of your own hear posts").
"""

from __future__ import annotations

from typing import NotRequired, Protocol, TypedDict

from rest_framework import serializers

from .flows import StrictCharField, registry
from .framing import quoted, quoted_name

ON_MAILBOX_POST = "onMailboxPost"

# One transcript line as routing's evaluator and a routed member see it:
# ``{"from": author or principal, "text": body}`` (``recent_entry``).
RecentEntry = TypedDict("RecentEntry", {"from": str, "text": str})


class NotifyInput(TypedDict):
    """One member's delivery of one post (``mailboxNotifyInputSchema``; the module's
    docstring says what each key is). ``build_notify_input`` makes it; a room's post adds
    ``projectId`` and ``answerToken``."""

    mailboxId: str
    member: str
    postId: str
    body: str
    principal: str
    author: NotRequired[str]
    seatAuthored: NotRequired[bool]
    routed: NotRequired[bool]
    recent: NotRequired[list[RecentEntry]]
    projectId: NotRequired[str]
    answerToken: NotRequired[str]


class PostLine(Protocol):
    """What the kernel reads of a mailbox transcript line (``mailboxes.models.Line``)."""

    @property
    def line_id(self) -> str: ...
    @property
    def body(self) -> str: ...
    @property
    def principal(self) -> str: ...
    @property
    def author(self) -> str | None: ...
    @property
    def seat_authored(self) -> bool: ...


class MailboxNotifyInput(serializers.Serializer):
    """The schema of one delivery (``mailboxNotifyInputSchema``)."""

    mailboxId = StrictCharField()
    member = StrictCharField()
    postId = StrictCharField()
    body = StrictCharField()
    principal = StrictCharField()
    author = StrictCharField(required=False)
    seatAuthored = serializers.BooleanField(required=False)
    routed = serializers.BooleanField(required=False)
    recent = serializers.ListField(child=serializers.DictField(), required=False)
    projectId = StrictCharField(required=False)
    answerToken = StrictCharField(required=False)


def build_notify_input(
    *,
    mailbox_id: str,
    member: str,
    line: PostLine,
    routed: bool | None = None,
    recent: list[RecentEntry] | None = None,
) -> NotifyInput:
    """One member's delivery for ``line`` (a mailbox transcript line: ``line_id``,
    ``body``, ``principal``, ``author``, ``seat_authored``). Optional keys are left out
    when they do not apply, as the spec shows them."""
    data: NotifyInput = {
        "mailboxId": mailbox_id,
        "member": member,
        "postId": line.line_id,
        "body": line.body,
        "principal": line.principal,
    }
    if line.author is not None:
        data["author"] = line.author
    if line.seat_authored:
        data["seatAuthored"] = True
    if routed is not None:
        data["routed"] = routed
    if recent is not None:
        data["recent"] = recent
    return data


def turn_text(notify_input: NotifyInput) -> str:
    """The turn a hearing seat runs: ``<writer> in <mailbox>: <body>``, where the writer
    is the post's author, or its principal when there is none (spec "Waking agent
    seats"): ``support.lead in support.desk: can someone look at the refund queue?``.

    It is one framed line whatever the post holds: a writer or a body that is not one
    plain line is written as a JSON string literal (``workforce.framing``), so a body
    with a line break followed by ``support.lead in support.standup: …`` cannot add a
    line that reads as the office's."""
    writer = notify_input.get("author") or notify_input["principal"]
    return f"{quoted_name(writer)} in {notify_input['mailboxId']}: {quoted(notify_input['body'])}"


def kind_hears_posts(kind: str) -> bool:
    """True when the flow kind ``kind`` can hear a post: it declares the internal action
    ``onMailboxPost`` (spec "Making a kind of your own hear posts": that declaration is
    all that is looked for). An unregistered kind hears nothing."""
    flow = registry.get(kind)
    return flow is not None and ON_MAILBOX_POST in flow.internal_actions


def recent_entry(line: PostLine | RecentEntry) -> RecentEntry:
    """A transcript line as routing's evaluator and a routed member see it:
    ``{"from": author or principal, "text": body}`` (spec "Testing a routed mailbox").
    ``line`` is a Line or a dict with ``from``/``text`` (returned as just those keys)."""
    if isinstance(line, dict):
        return {"from": line["from"], "text": line["text"]}
    return {"from": line.author or line.principal, "text": line.body}


def recent_text(recent: list[RecentEntry], mailbox_id: str) -> str:
    """The message a routed member's model gets with the post, for that one answer:
    the mailbox's last lines before the post, oldest first, one ``<from>: <text>`` each
    (spec "What the member sees when it answers"), each one physical line: a name or a
    text that is not one plain line is a JSON string literal (``workforce.framing``)."""
    if not recent:
        return f"Nothing was said in {mailbox_id} before this post."
    lines = "\n".join(f"{quoted_name(str(entry.get('from', '?')))}: {quoted(str(entry.get('text', '')))}" for entry in recent)
    return f"The last {len(recent)} line(s) in {mailbox_id} before this post, oldest first:\n{lines}"
