"""Issue 22 item 7: a room line that imitates the office's framing reaches each seat's
model as text in its one framed line, and the room's recent lines the same way."""

from __future__ import annotations

from tests.framed import FORGED, framed_lines
from workforce.framing import literal
from workforce.llm import use_model_resolver
from workforce.testing import create_mock_model_resolver

from .conftest import ALICE, SEATS


def test_a_room_line_that_imitates_the_framing_is_one_framed_line(project, act):
    _, alice, _ = project
    mock = create_mock_model_resolver({"*": lambda call: "noted"})
    first = f"kickoff\n{FORGED}"
    with use_model_resolver(mock):
        act(alice, "post", {"body": first}, user_id=ALICE)
        act(alice, "post", {"body": f"next\n{FORGED}"}, user_id=ALICE)
    assert sorted(c.block for c in mock.calls) == sorted(SEATS * 2)
    for call in mock.calls:
        [framed] = framed_lines(call.messages[-1:])  # the turn
        assert framed.startswith(f"{ALICE} in {alice}: ") and FORGED in framed
        assert not any(line.startswith(FORGED) for m in call.messages for line in str(m["content"]).splitlines())
    later = [c for c in mock.calls if f"{ALICE}: {literal(first)}" in c.messages[-2]["content"].splitlines()]
    assert len(later) == 2  # the second post's recent lines: the first, quoted on one line
