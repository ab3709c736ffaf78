"""Metadata of facts and the filters that select by it (CONTRACT "One application credential,
many users' memories"): a flat JSON object of strings, numbers and booleans, kept with the
version a fact creates. A filter has the same shape and matches a version whose metadata holds
each of its entries (equality; a number equals the same number however it is written).

Bounded so that one version never carries more than a few kilobytes beside its value, and
checked here once for the API, the import and the clients' tests alike.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_ENTRIES = 32
MAX_KEY_CHARS = 64
MAX_STRING_CHARS = 500
MAX_JSON_BYTES = 4096
#: Integers every JSON reader holds exactly (JavaScript's Number.MAX_SAFE_INTEGER).
MAX_SAFE_INTEGER = 2**53 - 1

Scalar = str | int | float | bool
Metadata = dict[str, Scalar]


class MetadataRefused(ValueError):
    """The object is not metadata this service keeps; the message says which entry and why."""


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY_CHARS:
        raise MetadataRefused(f"key {key!r}: 1 to {MAX_KEY_CHARS} characters")
    if not key.isprintable():
        raise MetadataRefused(f"key {key!r}: printable characters only")
    return key


def _check_value(key: str, value: object) -> Scalar:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise MetadataRefused(f"{key!r}: integers within ±{MAX_SAFE_INTEGER}")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MetadataRefused(f"{key!r}: a finite number")
        # PostgreSQL keeps 1e300 as a 301-digit integer, which no JSON reader (nor the
        # importer) takes back: every number stays within the integers JSON holds exactly.
        if abs(value) > MAX_SAFE_INTEGER:
            raise MetadataRefused(f"{key!r}: numbers within ±{MAX_SAFE_INTEGER}")
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise MetadataRefused(f"{key!r}: strings of at most {MAX_STRING_CHARS} characters")
        if "\x00" in value:  # PostgreSQL's jsonb cannot hold U+0000
            raise MetadataRefused(f"{key!r}: no NUL characters")
        return value
    kind = "null" if value is None else type(value).__name__
    raise MetadataRefused(f"{key!r}: a string, a number or a boolean, not {kind} "
                          f"(metadata is flat)")


def clean_metadata(value: object) -> Metadata | None:
    """``value`` as metadata (None for an empty object: no metadata), else
    :class:`MetadataRefused`."""
    if not isinstance(value, dict):
        raise MetadataRefused("an object of strings, numbers and booleans")
    if len(value) > MAX_ENTRIES:
        raise MetadataRefused(f"at most {MAX_ENTRIES} entries")
    cleaned = {_check_key(k): _check_value(k, v) for k, v in value.items()}
    size = len(json.dumps(cleaned, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_JSON_BYTES:
        raise MetadataRefused(f"at most {MAX_JSON_BYTES} bytes of JSON ({size} given)")
    return cleaned or None


def parse_filter(raw: str) -> Metadata | None:
    """A filter sent as JSON text (a query parameter), else :class:`MetadataRefused`."""
    try:
        value: Any = json.loads(raw)
    except ValueError:
        raise MetadataRefused("a JSON object, e.g. {\"user\": \"alice\"}") from None
    return clean_metadata(value)

