"""An action's input check (``workforce.flows.Action.validate``): one serializer per action,
reused across calls and threads, refusing what DRF refuses with DRF's messages."""

from __future__ import annotations

import threading

import pytest
from rest_framework import serializers

from workforce.flows import Action
from workforce.refusals import Refusal


class _Input(serializers.Serializer):
    body = serializers.CharField(max_length=20)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    count = serializers.IntegerField(required=False, min_value=1)


ACTION = Action("post", lambda ctx, data: None, _Input)


def refusal(data) -> Refusal:
    with pytest.raises(Refusal) as caught:
        ACTION.validate(data)
    assert caught.value.reason == "invalid-input"
    return caught.value


def test_the_cleaned_input_comes_back():
    assert ACTION.validate({"body": "hello", "count": "3"}) == {"body": "hello", "count": 3}
    assert ACTION.validate({"body": "again", "tags": ["a"]}) == {"body": "again", "tags": ["a"]}


def test_field_errors_are_drfs_and_nothing_carries_over_to_the_next_call():
    assert "body" in str(refusal({"count": 0}))  # required body, and count below its minimum
    assert "count: Ensure this value is greater than or equal to 1." in str(refusal({"body": "x", "count": 0}))
    assert "no more than 20" in str(refusal({"body": "x" * 21}))
    assert ACTION.validate({"body": "fine"}) == {"body": "fine"}  # the shared serializer kept no error


def test_a_lone_surrogate_is_refused_with_drfs_message_in_a_field_and_in_a_list():
    assert "Surrogate characters are not allowed: U+D83D." in str(refusal({"body": "a\ud83db"}))
    assert "Surrogate characters are not allowed: U+DC00." in str(refusal({"body": "ok", "tags": ["\udc00"]}))
    assert ACTION.validate({"body": "emoji 😀"}) == {"body": "emoji 😀"}  # a pair is one character, not a surrogate


def test_undeclared_keys_and_non_objects_are_refused():
    assert "does not take" in str(refusal({"body": "x", "other": 1}))
    assert "takes a JSON object" in str(refusal(["body"]))


def test_threads_validating_at_once_each_get_their_own_answer():
    results: dict[int, object] = {}

    def check(n: int) -> None:
        for _ in range(200):
            data = {"body": f"t{n}"} if n % 2 else {"body": "x" * 30}
            try:
                results[n] = ACTION.validate(data)
            except Refusal as refused:
                results[n] = refused.reason

    threads = [threading.Thread(target=check, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: ({"body": f"t{n}"} if n % 2 else "invalid-input") for n in range(8)}
