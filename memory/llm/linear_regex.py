"""Regular expressions in linear time: Python's syntax and meaning, run by RE2.

Python's ``re`` backtracks, so a pattern as plain as ``^(?P<a>.+?) to (?P<b>.+?)$`` costs time
polynomial in the length of a line built to defeat it, and the rule extractor runs patterns on
text anyone may send. RE2 (``google-re2``) runs any pattern it accepts as an automaton: time
linear in the text, whatever the text.

A pattern here is parsed by Python's own parser (``re._parser``: the syntax, the group numbers
and names, the flags are exactly Python's) and written out again for RE2 with the same meaning:

- ``\\d``, ``\\w``, ``\\s`` and their negations are written as the explicit code-point ranges
  that Python's ``re`` gives them (Unicode, or ASCII under ``re.ASCII``); RE2's own are ASCII.
- Case-insensitive matching uses RE2's Unicode simple case folding, which agrees with Python's
  for every code point but the Turkish i's (Python makes ``I i İ ı`` one class): those are
  written out as that class.
- ``$`` without MULTILINE is end of text or before a final newline, as in Python (written
  ``\\n?\\z``: it consumes that newline, which changes the end of the whole match but no group
  that ends before it).

What RE2 cannot run in linear time is refused when the pattern is compiled
(:class:`UnsupportedPattern`, a ValueError, naming the construct): lookahead and lookbehind,
backreferences, conditional groups, possessive quantifiers, atomic groups, the Unicode word
boundary ``\\b``/``\\B`` (allowed under ``re.ASCII``), repeat counts over 1000, and a repeated
group that can match the empty string (Python captures a last, empty iteration of it; RE2 makes
none).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2

# Python's own parser and its node types: the syntax stays Python's. (Private modules of `re`,
# stable since 3.11, which typeshed does not describe.)
sre: Any = importlib.import_module("re._constants")
sre_parse: Any = importlib.import_module("re._parser")

IGNORECASE = sre.SRE_FLAG_IGNORECASE
ASCII = sre.SRE_FLAG_ASCII
DOTALL = sre.SRE_FLAG_DOTALL
MULTILINE = sre.SRE_FLAG_MULTILINE
_RE2_MAX_REPEAT = 1000
_SURROGATES = range(0xD800, 0xE000)
#: Python's one case-insensitive class that RE2's case folding splits in two.
_TURKISH_I = (0x49, 0x69, 0x130, 0x131)
_CATEGORY_RE = {
    sre.CATEGORY_DIGIT: r"\d+", sre.CATEGORY_NOT_DIGIT: r"\D+",
    sre.CATEGORY_SPACE: r"\s+", sre.CATEGORY_NOT_SPACE: r"\S+",
    sre.CATEGORY_WORD: r"\w+", sre.CATEGORY_NOT_WORD: r"\W+",
}
_REFUSED = {
    sre.ASSERT: "lookahead/lookbehind", sre.ASSERT_NOT: "negative lookahead/lookbehind",
    sre.GROUPREF: "backreference", sre.GROUPREF_EXISTS: "conditional group",
    sre.POSSESSIVE_REPEAT: "possessive quantifier", sre.ATOMIC_GROUP: "atomic group",
}


class UnsupportedPattern(ValueError):
    """A construct that no linear-time engine can run (the message names it)."""


# --- the code-point ranges of Python's classes ------------------------------------------------


@cache
def _all_code_points() -> tuple[str, str]:
    """Every code point but the surrogates, as two strings (below and above them)."""
    return ("".join(map(chr, range(0xD800))), "".join(map(chr, range(0xE000, 0x110000))))


@cache
def category_ranges(category: Any, ascii_only: bool) -> tuple[tuple[int, int], ...]:
    """The code points Python's ``re`` puts in ``category`` (``\\w``, ``\\S``, ...), as ranges:
    found by running Python's own class over every code point (one C-speed pass, cached)."""
    regex = re.compile(_CATEGORY_RE[category], re.ASCII if ascii_only else 0)
    ranges = []
    for base, chars in zip((0, 0xE000), _all_code_points(), strict=True):
        ranges += [(base + m.start(), base + m.end() - 1) for m in regex.finditer(chars)]
    return tuple(ranges)


def _esc(code: int) -> str:
    if code in _SURROGATES:
        raise UnsupportedPattern("a lone surrogate code point in the pattern")
    char = chr(code)
    return char if char.isascii() and char.isalnum() else f"\\x{{{code:X}}}"


def _span(lo: int, hi: int) -> Iterable[str]:
    """``lo-hi`` for an RE2 class, without the surrogates (RE2 works on UTF-8)."""
    pieces = [(lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)]
    for a, b in pieces:
        if a <= b:
            yield _esc(a) if a == b else f"{_esc(a)}-{_esc(b)}"


# --- the translation ------------------------------------------------------------------------


class _Writer:
    """Writes a parsed Python pattern as RE2 syntax (every capturing group unnamed: RE2
    numbers them as Python does, and names are kept on our side)."""

    def items(self, items: Iterable[tuple[Any, Any]], flags: int) -> str:
        return "".join(self.item(op, av, flags) for op, av in items)

    def item(self, op: Any, av: Any, flags: int) -> str:  # noqa: PLR0911 - one case per node
        if op in _REFUSED:
            raise UnsupportedPattern(f"{_REFUSED[op]} cannot run in linear time")
        if op is sre.LITERAL:
            return self.literal(av, flags)
        if op is sre.NOT_LITERAL:
            return self.charset([(sre.LITERAL, av)], flags, negate=True)
        if op is sre.ANY:
            return "(?s:.)" if flags & DOTALL else "."
        if op is sre.IN:
            return self.charset(av, flags)
        if op is sre.BRANCH:
            return "(?:" + "|".join(self.items(branch, flags) for branch in av[1]) + ")"
        if op is sre.SUBPATTERN:
            group, add, remove, body = av
            inner = self.items(body, (flags | add) & ~remove)
            return f"({inner})" if group is not None else f"(?:{inner})"
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            return self.repeat(av, flags, lazy=op is sre.MIN_REPEAT)
        if op is sre.AT:
            return self.at(av, flags)
        raise UnsupportedPattern(f"{op} is not supported")

    def literal(self, code: int, flags: int) -> str:
        if not flags & IGNORECASE:
            return _esc(code)
        if flags & ASCII:  # ASCII case folding only
            char = chr(code)
            if char.isascii() and char.isalpha():
                return f"[{char.lower()}{char.upper()}]"
            return _esc(code)
        if code in _TURKISH_I:
            return "[" + "".join(_esc(c) for c in _TURKISH_I) + "]"
        return f"(?i:{_esc(code)})"

    def charset(self, items: list[tuple[Any, Any]], flags: int, negate: bool = False) -> str:
        ranges: list[tuple[int, int]] = []
        for op, av in items:
            if op is sre.NEGATE:
                negate = not negate
            elif op is sre.LITERAL:
                ranges.append((av, av))
            elif op is sre.RANGE:
                ranges.append(av)
            elif op is sre.CATEGORY:
                ranges += category_ranges(av, bool(flags & ASCII))
            else:
                raise UnsupportedPattern(f"{op} in a character class is not supported")
        folded = bool(flags & IGNORECASE)
        if folded and flags & ASCII:
            ranges += _ascii_case_partners(ranges)
            folded = False
        elif folded and any(lo <= c <= hi for lo, hi in ranges for c in _TURKISH_I):
            ranges += [(c, c) for c in _TURKISH_I]
        body = "".join(piece for lo, hi in _merge(ranges) for piece in _span(lo, hi))
        if not body:  # an empty class: matches nothing (negated: any code point)
            body, negate = "\\x{0}-\\x{10FFFF}", not negate
        text = f"[{'^' if negate else ''}{body}]"
        return f"(?i:{text})" if folded else text

    def repeat(self, av: tuple[int, int, Any], flags: int, lazy: bool) -> str:
        low, high, body = av
        if low > _RE2_MAX_REPEAT or (high is not sre.MAXREPEAT and high > _RE2_MAX_REPEAT):
            raise UnsupportedPattern(f"repeat counts over {_RE2_MAX_REPEAT}")
        if high is not sre.MAXREPEAT and high <= 1:
            pass  # at most one iteration: nothing to disagree about
        elif _nullable(body):
            # Python records the groups of a last, empty iteration, and ends the repeat there
            # even where a later alternative could go on (``(?:a*|b)*`` on "ab" matches "a");
            # RE2 never makes an empty iteration, so it takes the alternative.
            raise UnsupportedPattern("a repeated group that can match the empty string")
        if high is sre.MAXREPEAT:
            quant = {0: "*", 1: "+"}.get(low, f"{{{low},}}")
        else:
            quant = "?" if (low, high) == (0, 1) else (
                f"{{{low}}}" if low == high else f"{{{low},{high}}}")
        return f"(?:{self.items(body, flags)}){quant}{'?' if lazy else ''}"

    def at(self, code: Any, flags: int) -> str:
        multiline = bool(flags & MULTILINE)
        if code is sre.AT_BEGINNING:
            return "(?m:^)" if multiline else "\\A"
        if code is sre.AT_BEGINNING_STRING:
            return "\\A"
        if code is sre.AT_END:
            return "(?m:$)" if multiline else "(?:\\n?\\z)"
        if code is sre.AT_END_STRING:
            return "\\z"
        if code in (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY) and flags & ASCII:
            return "\\b" if code is sre.AT_BOUNDARY else "\\B"
        raise UnsupportedPattern("a Unicode word boundary (\\b, \\B) cannot run in linear time"
                                 " (it can under re.ASCII)")


def _nullable(items: Iterable[tuple[Any, Any]]) -> bool:
    """Can these items match the empty string?"""
    for op, av in items:
        if op is sre.AT:
            continue
        if op is sre.BRANCH:
            if not any(_nullable(branch) for branch in av[1]):
                return False
        elif op is sre.SUBPATTERN:
            if not _nullable(av[3]):
                return False
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            if av[0] > 0 and not _nullable(av[2]):
                return False
        else:  # a character of some kind
            return False
    return True


def _captures(items: Iterable[tuple[Any, Any]]) -> bool:
    """Do these items hold a capturing group?"""
    for op, av in items:
        if op is sre.SUBPATTERN and (av[0] is not None or _captures(av[3])):
            return True
        if op is sre.BRANCH and any(_captures(branch) for branch in av[1]):
            return True
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and _captures(av[2]):
            return True
    return False


def _merge(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _ascii_case_partners(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    partners = []
    for lo, hi in ranges:
        for start, end, shift in ((0x41, 0x5A, 0x20), (0x61, 0x7A, -0x20)):
            a, b = max(lo, start), min(hi, end)
            if a <= b:
                partners.append((a + shift, b + shift))
    return partners


def to_re2(pattern: str, flags: int = 0) -> tuple[str, dict[str, int], int]:
    """RE2 syntax for Python ``pattern``: (RE2 pattern, group names -> numbers, group count).
    Raises :class:`UnsupportedPattern`, or ``re.error`` for a pattern Python rejects."""
    parsed = sre_parse.parse(pattern, flags)
    body = _Writer().items(parsed, parsed.state.flags)
    return body, dict(parsed.state.groupdict), parsed.state.groups - 1


# --- compiled patterns and their matches ------------------------------------------------------


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 64 << 20  # the Unicode classes make big programs; still bounded
    return options


@dataclass(frozen=True)
class LinearMatch:
    """The part of ``re.Match`` the extractor uses."""

    string: str
    spans: tuple[tuple[int, int], ...]  # by group number; (-1, -1) when it did not take part
    groupindex: dict[str, int]

    def span(self, group: int | str = 0) -> tuple[int, int]:
        return self.spans[self.groupindex[group] if isinstance(group, str) else group]

    def start(self, group: int | str = 0) -> int:
        return self.span(group)[0]

    def end(self, group: int | str = 0) -> int:
        return self.span(group)[1]

    def group(self, group: int | str = 0) -> str | None:
        start, end = self.span(group)
        return None if start < 0 else self.string[start:end]

    def groupdict(self) -> dict[str, str | None]:
        return {name: self.group(name) for name in self.groupindex}


class LinearPattern:
    """A compiled pattern: ``compile_linear(pattern, flags)``. ``match`` anchors at the start
    like ``re.Pattern.match``; time is linear in the text."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        translated, self.groupindex, self.groups = to_re2(pattern, flags)
        self.re2_pattern = translated
        try:
            self._regexp = re2.compile(translated, _options())._regexp
        except re2.error as exc:  # a limit of RE2's (program size): say so, as a refusal
            raise UnsupportedPattern(f"RE2 cannot compile it: {exc}") from exc

    def __repr__(self) -> str:
        return f"LinearPattern({self.pattern!r})"

    def match(self, text: str) -> LinearMatch | None:
        spans = self.spans(text)
        return None if spans is None else LinearMatch(text, spans, self.groupindex)

    def fullmatch(self, text: str) -> LinearMatch | None:
        spans = self.spans(text, anchor=_ANCHOR_BOTH)
        return None if spans is None else LinearMatch(text, spans, self.groupindex)

    def spans(self, text: str, anchor: Any = None) -> tuple[tuple[int, int], ...] | None:
        """The spans of a match at the start of ``text`` (code-point offsets, by group
        number), or None."""
        data = _encoded(text)
        # The engine itself (the wrapper's generator-based match costs as much again).
        spans = self._regexp.Match(anchor or _ANCHOR_START, data, 0, len(data))
        if spans[0][0] < 0:
            return None
        if len(data) != len(text):  # not ASCII: byte offsets -> code-point offsets
            return tuple(_char_span(data, span) for span in spans)
        return tuple(spans)


def _char_span(data: bytes, span: tuple[int, int]) -> tuple[int, int]:
    if span[0] < 0:
        return span
    start = len(data[: span[0]].decode("utf-8"))
    return start, start + len(data[span[0] : span[1]].decode("utf-8"))


_ANCHOR_START = re2._Anchor.ANCHOR_START
_ANCHOR_BOTH = re2._Anchor.ANCHOR_BOTH
_last_encoded: tuple[str, bytes] = ("", b"")


def _encoded(text: str) -> bytes:
    """UTF-8 of ``text``, a lone surrogate (JSON can carry one) as U+FFFD: one code point for
    one, so offsets hold. Remembered for the last text (by identity): the extractor tries
    several patterns on one sentence."""
    global _last_encoded
    last = _last_encoded
    if last[0] is text:
        return last[1]
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = "".join("\ufffd" if 0xD800 <= ord(c) < 0xE000 else c for c in text).encode()
    _last_encoded = (text, data)
    return data


class LinearSet:
    """Which of several patterns can match at the start of a text, in one pass (RE2::Set):
    the extractor asks this first and runs only those, instead of every pattern in turn.
    ``candidates`` answers None (try them all) for texts over :data:`SET_MAX_CHARS`: a set
    runs as a DFA, which on a long enough text could run out of memory and answer "none"."""

    SET_MAX_CHARS = 2000

    def __init__(self, patterns: Iterable[LinearPattern]) -> None:
        self._set = re2.Set.MatchSet(_options())
        for pattern in patterns:
            self._set.Add(pattern.re2_pattern)
        self._set.Compile()

    def candidates(self, text: str) -> list[int] | None:
        if len(text) > self.SET_MAX_CHARS:
            return None
        return sorted(self._set.Match(_encoded(text)) or ())


def compile_linear(pattern: str, flags: int = 0) -> LinearPattern:
    """Compile a Python regular expression to run in linear time (module docstring)."""
    return LinearPattern(pattern, flags)
