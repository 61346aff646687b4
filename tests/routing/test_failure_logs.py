"""A failed evaluator call is one warning line naming the mailbox, the route model and
the reason (the post still goes to the fallback)."""

from __future__ import annotations

import logging

from workforce.testing import mock_evaluation_model

from .conftest import DESK, route_items


def test_a_failed_route_call_is_one_warning_line(routed, post, caplog):
    def broken(call):
        raise RuntimeError("evaluator down")

    routed(route=mock_evaluation_model(answers=broken))
    caplog.set_level(logging.INFO)
    caplog.clear()
    post("my printer is jammed")
    [item] = route_items()
    lines = [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [
        (
            "mailboxes.routing",
            f"model call failed: mailbox {DESK}, route model MockEvaluationModel: {item['detail'].split('failed: ', 1)[1]}",
        )
    ]
    assert "evaluator down" in lines[0][1]
