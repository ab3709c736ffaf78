"""The rule extractor runs in linear time on any text, and extracts exactly what the
backtracking one did (tests/llm/backtracking_rules.py, the oracle, on inputs short enough for
it).

Time is bounded two ways, neither a flaky wall-clock assert: every call runs under a generous
per-call limit (a SIGALRM timer: the probe's bait lines took seconds to hours on the old
extractor), and the growth property compares the time of one text with that of the same text
16 times over, where linear work takes ~16 times as long and quadratic work ~256 times."""

from __future__ import annotations

import contextlib
import re
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memory.llm.linear_regex import (
    IGNORECASE,
    LinearPattern,
    UnsupportedPattern,
    category_ranges,
    compile_linear,
)
from memory.llm.rules import DEFAULT_PATTERNS, Pattern, RuleExtractor, key_value_fact
from tests.llm import backtracking_rules as old

MAX_TEXT = 100_000  # PMEM_MAX_TEXT_CHARS: the longest text an observation may carry


class TooSlow(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail the block when it runs over ``seconds`` (Python's ``re`` checks for signals while
    it backtracks, so the old extractor is interrupted too)."""
    def expired(*_: Any) -> None:
        raise TooSlow(f"over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _fit(unit: str, head: str = "", tail: str = "") -> str:
    """``head`` + ``unit`` repeated to fill the text limit + ``tail``."""
    return head + unit * ((MAX_TEXT - len(head) - len(tail)) // len(unit)) + tail


#: The probe's bait lines (cubic and quadratic on the old extractor), grown to the text limit,
#: and the same shapes for the other templates and for list markers and sentence ends.
BAITS = {
    "update template": _fit("x has been moved from ", "Update: ", " y to " * 4000 + ". x"),
    "key: value": "a" + " " * (MAX_TEXT - 2) + "b",
    "key = value, tabs": _fit("\t", "k", "=v"),
    "earlier template": _fit("x was in ", "Earlier observation: ", ". x"),
    "correction template": _fit("x to ", "Correction: the move of ", "was reported in error x"),
    "withdrawal template": _fit("the move of x to ", "The move of ", "reported in error. x"),
    "report template": _fit("x is in ", "Report: ", ". x"),
    "check template": _fit("x is confirmed in ", "Check: ", ". x"),
    "list markers": _fit("- ", "", "x"),
    "sentence ends": _fit(". ", "12", "x"),
}


@pytest.mark.parametrize("name", list(BAITS))
def test_bait_lines_of_the_text_limit_extract_within_a_generous_limit(name: str) -> None:
    with time_limit(10.0):  # ~0.1 s here; seconds to hours before
        RuleExtractor().extract(BAITS[name])


def test_the_probes_update_bait_yields_what_the_old_extractor_read_from_it() -> None:
    def bait(n: int) -> str:
        return "Update: " + "x has been moved from " * n + " y to " * n + ". x"

    with time_limit(20.0):
        assert RuleExtractor().extract(bait(12)) == old.RuleExtractor().extract(bait(12))
        facts = RuleExtractor().extract(bait(400))  # the probe's own: seconds before
    # the first " y to " closes the move's origin (a lazy group), the rest is its destination
    assert [(f.key, f.value) for f in facts] == [("x_location", "  ".join(["y to"] * 399))]


# --- exactly the old extractor's answers --------------------------------------------------------

_WORDS = ["Update:", "update:", "UPDATE:", "has", "been", "moved", "from", "to", "Earlier",
          "observation:", "was", "in", "The", "the", "move", "of", "reported", "error",
          "Correction:", "Report:", "is", "Check:", "confirmed", "mug", "1", "12.", "x", "né",
          "İ", "ı", "K", "ſ", "電話", "born", "city", "chairperson", "Fatah"]
_GLUE = [" ", " ", " ", "  ", "\t", "\u3000", ". ", ".", "..", "! ", "? ", ": ", " = ", ":",
         "=", "- ", "* ", "• ", "//", "\ue000", "\ue001", "'", "/", "_", "\n"]
_TOKENS = st.sampled_from(_WORDS) | st.sampled_from(_GLUE) | st.text(max_size=2)
TEXTS = st.lists(_TOKENS, max_size=18).map("".join)

#: Configured patterns of the kinds users write: a numbered template, a regex with named groups,
#: templates that end with a placeholder or with literal text.
CONFIGURED = [
    {"pattern": "{n}. {subject} was born in the city of {city}.", "key": "{subject}_city",
     "value": "city"},
    {"pattern": r"^\d+\.\s+The chairperson of (?P<org>.+?) is (?P<who>.+?)\.?$",
     "key": "{org}_chair", "value": "who"},
    {"pattern": r"(?P<who>\w+) moved to (?P<city>[\w ]+?)!?$", "key": "{who}_home",
     "value": "city"},
    {"pattern": "{a}: {b} to {c}", "key": "{a}_{b}", "value": "c", "assertion": "reported"},
]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_extraction_equals_the_backtracking_extractor(text: str) -> None:
    with time_limit(10.0):
        expected = old.RuleExtractor([*old.patterns_from_json(CONFIGURED),
                                      *old.DEFAULT_PATTERNS]).extract(text)
    got = RuleExtractor([*_patterns(CONFIGURED), *DEFAULT_PATTERNS]).extract(text)
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_key_value_lines_and_sentence_splits_equal_the_old_ones(text: str) -> None:
    from memory.llm.rules import split_sentences

    for line in text.splitlines() or [text]:
        assert key_value_fact(line) == old.key_value_fact(line)
        assert split_sentences(line) == old.split_sentences(line)


def _patterns(entries: list[dict[str, str]]) -> list[Pattern]:
    from memory.llm.rules import patterns_from_json

    return patterns_from_json(entries)


# --- linear growth ------------------------------------------------------------------------------


def _best_time(run: Callable[[], Any], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, min_size=1, max_size=12).map("".join).filter(lambda s: s.strip()))
def test_time_grows_linearly_with_the_text(seed: str) -> None:
    """The same seed repeated to ~3 KB and to 16 times that: linear work takes ~16 times as
    long; the bound allows 64 (and 50 ms of noise), quadratic work would take ~256."""
    extractor = RuleExtractor([*_patterns(CONFIGURED), *DEFAULT_PATTERNS])
    small = seed * max(1, 3000 // len(seed))
    large = small * 16
    with time_limit(30.0):
        t_small = _best_time(lambda: extractor.extract(small))
        t_large = _best_time(lambda: extractor.extract(large))
    assert t_large <= 64 * t_small + 0.05, (len(small), t_small, t_large)


# --- the linear-time engine keeps Python's meaning ------------------------------------------------

_ATOMS = ["a", "b", "A", "é", "İ", "ı", "K", "ſ", ".", r"\w", r"\d", r"\s", r"\W", r"\S", "[a-c]",
          "[^a]", r"[\d_]", "x", " ", r"\.", "٣", "[^\\W_]", "$", "^"]
_QUANTIFIERS = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{1,2}", "{2}", "{0,3}?"]


@st.composite
def _regexes(draw: Any, depth: int = 0) -> str:
    kind = draw(st.integers(0, 9)) if depth < 3 else 0
    if kind <= 3:
        return draw(st.sampled_from(_ATOMS)) + draw(st.sampled_from(_QUANTIFIERS))
    if kind <= 6:
        return "".join(draw(st.lists(_regexes(depth + 1), min_size=2, max_size=3)))
    quantifier = draw(st.sampled_from(_QUANTIFIERS))
    if kind <= 8:
        return f"(?:{draw(_regexes(depth + 1))}|{draw(_regexes(depth + 1))}){quantifier}"
    return f"(?P<g{depth}{kind}>{draw(_regexes(depth + 1))}){quantifier}"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_regexes(), st.sampled_from([0, re.IGNORECASE, re.DOTALL, re.MULTILINE,
                                    re.IGNORECASE | re.ASCII]),
       st.lists(st.text(alphabet="abAé İıKſ.x 1٣_\n", max_size=8), min_size=1, max_size=4))
def test_patterns_match_as_pythons_re_does(pattern: str, flags: int, texts: list[str]) -> None:
    """Same match or none, same group spans (the end of a whole match may differ by a final
    newline that a ``$`` consumed: the module docstring)."""
    try:
        python = re.compile(pattern, flags)
    except re.error:  # "nothing to repeat" and the like: not a pattern at all
        assume(False)
    try:
        linear = compile_linear(pattern, flags)
    except UnsupportedPattern:
        assume(False)
    for text in texts:
        expected, got = python.match(text), linear.match(text)
        assert (got is None) == (expected is None), (text, expected, got)
        if expected is not None and got is not None:
            groups = range(1, python.groups + 1)
            assert [got.span(g) for g in groups] == [expected.span(g) for g in groups], text
            assert got.span()[0] == expected.span()[0]


@pytest.mark.parametrize(("pattern", "construct"), [
    (r"a(?=b)", "lookahead"), (r"(?<!a)b", "lookbehind"), (r"(a)\1", "backreference"),
    (r"(a)?(?(1)b|c)", "conditional"), (r"\bword", "word boundary"), (r"a{2000}", "over 1000"),
    (r"a*+", "possessive"), (r"(?>a*)", "atomic"), (r"(a|)*", "empty string"),
])
def test_constructs_without_a_linear_time_engine_are_refused_by_name(pattern: str,
                                                                     construct: str) -> None:
    with pytest.raises(UnsupportedPattern, match=construct):
        compile_linear(pattern)
    with pytest.raises(ValueError, match="#0"):
        _patterns([{"pattern": f"(?P<v>x){pattern}", "key": "k", "value": "v"}])


def test_word_boundaries_run_under_ascii() -> None:
    found = compile_linear(r"(?a)\bab\b").match("ab cd")
    assert found is not None and found.span() == (0, 2)


@pytest.mark.parametrize("category", ["DIGIT", "NOT_DIGIT", "SPACE", "NOT_SPACE", "WORD",
                                      "NOT_WORD"])
def test_class_ranges_are_pythons_classes_over_every_code_point(category: str) -> None:
    from re import _constants as sre

    symbol = {"DIGIT": r"\d", "NOT_DIGIT": r"\D", "SPACE": r"\s", "NOT_SPACE": r"\S",
              "WORD": r"\w", "NOT_WORD": r"\W"}[category]
    ranges = category_ranges(getattr(sre, f"CATEGORY_{category}"), False)
    inside = {c for lo, hi in ranges for c in range(lo, hi + 1)}
    python = re.compile(symbol)
    assert inside == {c for c in range(0x110000) if not 0xD800 <= c < 0xE000
                      and python.match(chr(c))}


def test_case_folding_keeps_pythons_turkish_i_class() -> None:
    pattern = LinearPattern("i", IGNORECASE)
    assert all(pattern.match(c) for c in "Iiİı")
    assert LinearPattern("k", IGNORECASE).match("\u212a")  # KELVIN SIGN, as in Python


def test_a_lone_surrogate_in_the_text_is_read_as_one_character() -> None:
    found = compile_linear(r"a(?P<x>.)b").match("a\ud800b")
    assert found is not None and found.group("x") == "\ud800"


def test_group_offsets_count_code_points_not_bytes() -> None:
    found = compile_linear(r"(?P<k>\w+) = (?P<v>.+)").match("電話 = +81-3-1234 ☎")
    assert found is not None and found.group("k") == "電話" and found.group("v") == "+81-3-1234 ☎"


def test_templates_may_not_name_the_reserved_boundary_characters() -> None:
    with pytest.raises(ValueError, match="reserved"):
        Pattern("{a} \ue000 {b}", "{a}", "b")
