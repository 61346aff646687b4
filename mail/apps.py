from django.apps import AppConfig

from workforce.refusals import register_reasons

# HTTP statuses of mail's reason codes (spec "How mail becomes work", "Who an agent can
# write to").
REASONS = {
    "recipient-not-found": 404,
    "thread-not-found": 404,
    "mail-send-not-permitted": 403,
    "recipient-not-allowed": 403,
    "mail-closed": 409,
    "trigger-not-allowed": 409,
    "vault-unavailable": 503,
    "webhook-signature-invalid": 401,
}


class MailConfig(AppConfig):
    name = "mail"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from seats.agent import KIND as AGENT_KIND
        from workforce.facets import CAPABILITIES, MAIL_READER
        from workforce.flows import FlowKind, registry
        from workforce.leases import register_work_table
        from workforce.sweepers import register_sweep

        from . import checks  # noqa: F401  (registers the forge token check)
        from .chat import register as register_chat
        from .events import tell_office_safely
        from .models import ChatRun, MailRun
        from .pages import IndexReader
        from .store import set_event_listener
        from .sweeps import do_sweep_mail_and_chats
        from .tools import mail_send_capability

        register_reasons(REASONS)
        register_chat()
        # The vault tells the office through the same handler a forge's webhook uses.
        set_event_listener(tell_office_safely)

        # The agent kind (seats) offers mail_send to a seat whose WORKER.md grants
        # mail.send, and the web pages read the agents' mail through MAIL_READER (they may
        # not import mail). Added when the kind is registered, before or after this app.
        def add_to_agent_kind(agent: FlowKind) -> None:
            capabilities = list(CAPABILITIES.get(agent) or [])
            if mail_send_capability not in capabilities:
                CAPABILITIES.set(agent, [*capabilities, mail_send_capability])
            MAIL_READER.set(agent, IndexReader())

        registry.when_registered(AGENT_KIND, add_to_agent_kind)
        register_work_table(MailRun, "started_at")
        register_work_table(ChatRun, "started_at")
        from workforce.backlog import register_backlog_source

        # Mail runs and chat turns not yet finished count as backlog (workforce.backlog).
        register_backlog_source(
            "mail.mailrun", lambda: MailRun.objects.filter(status__in=[MailRun.Status.PENDING, MailRun.Status.RUNNING])
        )
        register_backlog_source(
            "mail.chatrun", lambda: ChatRun.objects.filter(status__in=[ChatRun.Status.PENDING, ChatRun.Status.RUNNING])
        )
        register_sweep("mail", do_sweep_mail_and_chats)
