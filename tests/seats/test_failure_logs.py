"""What goes wrong is one warning line for operators, naming where and why, besides
the failed request that records it: a failed model call (the seat, its model, the
reason) and a failed delivery (the mailbox, the member, the post, the reason)."""

from __future__ import annotations

import logging

from mailboxes.models import Delivery
from workforce.llm import use_model_resolver
from workforce.testing import create_mock_model_resolver


def warnings(caplog) -> list[tuple[str, str]]:
    return [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_failed_model_call_and_the_delivery_it_fails_are_one_warning_line_each(wired, post, caplog):
    wired()
    mock = create_mock_model_resolver({"eng.lead": [ConnectionError("connection refused")], "eng.analyst": ["fine"]})
    caplog.set_level(logging.INFO)
    with use_model_resolver(mock):
        post("eng.incidents", "help")
    post_id = Delivery.objects.get(member="eng.lead").post_id
    assert warnings(caplog) == [
        ("seats.turns", "model call failed: seat eng.lead, model embedded/echo: mock: ConnectionError: connection refused"),
        (
            "mailboxes.deliveries",
            f"delivery failed: mailbox eng.incidents, member eng.lead, post {post_id}: "
            "model-error: mock: ConnectionError: connection refused",
        ),
    ]


def test_a_delivery_that_works_logs_no_warning(wired, post, caplog):
    wired()
    caplog.set_level(logging.INFO)
    post("eng.incidents", "help")
    assert warnings(caplog) == []
