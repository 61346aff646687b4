"""Mail's names, as the spec writes them (spec "Where mail lives", "Loop guard", "Who an
agent can write to"): the four labels, the ledger's event names, the run kind, the hop
limit."""

from __future__ import annotations

LABEL_NEW = "mail:new"
LABEL_WORKING = "mail:working"
LABEL_REPLIED = "mail:replied"
LABEL_CLOSED = "mail:closed"
# The four labels every vault has, in the order a mail moves through them.
LABELS = (LABEL_NEW, LABEL_WORKING, LABEL_REPLIED, LABEL_CLOSED)
LABEL_COLORS = {LABEL_NEW: "#1d76db", LABEL_WORKING: "#fbca04", LABEL_REPLIED: "#0e8a16", LABEL_CLOSED: "#6a737d"}

# Ledger events (spec "How mail becomes work", "Loop guard", "Who an agent can write to").
MAIL_SENT = "mail.sent"
MAIL_REPLIED = "mail.replied"
MAIL_CLOSED = "mail.closed"
MAIL_LOOP_GUARD = "mail.loop_guard"
RUN_DENIED = "run.denied"
# Not the spec's: the vault sweep met an issue whose text the index cannot keep (a NUL, a
# lone surrogate), recorded once and passed over (mail.repair).
MAIL_UNSTORABLE = "mail.unstorable"
# Not the spec's: a mail run failed and its mail went back to mail:new (mail.runs), named
# after the spec's run.denied.
RUN_FAILED = "run.failed"
LEDGER_EVENTS = (MAIL_SENT, MAIL_REPLIED, MAIL_CLOSED, MAIL_LOOP_GUARD, RUN_DENIED, MAIL_UNSTORABLE, RUN_FAILED)

# The run kind a mail starts (spec "Mail versus chat"), and the trigger a recipient's
# WORKER.md must list in run.triggers for it to be admitted.
RUN_KIND_MAIL = "mail"
MAIL_RUN_ACTION = "onMail"

# Beyond this many hops an automatic reply notification is delivered without mail:new.
MAX_HOPS = 3

# Principals (spec "Where mail lives"): human:<email> or agent:<slug>.
HUMAN = "human"
AGENT = "agent"

# Tool names (spec "How mail becomes work").
MAIL_SEND_TOOL = "mail_send"
MAIL_REPLY_TOOL = "mail_reply"
MAIL_CLOSE_TOOL = "mail_close"

# The Django permission a person needs to send mail (app label "mail", codename "send").
SEND_PERMISSION = "mail.send"
