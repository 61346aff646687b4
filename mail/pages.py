"""Mail as the pages read it (docs/pages.md "The pages"): the agent kind's ``MAIL_READER`` facet
(``workforce.facets.MailReader``), set in ``MailConfig.ready()``. The web app may not
import this app (docs/architecture.md "Apps": the top apps are independent), so it reads
mail through this facet, in the mail API's wire shape."""

from __future__ import annotations

from workforce.models import Organization
from workforce.posted_by import PostedBy
from workforce.principals import Principal

from .chat import chat_session_id, do_start_chat, takes_chat
from .models import Thread
from .queries import access_thread, ledger_wire, list_ledger, list_threads, thread_wire
from .services import do_send_person_mail


class IndexReader:
    """Reads of the mail index (``mail.queries``) as plain dicts."""

    states: tuple[str, ...] = tuple(Thread.State.values)

    def threads(
        self, org: Organization, *, recipient: str | None = None, state: str | None = None, limit: int = 200
    ) -> list[dict]:
        """The newest ``limit`` threads of ``org`` (only ``recipient``'s, only in
        ``state``, when given), as ``thread_wire`` dicts."""
        return [thread_wire(t) for t in list_threads(org, recipient=recipient, state=state)[:limit]]

    def thread(self, org: Organization, thread_id: str) -> dict:
        """``thread_wire(messages=True)`` plus ``ledger``: the thread's ledger entries in
        the order they were written.

        Raises:
            Refusal("thread-not-found"): no such thread in ``org``.
        """
        thread = access_thread(org, thread_id)
        data = thread_wire(thread, messages=True)
        data["ledger"] = [ledger_wire(e) for e in list_ledger(org, thread=thread.thread_id)]
        return data

    def send(self, principal: Principal, user, *, to: str, body: str, subject: str | None = None) -> dict:
        """A person's mail from the pages: ``do_send_person_mail``, as ``POST /api/mail``;
        answers the new thread's ``thread_wire``.

        Raises:
            Refusal: as ``do_send_person_mail`` (``mail-send-not-permitted``,
                ``recipient-not-found``, ``invalid-input``, ``vault-unavailable``).
        """
        return thread_wire(do_send_person_mail(principal, user, to=to, subject=subject, body=body))

    def chat(self, org: Organization, *, user_id: str, worker: str, message: str, posted_by: PostedBy):
        """A person's chat turn with ``worker`` (``do_start_chat``, as ``POST
        /api/workers/{worker}/chat``): the turn's request, running; ``posted_by`` the
        page's principal's (the message item's ``postedBy``).

        Raises:
            Refusal: as ``do_start_chat`` (``recipient-not-found``, ``trigger-not-allowed``,
                ``invalid-input``).
        """
        return do_start_chat(org, user_id=user_id, worker=worker, message=message, posted_by=posted_by)

    def chat_session_id(self, worker: str, user_id: str) -> str:
        """The person's chat session with ``worker`` (``chat:<worker>:<user>``)."""
        return chat_session_id(worker, user_id)

    def takes_chat(self, org: Organization, *, user_id: str, worker: str) -> bool:
        """True when the person reaches ``worker`` and its ``run.triggers`` include
        ``chat`` (``mail.chat.takes_chat``)."""
        return takes_chat(org, user_id, worker)
