"""``workforce.api.views.int_param``: the one reading of a whole-number query parameter
(``limit``, ``offset``, ``after``, ``wait``), refusing with ``invalid-input``."""

from __future__ import annotations

import pytest
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from workforce.api.views import LARGEST_WHOLE, int_param
from workforce.refusals import Refusal


def _read(query: str, **bounds) -> int:
    return int_param(Request(APIRequestFactory().get(f"/x?{query}")), "after", 7, **bounds)


def test_absent_or_empty_is_the_default_and_digits_are_read():
    assert _read("") == 7 and _read("after=") == 7
    assert _read("after=42") == 42 and _read(f"after={LARGEST_WHOLE}") == LARGEST_WHOLE == 999999999999999999
    assert _read("after=0000000000000000000000005") == 5  # leading zeros are not size


@pytest.mark.parametrize(
    ("query", "bounds", "message"),
    [
        ("after=-1", {}, "after must be a whole number, not '-1'."),
        ("after=1e20", {}, "after must be a whole number, not '1e20'."),
        ("after=9223372036854775807", {}, "after must be at most 999999999999999999."),
        ("after=1000000000000000000", {}, "after must be at most 999999999999999999."),
        ("after=" + "9" * 5000, {}, "after must be at most 999999999999999999."),
        ("after=9223372036854775807", {"minimum": 1, "maximum": 1000}, "after must be between 1 and 1000."),
        ("after=0", {"minimum": 1}, "after must be at least 1."),
    ],
)
def test_refusals_say_why(query, bounds, message):
    with pytest.raises(Refusal) as caught:
        _read(query, **bounds)
    assert caught.value.reason == "invalid-input" and caught.value.detail == message
