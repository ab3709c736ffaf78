r"""The rule extractor as it was before it ran in linear time (Python's backtracking ``re``), kept
as the oracle of tests/llm/test_rules_linear.py: on short inputs, where backtracking is cheap,
the linear-time extractor must give exactly what this one gives.

Verbatim but for one deliberate change of meaning: a ``key = value`` line's key may now hold
combining marks (SPEC §1 keeps the marks of every script: ``कि``), which ``\w`` does not
match; the oracle takes its key-character check from the new extractor."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.domain import normalize_key
from memory.llm.facts import ASSERTIONS, OPS, Fact

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
# A template group never spans a sentence boundary ('. ' inside), so a line holding two
# templated sentences cannot match one template whole with a group swallowing the second.
_GROUP = r"(?P<{name}>(?:(?!\.\s).)+?)"


def compile_template(template: str) -> re.Pattern[str]:
    """Compile ``"Earlier observation: {obj} was in {loc}."`` into a case-insensitive regex with
    non-greedy named groups; literal text is escaped, runs of whitespace match any whitespace,
    and a trailing period is optional. Raises ValueError on a repeated placeholder."""
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
    parts += [_literal(body[last:]), r"\s*\.?\s*$"]
    return re.compile("".join(parts), re.IGNORECASE)


def _literal(text: str) -> str:
    return r"\s+".join(re.escape(piece) for piece in re.split(r"\s+", text))


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
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if "(?P<" in self.pattern:
            regex = re.compile(self.pattern, re.IGNORECASE)
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
        except (KeyError, TypeError, AttributeError, re.error) as exc:
            raise ValueError(f"rule pattern #{number} is malformed: {exc!r}") from exc
    return patterns


def patterns_from_settings() -> list[Pattern]:
    """Configured patterns (``PMEM_RULE_PATTERNS``, a JSON file) before the defaults."""
    from django.conf import settings

    path = getattr(settings, "PMEM_RULE_PATTERNS", "") or ""
    configured = patterns_from_json(path) if path else []
    return [*configured, *DEFAULT_PATTERNS]


# --- key/value lines ------------------------------------------------------------------------

_LIST_MARKER = re.compile(r"^\s*(?:[-*•]\s+)")
_KEY_VALUE = re.compile(r"^(?P<key>[^=:]+?)\s*(?P<sep>[=:])(?P<value>.*)$")
# Letters, digits, spaces and identifier punctuation (_ . - /); no sentence punctuation.
_KEY_CHARS = re.compile(r"^[^\W_]?[\w .\-/']*$")
_MAX_KEY_WORDS = 8


def key_value_fact(line: str) -> Fact | None:
    """``key = value`` / ``key: value`` -> Fact, or None when the line is not one."""
    found = _KEY_VALUE.match(_LIST_MARKER.sub("", line).strip())
    if found is None:
        return None
    raw_key, value = found.group("key").strip(), found.group("value").strip()
    if found.group("sep") == ":" and value.startswith("//"):
        return None  # a URL, not a key
    if not value or not _looks_like_key(raw_key):
        return None
    key = normalize_key(raw_key)
    return Fact(key=key, value=value) if key else None


def _looks_like_key(text: str) -> bool:
    from memory.llm.rules import key_characters_only

    return (
        key_characters_only(text)
        and not text.endswith(".")
        and any(ch.isalpha() for ch in text)
        and len(text.split()) <= _MAX_KEY_WORDS
    )


# --- the extractor ------------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LIST_NUMBER = re.compile(r"^\d+[.)]$")


def split_sentences(line: str) -> list[str]:
    """Split at sentence ends; a bare list number ("12.") stays with the sentence after it."""
    pieces = [p for p in _SENTENCE_END.split(line.strip()) if p]
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

    def extract(self, text: str) -> list[Fact]:
        return [fact for line in text.splitlines() for fact in self._line_facts(line)]

    def _line_facts(self, line: str) -> Iterator[Fact]:
        if not line.strip():
            return
        whole = self._match(line)
        if whole is not None:
            yield whole
            return
        sentence_facts = [f for s in split_sentences(line) if (f := self._match(s)) is not None]
        if sentence_facts:
            yield from sentence_facts
            return
        fact = key_value_fact(line)
        if fact is not None:
            yield fact

    def _match(self, sentence: str) -> Fact | None:
        for pattern in self.patterns:
            fact = pattern.match(sentence)
            if fact is not None:
                return fact
        return None
