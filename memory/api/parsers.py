"""The API's one request parser: JSON, bounded in depth.

Python's JSON decoder recurses once per level of nesting: a body of 100,000 ``[`` (well
under the size limit) raised RecursionError, a 500. And a body that parses, nested a few
hundred levels deep, can still exhaust the stack later, when a validation message quotes it.
No request of the API nests deeper than a few levels, so a body deeper than
:data:`MAX_JSON_DEPTH` is refused as malformed (400 naming the body, by
``memory.api.errors``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import exceptions, parsers

#: Far deeper than any request of the API (an observation's facts are three levels).
MAX_JSON_DEPTH = 32


class BoundedJSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise exceptions.ParseError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
        if _depth_over(data, MAX_JSON_DEPTH):
            raise exceptions.ParseError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        return data


def _depth_over(data: Any, limit: int) -> bool:
    """Is ``data`` nested deeper than ``limit``? Iterative: the check must not recurse."""
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
