"""The break-it bench's counting and verdict (``bench/_breakit.py``): pure functions, no
server (the whole pass is ``bench/breakit.py``, too slow for the suite)."""

from __future__ import annotations

from bench._breakit import (
    Answer,
    Figures,
    count_duplicated,
    count_extra_tasks,
    count_lost,
    error_lines,
    fuzz_cases,
    verdict,
)

SEATS = ("s.a", "s.b")


def test_a_wake_is_done_only_with_its_delivery_done_and_its_answer_line():
    done = [("p1", "s.a"), ("p1", "s.b"), ("p2", "s.a")]
    answered = [("p1", "s.a"), ("p2", "s.a"), ("p2", "s.b")]  # p1/s.b done, no line; p2/s.b line, not done
    assert count_lost(["p1", "p2", "p3"], SEATS, done, answered) == (6, 2, 4, 0)


def test_a_wake_still_pending_or_running_is_unsettled_not_lost():
    assert count_lost(["p1", "p2"], SEATS, [("p1", "s.a")], [("p1", "s.a")], open_=[("p1", "s.b"), ("p2", "s.a")]) == (4, 1, 1, 2)


def test_posts_answered_202_and_missing_lose_one_wake_per_member():
    assert count_lost(["p1"], SEATS, [("p1", "s.a"), ("p1", "s.b")], [("p1", "s.a"), ("p1", "s.b")], acked_missing=3) == (
        8,
        2,
        6,
        0,
    )


def test_wakes_of_posts_nobody_made_are_not_counted_done():
    assert count_lost(["p1"], SEATS, [("px", "s.a")], [("px", "s.a")]) == (2, 0, 2, 0)


def test_duplicates_count_pairs_not_rows():
    turns = [("p1", "s.a"), ("p1", "s.a"), ("p1", "s.a"), ("p1", "s.b"), ("p2", "s.a"), ("p2", "s.a")]
    answers = [("p1", "s.a"), ("p1", "s.b"), ("p1", "s.b")]
    assert count_duplicated(turns, answers) == (2, 1)


def test_extra_tasks_are_tasks_beyond_one_per_delivery_never_negative():
    assert count_extra_tasks(300, 123) == 177
    assert count_extra_tasks(100, 123) == 0
    # Turn-order waits are counted apart: each costs one more task, and is not waste.
    assert count_extra_tasks(300, 123, 170) == 7
    assert count_extra_tasks(300, 123, 200) == 0


def test_verdict_passes_only_when_nothing_is_lost_duplicated_5xx_and_extra_within_one_percent():
    clean = Figures(deliveries=1000, extra_tasks=10)
    assert verdict(clean) == (True, "PASS: nothing lost, nothing run twice, no 5xx, extra tasks within 1% of deliveries")
    assert verdict(Figures(deliveries=1000, extra_tasks=11)) == (False, "FAIL: extra tasks 11 > 1% of 1000 deliveries")
    assert verdict(Figures(deliveries=10, lost=1)) == (False, "FAIL: 1 lost")
    assert verdict(Figures(deliveries=10, duplicated_turns=1, duplicated_answers=1)) == (False, "FAIL: 2 duplicated")
    assert verdict(Figures(deliveries=10, posts_5xx=2, fuzz_by_status={500: 3, 400: 9})) == (False, "FAIL: 5 5xx")
    f = Figures(deliveries=10, fuzz_by_status={404: 1}, fuzz_problems=["404 text/html <- POST /api/nope"])
    assert verdict(f) == (False, "FAIL: 1 non-JSON/unanswered")
    assert verdict(Figures(deliveries=10, unsettled=4)) == (False, "FAIL: 4 wakes unsettled at the bound")
    f = Figures(deliveries=10, fuzz_log_errors=["ERROR django.request: Internal Server Error: /api/x"])
    assert verdict(f) == (False, "FAIL: 1 errors logged by the server during the fuzz")


def test_error_lines_name_the_exception_under_each_error_and_count_repeats():
    log = "\n".join(
        [
            "INFO django-q: Processed",
            "ERROR django.request: Internal Server Error: /api/x",
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in f',
            "    g()",
            "psycopg.errors.StringDataRightTruncation: value too long for type character varying(200)",
            "",
            "The above exception was the direct cause of the following exception:",
            "",
            "Traceback (most recent call last):",
            '  File "b.py", line 2, in h',
            "django.db.utils.DataError: value too long for type character varying(200)",
            "ERROR django.request: Internal Server Error: /api/x",
            "Traceback (most recent call last):",
            '  File "a.py", line 1, in f',
            "psycopg.errors.StringDataRightTruncation: value too long for type character varying(200)",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            '  File "b.py", line 2, in h',
            "django.db.utils.DataError: value too long for type character varying(200)",
            "INFO:     127.0.0.1:1 - POST /api/x 500",
            "ERROR:    Exception in ASGI application",
            "WARNING seats: something",
        ]
    )
    assert error_lines(log) == [
        "ERROR django.request: Internal Server Error: /api/x | django.db.utils.DataError: "
        "value too long for type character varying(200) (x2)",
        "ERROR:    Exception in ASGI application",
    ]


def test_an_answer_is_json_only_with_a_json_type_and_a_body_that_parses():
    assert Answer(400, "application/json", b'{"reason": "invalid-input"}').is_json
    assert not Answer(403, "text/html; charset=utf-8", b"<h1>CSRF</h1>").is_json
    assert not Answer(500, "application/json", b"<html>").is_json


def test_the_fuzz_cases_probe_every_column_at_and_over_its_length():
    names = [c.name for c in fuzz_cases(mailbox="m.box", board_mailbox="m.desk", board="tasks", coordinator="m.help")]
    assert len(names) == len(set(names)) and len(names) < 400
    for probe in (
        "userId 200 chars",
        "userId 201 chars",
        "Idempotency-Key 255 chars",
        "Idempotency-Key 256 chars",
        "mailbox sessionId 300 chars",
        "mailbox sessionId 301 chars",
        "fileTask assignee 201 chars",
        "worker session sessionId 301 chars",
        "userId with ':'",
        "POST /api/nope",
        "nesting depth 100000",
    ):
        assert probe in names
