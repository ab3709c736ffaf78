"""Independent checks for the privacy erase tests: does a string (or a parsed JSON value) hold
an erased value in a form the service treats as equal to it?

Deliberately NOT the code under test (``memory.domain.redact``): equality here is the
service's own ``normalize_value`` (NFKC, whitespace, casefold) applied to whole strings, with
format characters (soft hyphen, zero-width space …) removed on both sides, as the erase
promises (docs/decisions.md, "Privacy erase")."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from memory.domain import normalize_value


def plain(text: str) -> str:
    kept = "".join(c for c in text if unicodedata.category(c) != "Cf")
    return normalize_value(kept)


def _word(ch: str) -> bool:
    return ch == "_" or ch.isalnum() or unicodedata.category(ch).startswith("M")


def holds(text: str, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a whole token: each side of it the edge of the
    text, whitespace, or a character that is neither a word character (letter, mark, digit,
    ``_``) nor one of the value's own (SPEC §6: erasing ``val1`` leaves ``val10``)."""
    needle, hay = plain(value), plain(text)
    if not needle:  # a value of format characters only: then they count
        needle, hay = normalize_value(value), normalize_value(text)
    if not needle:
        return False
    at = hay.find(needle)
    while at >= 0:
        end = at + len(needle)
        sides = [hay[at - 1] if at > 0 else " ", hay[end] if end < len(hay) else " "]
        if all(c.isspace() or not (_word(c) or c in needle) for c in sides):
            return True
        at = hay.find(needle, at + 1)
    return False


def strings(data: Any) -> Iterator[str]:
    """Every string VALUE of parsed JSON (object keys excluded)."""
    if isinstance(data, str):
        yield data
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)
    elif isinstance(data, dict):
        for item in data.values():
            yield from strings(item)


def shape(data: Any) -> Any:
    """Parsed JSON with every string value blanked: what redaction must never change."""
    if isinstance(data, str):
        return str
    if isinstance(data, list):
        return [shape(item) for item in data]
    if isinstance(data, dict):
        return {k: shape(v) for k, v in data.items()}
    return data


def leaks(texts: Iterable[str], values: Iterable[str]) -> list[tuple[str, str]]:
    """(value, text) pairs where a text still holds a value."""
    values = list(values)
    return [(v, t) for t in texts for v in values if holds(t, v)]
