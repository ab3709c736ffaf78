"""Redaction of erased values (SPEC §6): find every form of a value the service treats as equal
to it inside a string, and replace only that; walk parsed JSON and touch only string values.

Matching folds both sides with the Unicode *compatibility caseless* form
``NFKD(casefold(NFKD(casefold(NFD(x)))))``, collapses whitespace runs to one space and drops
format characters (category Cf: soft hyphen, zero-width space and joiners, bidi marks). Two
values that :func:`memory.domain.model.normalize_value` calls equal (NFKC, whitespace, case) fold
to the same string, so a full-width or upper-case copy of a secret is found; a copy broken up
by a soft hyphen is found too, although the service stores it as another value, because it
reads the same to a person (docs/decisions.md, "Privacy erase").

The fold is applied chunk by chunk (a character that starts a combining sequence and the marks
that follow it), so every folded character knows the span of the original it came from: a
match is replaced in the ORIGINAL string, whole chunks at a time, and everything around it is
left exactly as it was. Many values at once (a key with 100,000 versions) are searched in one
pass with an Aho-Corasick automaton, linear in the text whatever the number of values.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any

import ahocorasick

#: Values shorter than this (folded) are matched as whole words only: erasing a value ``e``
#: must not turn "the" into "th[erased]". Longer ones are matched anywhere, inside words too
#: (a secret followed by a letter is still the secret).
SHORT = 3
#: What an erased value is replaced with, unless the marker itself holds an erased value
#: (a value ``e`` or ``[``): then the next candidate; the last one, "", deletes.
MARKERS = ("[erased]", "\u2588", "")
_ASCII_SPACE = str.maketrans({c: " " for c in "\t\n\v\f\r\x1c\x1d\x1e\x1f"})


def _fold_chunk(chunk: str) -> str:
    nfd = unicodedata.normalize("NFD", chunk)
    return unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", nfd.casefold()).casefold())


def _chunks(text: str) -> Iterable[tuple[int, int]]:
    """Spans of a starter and the combining marks after it (canonical reordering, the only
    non-local part of normalization, never crosses a starter)."""
    start, n = 0, len(text)
    while start < n:
        end = start + 1
        while end < n and unicodedata.combining(text[end]):
            end += 1
        yield start, end
        start = end


def fold_map(text: str, *, drop_format: bool = True) -> tuple[str, list[int] | None, list[int]]:
    """``(folded, starts, ends)``: the folded text and, per folded character, the span of the
    original it came from. ``starts is None`` means the identity map (ASCII without whitespace
    runs, the common case, costs two C calls)."""
    if text.isascii():
        folded = text.lower().translate(_ASCII_SPACE)
        if "  " not in folded:
            return folded, None, []
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for start, end in _chunks(text):
        for ch in _fold_chunk(text[start:end]):
            if drop_format and unicodedata.category(ch) == "Cf":
                continue
            if ch.isspace():
                if out and out[-1] == " ":
                    ends[-1] = end  # a run of whitespace folds to one space
                    continue
                ch = " "
            out.append(ch)
            starts.append(start)
            ends.append(end)
    return "".join(out), starts, ends


def fold(text: str, *, drop_format: bool = True) -> str:
    """The matching form of a value: folded, whitespace collapsed, stripped."""
    return fold_map(text, drop_format=drop_format)[0].strip(" ")


def _needle(value: str) -> str:
    if value.isascii():  # lower case, whitespace runs as one space, stripped: fold, in C
        return " ".join(value.lower().split())
    return fold(value)


class Redactor:
    """Replaces every occurrence of any of ``values`` (in any folded form) in strings and in
    parsed JSON. Values made only of format characters are matched with those kept."""

    def __init__(self, values: Iterable[str]) -> None:
        self._passes: list[tuple[bool, Any]] = []
        plain: set[str] = set()
        formatted: set[str] = set()
        for value in values:
            needle = _needle(value)
            if needle:
                plain.add(needle)
            elif fold(value, drop_format=False):
                formatted.add(fold(value, drop_format=False))
        for drop_format, needles in ((True, plain), (False, formatted)):
            if needles:
                automaton = ahocorasick.Automaton(ahocorasick.STORE_LENGTH)
                for needle in needles:
                    automaton.add_word(needle)
                automaton.make_automaton()
                self._passes.append((drop_format, automaton))
        self._needles = plain | formatted
        #: An ASCII string shorter than every value cannot hold one (its fold is no longer
        #: than itself; other strings can grow: "é" folds to "e" and a combining accent).
        self._shortest = min((len(n) for n in self._needles), default=0)
        self._has_short = self._shortest < SHORT
        self.marker = next(m for m in MARKERS if not m or not self._spans(m))
        # Redacted strings by original: an observation's extraction repeats the same keys,
        # assertions and extractor names once per fact (bounded: 64k distinct strings).
        self._seen: dict[str, str] = {}
        self._straddles = {m: self._may_straddle(m) for m in MARKERS}

    def _may_straddle(self, marker: str) -> bool:
        """Can a value form anew at the edge of ``marker`` once it replaced a match? Only if
        some value holds the marker's first or last character, or the marker deletes (which
        joins the text around it), or a short value may become a whole word beside it;
        otherwise one round of replacement suffices."""
        folded = fold(marker)
        if not folded or self._has_short:
            return True
        return any(edge in n for edge in {folded[0], folded[-1]} for n in self._needles)

    def __bool__(self) -> bool:
        return bool(self._passes)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """The spans of ``text`` (original indices) that hold a value, merged, in order."""
        spans: list[tuple[int, int]] = []
        for drop_format, automaton in self._passes:
            folded, starts, ends = fold_map(text, drop_format=drop_format)
            for last, length in automaton.iter(folded):
                first = last - length + 1
                if length < SHORT and (
                        (folded[first].isalnum() and first > 0 and folded[first - 1].isalnum())
                        or (folded[last].isalnum() and last + 1 < len(folded)
                            and folded[last + 1].isalnum())):
                    continue  # a short value inside a longer word
                if starts is None:
                    spans.append((first, last + 1))
                else:
                    spans.append((starts[first], ends[last]))
        if len(spans) < 2:
            return spans
        spans.sort()
        merged = [spans[0]]
        for start, end in spans[1:]:
            if start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    @staticmethod
    def _replace(text: str, spans: list[tuple[int, int]], marker: str) -> str:
        parts, last = [], 0
        for start, end in spans:
            parts += [text[last:start], marker]
            last = end
        parts.append(text[last:])
        return "".join(parts)

    def text(self, text: str, *, max_length: int | None = None) -> str:
        """``text`` with every erased value replaced; nothing else changes (the very same
        object when there was nothing to replace). With ``max_length`` (a varchar column) a
        longer result takes the one-character marker, or deletes, so that it still fits."""
        if not self._passes or (len(text) < self._shortest and text.isascii()):
            return text
        if max_length is None and text in self._seen:
            return self._seen[text]
        spans = self._spans(text)
        result = self._redact(text, spans, self.marker) if spans else text
        if max_length is not None and len(result) > max_length:
            short = "" if self._spans(MARKERS[1]) else MARKERS[1]
            result = self._redact(text, spans, short)
        elif max_length is None and len(self._seen) < 65536:
            self._seen[text] = result
        return result

    def _redact(self, text: str, spans: list[tuple[int, int]], marker: str) -> str:
        text = self._replace(text, spans, marker)
        rounds = 1
        while self._straddles[marker]:
            spans = self._spans(text)
            if not spans:
                break
            if rounds >= 8:  # a value keeps forming at the marker's edge: delete instead
                marker = ""
            text = self._replace(text, spans, marker)
            rounds += 1
        return text

    def data(self, value: Any) -> Any:
        """Parsed JSON with the erased values replaced in string values only: object keys,
        numbers, booleans and the structure stay as they are (a value ``value`` never renames
        a field). Returns ``value`` itself, not a copy, when nothing in it changed."""
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._dict(value)
        if kind is list:
            return self._list(value)
        return value

    def _child(self, value: Any) -> Any:
        kind = type(value)
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._dict(value)
        if kind is list:
            return self._list(value)
        return value

    def _dict(self, value: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] | None = None
        for k, v in value.items():
            if v is None or type(v) in (bool, int, float):
                continue  # (a call saved per scalar: an extraction holds thousands)
            new = self._child(v)
            if new is not v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out

    def _list(self, value: list[Any]) -> list[Any]:
        out: list[Any] | None = None
        for i, v in enumerate(value):
            new = self._child(v)
            if new is not v:
                if out is None:
                    out = list(value)
                out[i] = new
        return value if out is None else out
