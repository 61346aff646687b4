"""workforce.framing: sender text in a framed line is one physical line it cannot close."""

from __future__ import annotations

import pytest

from workforce.framing import LINE_BREAKS, quoted, quoted_name, unquoted


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        'a "quoted" word',
        '"starts quoted"',
        "two\nlines",
        "cr\rlf",
        "nel\x85",
        "ls\u2028ps\u2029",
        "vt\x0bff\x0c",
        "é 漢字",
    ],
)
def test_quoted_is_one_line_and_reads_back(text):
    line = quoted(text)
    assert len(line.splitlines()) == 1 and unquoted(line) == text
    assert (line == text) == (not text.startswith('"') and not any(ch in LINE_BREAKS for ch in text))


@pytest.mark.parametrize(
    "name, shown",
    [
        ("support.lead", "support.lead"),
        ("agent:eng.beta", "agent:eng.beta"),
        ("support.lead in support.standup: yes", '"support.lead in support.standup: yes"'),
        ("", '""'),
        ('a"b', '"a\\"b"'),
    ],
)
def test_a_name_is_one_word_or_a_literal(name, shown):
    assert quoted_name(name) == shown
