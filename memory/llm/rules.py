"""The rule extractor: keyed facts from structured or templated text, without a model.

Two rules, applied per line, in this order:

1. **Patterns** (:class:`Pattern`): a template such as
   ``"Update: {obj} has been moved from {a} to {b}."`` or a regex with named groups. The whole
   line is tried first; if no pattern matches it whole, the line is split into sentences and each
   sentence is tried. A sentence yields at most one fact (the first pattern that matches).
2. **key/value lines**: ``key = value`` or ``key: value`` when the line matched no pattern. The key
   must look like an identifier phrase (at most 8 words, no sentence punctuation) and the value
   must be non-empty. List markers (``-``, ``*``, ``•``) before the key are ignored.

Facts come out in text order; nothing is deduplicated (two moves of one object in one text are
two facts, in order).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.domain import normalize_key

from .facts import ASSERTIONS, OPS, Fact
from .linear_regex import IGNORECASE, LinearMatch, LinearPattern, LinearSet, UnsupportedPattern

# Every pattern that reads observed text runs in linear time (docs/decisions.md, "Rule
# extraction in linear time"): on RE2 through :mod:`memory.llm.linear_regex`, or as a plain
# scan. The two Python ``re`` patterns left cannot backtrack: ``\s+`` is one class under one
# quantifier, and ``\{(\w+)\}`` (which reads templates, never observed text) ends at the
# first character outside ``\w``.
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_TEMPLATE_SPACE = re.compile(r"\s+")

# A template group never spans a sentence boundary ('.' then whitespace), so a line holding two
# templated sentences cannot match one template whole with a group swallowing the second.
# Python wrote that as a lookahead, which RE2 has not: instead the text is matched with every
# such '.' replaced by _BOUNDARY (one code point for one, so group offsets hold), a character a
# group excludes and a literal '.' of the template accepts. A _BOUNDARY that was in the text
# itself is read as _DISPLACED (an ordinary character); templates may name neither.
_BOUNDARY = "\ue000"
_DISPLACED = "\ue001"
_GROUP = "(?P<{name}>[^\\n\ue000]+?)"
_DOT = "[.\ue000]"


def mark_boundaries(text: str) -> str:
    """``text`` with every '.' followed by whitespace replaced by :data:`_BOUNDARY`."""
    if _BOUNDARY in text:
        text = text.replace(_BOUNDARY, _DISPLACED)
    if "." not in text:
        return text
    parts = text.split(".")
    out = [parts[0]]
    for part in parts[1:]:
        out += [_BOUNDARY if part[:1].isspace() else ".", part]
    return "".join(out)


_last_marked: tuple[str, str] = ("", "")


def _marked(text: str) -> str:
    # Remembered for the last text: a sentence is tried against every template in turn.
    global _last_marked
    last = _last_marked
    if last[0] is text:
        return last[1]
    marked = mark_boundaries(text)
    _last_marked = (text, marked)
    return marked


class TemplateRegex(LinearPattern):
    """A compiled template (:func:`compile_template`); ``match`` reads the text with its
    sentence boundaries marked, and answers with groups of the text as given."""

    def __init__(self, template: str) -> None:
        if _BOUNDARY in template or _DISPLACED in template:
            raise ValueError(f"template {template!r} holds a reserved character (U+E000/E001)")
        self.template = template
        super().__init__(_template_regex(template), IGNORECASE)

    def match(self, text: str) -> LinearMatch | None:
        spans = self.spans(_marked(text))
        return None if spans is None else LinearMatch(text, spans, self.groupindex)


def compile_template(template: str) -> TemplateRegex:
    """Compile ``"Earlier observation: {obj} was in {loc}."`` into a case-insensitive pattern
    with non-greedy named groups; literal text is escaped, runs of whitespace match any
    whitespace, and a trailing period is optional. Linear time on any text. Raises ValueError
    on a repeated placeholder."""
    return TemplateRegex(template)


def _template_regex(template: str) -> str:
    body = template.strip()
    if body.endswith("."):
        body = body[:-1]
    parts, seen, last = [r"^\s*"], set(), 0
    for match in _PLACEHOLDER.finditer(body):
        name = match.group(1)
        if name in seen:
            raise ValueError(f"placeholder {{{name}}} appears twice in {template!r}")
        seen.add(name)
        parts += [_literal(body[last : match.start()]), _GROUP.format(name=name)]
        last = match.end()
    parts += [_literal(body[last:]), rf"\s*{_DOT}?\s*$"]
    return "".join(parts)


def _literal(text: str) -> str:
    return r"\s+".join("".join(_DOT if ch == "." else re.escape(ch) for ch in piece)
                        for piece in _TEMPLATE_SPACE.split(text))


@dataclass(frozen=True)
class Pattern:
    """One configurable extraction rule.

    ``pattern`` is a template with ``{name}`` placeholders, or a regex when it contains a named
    group ``(?P<...>``. ``key_template`` is filled from the groups (``"{obj}_location"``) and then
    normalised; ``value_group`` names the group holding the value. ``assertion`` and ``op`` are
    copied onto every fact the pattern emits (``op`` is a hint for annotation, None by default).
    """

    pattern: str
    key_template: str
    value_group: str
    assertion: str = "asserted"
    op: str | None = None
    regex: LinearPattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A regex runs on RE2 with Python's meaning; one using what no linear-time engine can
        # run (lookaround, backreferences, ...) is refused here, naming the construct.
        if "(?P<" in self.pattern:
            regex = LinearPattern(self.pattern, IGNORECASE)
        else:
            regex = compile_template(self.pattern)
        if self.value_group not in regex.groupindex:
            raise ValueError(f"value group {self.value_group!r} not in {self.pattern!r}")
        missing = set(_PLACEHOLDER.findall(self.key_template)) - set(regex.groupindex)
        if missing:
            raise ValueError(f"key template names unknown groups {sorted(missing)}")
        if self.assertion not in ASSERTIONS:
            raise ValueError(f"assertion must be one of {ASSERTIONS}, not {self.assertion!r}")
        if self.op is not None and self.op not in OPS:
            raise ValueError(f"op must be one of {OPS}, not {self.op!r}")
        object.__setattr__(self, "regex", regex)

    def match(self, sentence: str) -> Fact | None:
        """The fact this pattern reads from the whole ``sentence``, or None."""
        found = self.regex.match(sentence)
        if found is None:
            return None
        groups = {name: (found.group(name) or "").strip() for name in self.regex.groupindex}
        key = normalize_key(self.key_template.format(**groups))
        value = groups[self.value_group].strip()
        if not key or not value:
            return None
        return Fact(key=key, value=value, assertion=self.assertion, op=self.op)


#: The ALFWorld-Revision phrasing (paper B.2/B.3 and the contest/resolve probe). What each emits,
#: for ``mug 1`` and ``cabinet 3``, always under key ``mug_1_location``:
#:
#: - "Earlier observation: mug 1 was in cabinet 3."       -> cabinet 3, asserted
#: - "Update: mug 1 has been moved from X to cabinet 3."  -> cabinet 3, asserted
#: - "Correction: the move of mug 1 to cabinet 3 was reported in error." and
#:   "The move of mug 1 to cabinet 3 was reported in error." -> cabinet 3, withdrawn
#:   (revoke the version holding that value)
#: - "Report: mug 1 is in cabinet 3."                     -> cabinet 3, reported, op hint contest
#: - "Check: mug 1 is confirmed in cabinet 3."            -> cabinet 3, asserted, op hint resolve
DEFAULT_PATTERNS: tuple[Pattern, ...] = (
    Pattern("Earlier observation: {obj} was in {loc}.", "{obj}_location", "loc"),
    Pattern("Update: {obj} has been moved from {a} to {b}.", "{obj}_location", "b"),
    Pattern(
        "Correction: the move of {obj} to {b} was reported in error.",
        "{obj}_location",
        "b",
        assertion="withdrawn",
    ),
    Pattern(
        "The move of {obj} to {b} was reported in error.",
        "{obj}_location",
        "b",
        assertion="withdrawn",
    ),
    Pattern("Report: {obj} is in {loc}.", "{obj}_location", "loc", "reported", op="contest"),
    Pattern("Check: {obj} is confirmed in {loc}.", "{obj}_location", "loc", op="resolve"),
)


def patterns_from_json(source: str | Path | Sequence[dict[str, Any]]) -> list[Pattern]:
    """Patterns from a JSON file path or an already-loaded list of objects, each
    ``{"pattern", "key", "value", "assertion"?, "op"?}`` (``pattern`` a template or regex,
    ``key`` the key template, ``value`` the value group). Raises ValueError on a bad entry."""
    if isinstance(source, str | Path):
        entries = json.loads(Path(source).read_text(encoding="utf-8"))
    else:
        entries = list(source)
    if not isinstance(entries, list):
        raise ValueError("rule patterns must be a JSON list of objects")
    patterns = []
    for number, entry in enumerate(entries):
        try:
            patterns.append(
                Pattern(
                    pattern=entry["pattern"],
                    key_template=entry["key"],
                    value_group=entry["value"],
                    assertion=entry.get("assertion", "asserted"),
                    op=entry.get("op"),
                )
            )
        except (KeyError, TypeError, AttributeError, re.error, UnsupportedPattern) as exc:
            raise ValueError(f"rule pattern #{number} is malformed: {exc!r}") from exc
    return patterns


def patterns_from_settings() -> list[Pattern]:
    """Configured patterns (``PMEM_RULE_PATTERNS``, a JSON file) before the defaults."""
    from django.conf import settings

    path = settings.PMEM_RULE_PATTERNS
    configured = patterns_from_json(path) if path else []
    return [*configured, *DEFAULT_PATTERNS]


# --- key/value lines ------------------------------------------------------------------------

_LIST_MARKER = LinearPattern(r"^\s*(?:[-*•]\s+)")
_KEY_VALUE = LinearPattern(r"^(?P<key>[^=:]+?)\s*(?P<sep>[=:])(?P<value>.*)$")
# Letters, marks and digits of every script (SPEC §1: ``कि`` is a letter and a vowel sign),
# spaces and identifier punctuation; no sentence punctuation, no symbols.
_KEY_PUNCTUATION = frozenset("_ .-/'")
_MAX_KEY_WORDS = 8


def _without_list_marker(line: str) -> str:
    marker = _LIST_MARKER.match(line)
    return line[marker.end():] if marker is not None else line


def key_value_fact(line: str) -> Fact | None:
    """``key = value`` / ``key: value`` -> Fact, or None when the line is not one."""
    found = _KEY_VALUE.match(_without_list_marker(line).strip())
    if found is None:
        return None
    raw_key, value = (found.group("key") or "").strip(), (found.group("value") or "").strip()
    if found.group("sep") == ":" and value.startswith("//"):
        return None  # a URL, not a key
    if not value or not _looks_like_key(raw_key):
        return None
    key = normalize_key(raw_key)
    return Fact(key=key, value=value) if key else None


def key_characters_only(text: str) -> bool:
    """Only characters a key may be written with (one scan)."""
    return all(ch.isalnum() or ch in _KEY_PUNCTUATION or unicodedata.category(ch)[0] == "M"
               for ch in text)


def _looks_like_key(text: str) -> bool:
    return (
        key_characters_only(text)
        and not text.endswith(".")
        and any(ch.isalpha() for ch in text)
        and len(text.split()) <= _MAX_KEY_WORDS
    )


# --- the extractor ------------------------------------------------------------------------

_LIST_NUMBER = LinearPattern(r"^\d+[.)]$")
_SENTENCE_ENDS = frozenset(".!?")


def _sentence_pieces(text: str) -> Iterator[str]:
    """``text`` cut at every run of whitespace that follows '.', '!' or '?' (the runs
    dropped). Python's ``re`` finds the runs: one class under one quantifier, nothing to
    backtrack into."""
    start = 0
    for run in _TEMPLATE_SPACE.finditer(text):
        if run.start() > 0 and text[run.start() - 1] in _SENTENCE_ENDS:
            yield text[start : run.start()]
            start = run.end()
    yield text[start:]


def split_sentences(line: str) -> list[str]:
    """Split at sentence ends; a bare list number ("12.") stays with the sentence after it."""
    pieces = [p for p in _sentence_pieces(line.strip()) if p]
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _LIST_NUMBER.match(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return sentences


class RuleExtractor:
    """Extracts facts with :class:`Pattern` rules and ``key = value`` lines (module docstring).
    ``patterns=None`` uses :data:`DEFAULT_PATTERNS`; pass ``[]`` for key/value lines only."""

    def __init__(self, patterns: Iterable[Pattern] | None = None) -> None:
        self.patterns: tuple[Pattern, ...] = (
            DEFAULT_PATTERNS if patterns is None else tuple(patterns)
        )
        # Templates read the text with its sentence boundaries marked, regexes the text as is:
        # one set of each says which patterns can match a sentence at all.
        templates = [i for i, p in enumerate(self.patterns) if isinstance(p.regex, TemplateRegex)]
        regexes = [i for i, p in enumerate(self.patterns) if i not in set(templates)]
        self._sets = [(indices, LinearSet(self.patterns[i].regex for i in indices), marked)
                      for indices, marked in ((templates, True), (regexes, False)) if indices]

    def extract(self, text: str) -> list[Fact]:
        return [fact for line in text.splitlines() for fact in self._line_facts(line)[0]]

    def extract_whole(self, text: str) -> list[Fact] | None:
        """The facts of ``text`` when these rules understand all of it — every line that is
        not blank matched whole by a pattern, each of its sentences by one, or a ``key =
        value`` line — else None (a model may read more in it). Text with no fact is None."""
        facts: list[Fact] = []
        for line in text.splitlines():
            found, whole = self._line_facts(line)
            if not whole:
                return None
            facts += found
        return facts or None

    def _line_facts(self, line: str) -> tuple[list[Fact], bool]:
        """The facts of one line, and whether the rules understood all of it (a blank line:
        nothing to understand)."""
        if not line.strip():
            return [], True
        whole = self._match(line)
        if whole is not None:
            return [whole], True
        sentences = split_sentences(line)
        sentence_facts = [f for s in sentences if (f := self._match(s)) is not None]
        if sentence_facts:
            return sentence_facts, len(sentence_facts) == len(sentences)
        fact = key_value_fact(line)
        return ([fact], True) if fact is not None else ([], False)

    def _candidates(self, sentence: str) -> Iterable[int]:
        found: list[int] = []
        for indices, patterns, marked in self._sets:
            hits = patterns.candidates(_marked(sentence) if marked else sentence)
            found += indices if hits is None else [indices[i] for i in hits]
        return sorted(found)

    def _match(self, sentence: str) -> Fact | None:
        for index in self._candidates(sentence):
            fact = self.patterns[index].match(sentence)
            if fact is not None:
                return fact
        return None
