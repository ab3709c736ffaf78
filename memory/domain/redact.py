"""Redaction of erased values (SPEC §6): find every form of a value the service treats as equal
to it inside a string, as a whole token, and replace only that; walk parsed JSON and touch only
string values; leave alone what another kept fact of the same observation says.

Matching folds both sides with the Unicode *compatibility caseless* form
``NFKD(casefold(NFKD(casefold(NFD(x)))))``, collapses whitespace runs to one space and drops
format characters (category Cf: soft hyphen, zero-width space and joiners, bidi marks). Two
values that :func:`memory.domain.model.normalize_value` calls equal (NFKC, whitespace, case) fold
to the same string, so a full-width or upper-case copy of a secret is found; a copy broken up
by a soft hyphen is found too, although the service stores it as another value, because it
reads the same to a person (docs/decisions.md, "Privacy erase").

A match counts only as a **whole token**: the folded character before it and the one after it
(if any) must each be whitespace, or neither a word character (a letter, mark, digit or ``_``)
nor a character of the value itself. Erasing ``val1`` leaves ``val10`` whole, erasing ``a-b``
leaves ``a-b-c``, and erasing ``Lisbon`` does redact ``Lisbon-north`` — unless that span is
what another fact the erase keeps says (``keep``): a match inside a kept span is never
replaced.

The fold is applied chunk by chunk (a character that starts a combining sequence and the marks
that follow it), so every folded character knows the span of the original it came from: a
match is replaced in the ORIGINAL string, whole chunks at a time, and everything around it is
left exactly as it was. Many values at once (a key with 100,000 versions) are searched in one
pass with an Aho-Corasick automaton, linear in the text whatever the number of values.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Collection, Iterable
from typing import Any

import ahocorasick

#: What an erased value is replaced with, unless the marker itself holds an erased value
#: (a value ``erased`` or ``[``): then the next candidate; the last one, "", deletes.
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


def is_word(ch: str) -> bool:
    """A character that continues a token: a letter, mark or digit of any script, or ``_``
    (keys are snake_case: erasing ``rk1`` leaves ``rk1_total``)."""
    return ch == "_" or (ch.isascii() and ch.isalnum()) or (
        not ch.isascii() and unicodedata.category(ch)[0] in "LMN")


def bounded(folded: str, first: int, last: int) -> bool:
    """Whether ``folded[first:last + 1]`` stands as a whole token (module docstring)."""
    needle = folded[first:last + 1]
    for at in (first - 1, last + 1):
        if 0 <= at < len(folded):
            ch = folded[at]
            if ch != " " and (is_word(ch) or ch in needle):
                return False
    return True


def _occurrences(folded: str, needle: str) -> Iterable[tuple[int, int]]:
    """Whole-token occurrences of ``needle`` in ``folded``, as (first, last) indices."""
    at = folded.find(needle)
    while at >= 0:
        last = at + len(needle) - 1
        if bounded(folded, at, last):
            yield at, last
        at = folded.find(needle, at + 1)


def kept_spans(text: str, keep: Collection[str], erased: Collection[str]) -> list[tuple[int, int]]:
    """Where ``text`` says what a kept fact says: in any folded form, or, when that form is
    also an erased value's (``erased``: folded needles; ``LISBON`` kept, ``Lisbon`` erased),
    only as written."""
    out: list[tuple[int, int]] = []
    folded, starts, ends = fold_map(text)
    for k in keep:
        needle = _needle(k)
        if not needle:
            continue
        if needle in erased:
            out += [(f, la + 1) for f, la in _occurrences(text, k)]
        elif starts is None:
            out += [(f, la + 1) for f, la in _occurrences(folded, needle)]
        else:
            out += [(starts[f], ends[la]) for f, la in _occurrences(folded, needle)]
    return out


class Redactor:
    """Replaces every whole-token occurrence of any of ``values`` (in any folded form) in
    strings and in parsed JSON. Values made only of format characters are matched with those
    kept. ``names`` are the erased key's names (canonical, as :func:`normalize_key` gives):
    a fact naming one of them is the erased key's, and :meth:`facts` redacts it whole."""

    def __init__(self, values: Iterable[str], *, names: Collection[str] = (),
                 normalize_key: Callable[[str], str] | None = None) -> None:
        self._passes: list[tuple[bool, Any]] = []
        self.names = frozenset(names)
        self._normalize_key = normalize_key or (lambda k: k)
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
        self.marker = next(m for m in MARKERS if not m or not self._spans(m, ()))
        # Redacted strings by original: an observation's extraction repeats the same keys,
        # assertions and extractor names once per fact (bounded: 64k distinct strings).
        self._seen: dict[str, str] = {}
        self._straddles = {m: self._may_straddle(m) for m in MARKERS}

    def _may_straddle(self, marker: str) -> bool:
        """Can a value form anew at the edge of ``marker`` once it replaced a match? Only if
        some value holds the marker's first or last character, or the marker deletes (which
        joins the text around it); otherwise one round of replacement suffices."""
        folded = fold(marker)
        if not folded:
            return True
        return any(edge in n for edge in {folded[0], folded[-1]} for n in self._needles)

    def __bool__(self) -> bool:
        return bool(self._passes)

    def _spans(self, text: str, keep: Collection[str]) -> list[tuple[int, int]]:
        """The spans of ``text`` (original indices) that hold a value as a whole token and
        lie inside no kept span, merged, in order."""
        spans: list[tuple[int, int]] = []
        for drop_format, automaton in self._passes:
            folded, starts, ends = fold_map(text, drop_format=drop_format)
            for last, length in automaton.iter(folded):
                first = last - length + 1
                if bounded(folded, first, last):
                    spans.append((first, last + 1) if starts is None
                                 else (starts[first], ends[last]))
        if spans and keep:
            kept = kept_spans(text, keep, self._needles)
            spans = [(s, e) for s, e in spans if not any(ks <= s and e <= ke for ks, ke in kept)]
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

    def text(self, text: str, *, keep: Collection[str] = (),
             max_length: int | None = None) -> str:
        """``text`` with every erased value replaced, except inside the spans that hold one
        of ``keep`` (what the observation's kept facts say); nothing else changes (the very
        same object when there was nothing to replace). With ``max_length`` (a varchar
        column) a longer result takes the one-character marker, or deletes, to fit."""
        if not self._passes or (len(text) < self._shortest and text.isascii()):
            return text
        cache = max_length is None and not keep
        if cache and text in self._seen:
            return self._seen[text]
        spans = self._spans(text, keep)
        result = self._redact(text, spans, self.marker, keep) if spans else text
        if max_length is not None and len(result) > max_length:
            short = "" if self._spans(MARKERS[1], ()) else MARKERS[1]
            result = self._redact(text, spans, short, keep)
        elif cache and len(self._seen) < 65536:
            self._seen[text] = result
        return result

    def _redact(self, text: str, spans: list[tuple[int, int]], marker: str,
                keep: Collection[str]) -> str:
        text = self._replace(text, spans, marker)
        rounds = 1
        while self._straddles[marker]:
            spans = self._spans(text, keep)
            if not spans:
                break
            if rounds >= 8:  # a value keeps forming at the marker's edge: delete instead
                marker = ""
            text = self._replace(text, spans, marker)
            rounds += 1
        return text

    def data(self, value: Any, keep: Collection[str] = ()) -> Any:
        """Parsed JSON with the erased values replaced in string values only: object keys,
        numbers, booleans and the structure stay as they are (a value ``value`` never renames
        a field). Returns ``value`` itself, not a copy, when nothing in it changed."""
        kind = type(value)
        if kind is str:
            return self.text(value, keep=keep)
        if kind is dict:
            out: dict[str, Any] | None = None
            for k, v in value.items():
                if v is None or type(v) in (bool, int, float):
                    continue  # (a call saved per scalar: an extraction holds thousands)
                new = self.data(v, keep)
                if new is not v:
                    if out is None:
                        out = dict(value)
                    out[k] = new
            return value if out is None else out
        if kind is list:
            items: list[Any] | None = None
            for i, v in enumerate(value):
                new = self.data(v, keep)
                if new is not v:
                    if items is None:
                        items = list(value)
                    items[i] = new
            return value if items is None else items
        return value

    # --- an observation's facts --------------------------------------------------------------

    def erased_fact(self, fact: Any) -> bool:
        """Whether ``fact`` (an item of a facts list) names the erased key."""
        key = fact.get("key") if isinstance(fact, dict) else None
        return isinstance(key, str) and self._normalize_key(key) in self.names

    def kept(self, *fact_lists: Any) -> list[str]:
        """What the facts the erase keeps say (their keys and values): spans never redacted."""
        out: list[str] = []
        for facts in fact_lists:
            for fact in facts if isinstance(facts, list) else ():
                if isinstance(fact, dict) and not self.erased_fact(fact):
                    out += [s for s in (fact.get("key"), fact.get("value"))
                            if isinstance(s, str) and s.strip()]
        return out

    def facts(self, facts: Any, keep: Collection[str] = ()) -> Any:
        """A facts list: a fact of the erased key loses its key and value (the marker) and
        its metadata (the member goes), its other strings redacted; a kept fact is never
        touched. Anything that is not a list of facts is redacted as plain JSON."""
        if not isinstance(facts, list):
            return self.data(facts, keep)
        out: list[Any] | None = None
        for i, fact in enumerate(facts):
            if self.erased_fact(fact):
                new = {k: self.data(v, keep) for k, v in fact.items() if k != "metadata"}
                new["key"] = self.marker
                if isinstance(fact.get("value"), str):
                    new["value"] = self.marker
            elif isinstance(fact, dict):
                continue
            else:
                new = self.data(fact, keep)
            if new != fact or type(new) is not type(fact):
                if out is None:
                    out = list(facts)
                out[i] = new
        return facts if out is None else out
