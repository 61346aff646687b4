"""Break-it probes of tool servers' bounded reads."""

from __future__ import annotations

import time
from pathlib import Path

from tests.seats.test_tool_servers import calls, run_turn_with  # noqa: F401

B3 = Path(__file__).resolve().parents[1] / "toolservers" / "breakit3_server.py"
YAML = f"servers:\n  b3:\n    command: python\n    args: [{B3}]\n"


def test_a_server_that_writes_half_a_line_then_exits_fails_that_call_quickly(run_turn_with):  # noqa: F811
    started = time.monotonic()
    _, items = run_turn_with(
        [calls(("b3__partial_exit", {}), ("b3__good", {"x": "after"})), "done"],
        tools="[b3/*]",
        servers=YAML,
        WORKFORCE_TOOL_CALL_TIMEOUT=20,
    )
    assert time.monotonic() - started < 15
    failed, answered = items
    assert failed["result"]["refused"].startswith("tool-server-unavailable: b3/partial_exit"), failed
    assert answered["result"] == {"text": "good after"}


def test_an_astral_answer_just_within_the_limit_is_kept_and_one_over_is_refused(run_turn_with):  # noqa: F811
    # measured: len('{"text": "' + s + '"}') = n + 12
    _, items = run_turn_with(
        [calls(("b3__sized", {"n": 988, "ch": "\U0001f600"}), ("b3__sized", {"n": 989, "ch": "\U0001f600"})), "done"],
        tools="[b3/*]",
        servers=YAML,
        WORKFORCE_TOOL_RESULT_CHARS=1000,
    )
    kept, over = items
    assert kept["result"] == {"text": "\U0001f600" * 988}
    assert over["result"]["refused"].startswith("tool-result-too-large: b3/sized answered 1001 characters"), over


def test_a_text_with_a_large_image_is_answered_with_its_text(run_turn_with):  # noqa: F811
    # Break-it: before the bounded read, a text with a screenshot kept its text (the image
    # is not kept); a bound of 12 x WORKFORCE_TOOL_RESULT_CHARS + 65536 (1,265,536 by
    # default) refused the whole answer tool-result-too-large. The bound is now at least 16 MiB.
    _, items = run_turn_with([calls(("b3__image", {"n": 1_400_000})), "done"], tools="[b3/*]", servers=YAML)
    [item] = items
    assert item["result"] == {"text": "shot\n[image content left out]"}, item["result"]


def test_many_empty_blocks_within_the_limit_are_not_refused(run_turn_with):  # noqa: F811
    # measured: the texts joined by "\n": 2 JSON characters a block; ~30 on the wire (past
    # 12 x 70000 + 65536, refused before the bound's 16 MiB floor).
    _, items = run_turn_with(
        [calls(("b3__blocks", {"n": 34990})), "done"],
        tools="[b3/*]",
        servers=YAML,
        WORKFORCE_TOOL_RESULT_CHARS=70000,
    )
    [item] = items
    assert "refused" not in item["result"], item["result"]
