"""The route ledger's append folded into the line's statement on PostgreSQL
(``mailboxes.lines.LedgerAppend``) leaves the ledger the separate statement left: the
same ``lines``, ``last_seq`` and ``last_post_id`` after a run of posts and answers, a
fresh start and a gap. Each case runs with the fold and without it (the line's
statement carries no append: ``record_line`` reads and writes the ledger itself, as on
SQLite), and
both must equal the ledger ``ledger_entry`` defines from the lines written."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from mailboxes.models import RouteLedger
from mailboxes.routing import LEDGER_LINES, MailboxRoute, configure_route, ledger_entry
from workforce.flows import registry
from workforce.models import Session

from .conftest import DESK, lines

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["fold", "separate"])
def fold(request, monkeypatch):
    """Whether the line's statement appends to the ledger (``separate``: it never does,
    and ``record_line`` reads and writes it itself)."""
    if request.param == "separate":
        monkeypatch.setattr(MailboxRoute, "ledger_append", lambda self, line, *, routed: None)
    return request.param == "fold"


def own_ledger_statement(sql: str) -> bool:
    """A statement on the ledger that is not the line's own (``WITH counters AS``)."""
    return '"mailboxes_routeledger"' in sql and not sql.lstrip().startswith("WITH counters AS (")


def expected(since_seq: int = 0) -> tuple[list[dict], int, int | None]:
    """The ledger the lines define: the last 20 from ``since_seq`` on, the last seq, the
    last client post's pk."""
    written = [ln for ln in lines() if ln.seq >= since_seq]
    clients = [ln for ln in written if not ln.seat_authored]
    return [ledger_entry(ln) for ln in written[-LEDGER_LINES:]], written[-1].seq, clients[-1].pk if clients else None


def stored() -> tuple[list[dict], int, int | None]:
    ledger = RouteLedger.objects.get(session=Session.objects.get(session_id=DESK))
    return list(ledger.lines), ledger.last_seq, ledger.last_post_id


def test_after_many_posts_and_answers_the_ledger_is_the_same(routed, post, settings, fold):
    settings.WORKFORCE_HISTORY_WINDOW = 200
    routed()
    post("printer question 0")  # the fresh start: no ledger yet
    assert stored() == expected()
    for n in range(1, 13):  # each answered by a seat: 26 lines, more than the ledger keeps
        body = f"printer question {n}" + ("x" * 2_500 if n == 5 else "")  # one cut to 2,000 characters
        with CaptureQueriesContext(connection) as captured:
            post(body)
        own = [sql for sql in (q["sql"] for q in captured.captured_queries) if own_ledger_statement(sql)]
        # The fold sends no statement of the ledger's own; without it the post and its answer each read and write it.
        assert len(own) == (0 if fold else 4)
    assert len(lines()) > LEDGER_LINES
    assert stored() == expected()
    assert any(entry["text"].endswith("more characters in the transcript]") for entry in stored()[0])


def test_a_gap_starts_the_ledger_afresh_the_same(routed, post, settings, fold):
    settings.WORKFORCE_HISTORY_WINDOW = 200
    routed()
    post("my printer is jammed")
    route = registry.require("mailbox").facets["route"]
    configure_route("mailbox", None)  # the kind runs without a route: lines the ledger misses
    post("hello?")
    configure_route("mailbox", route)
    before = RouteLedger.objects.get().last_seq
    post("printer again")  # a gap: the ledger starts afresh from the window
    assert lines()[-1].seq > before + 1 or lines()[-2].seq > before
    assert stored() == expected()
    post("and again")  # appended after the fresh start
    assert stored() == expected()
