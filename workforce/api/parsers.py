"""The API's one body format: JSON, parsed without ever overflowing the stack, holding
only what the store can keep."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from workforce.wire import check_storable


class SafeJSONParser(JSONParser):
    """DRF's JSONParser, with nesting deep enough to overflow Python's stack refused as
    a parse error (400 ``invalid-input``) instead of a 500, and a body holding text the
    store cannot keep (a NUL or a lone surrogate in any value or key, at any depth; a
    non-finite number) refused as ``invalid-input`` before any view reads it
    (``workforce.wire``: the one input rule)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
        check_storable(data, label="the body")
        return data
