"""The API's one body format: JSON, parsed without ever overflowing the stack."""

from __future__ import annotations

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """DRF's JSONParser, with nesting deep enough to overflow Python's stack refused as
    a parse error (400 ``invalid-input``) instead of a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON nested too deeply.") from None
