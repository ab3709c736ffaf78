"""MemoryAgentBench FactConsolidation (paper §4.3, Appendix B.4, F), regenerated here.

The official streams are not shipped with P-Mem, so this module writes streams in their exact
text form ("Here is a list of facts:\\n0. ...") from (subject, relation) templates in the style
of the real questions, over synthetic entity names, at the official sizes and overwrite rates.
Later facts silently override earlier values of the same key; gold answers come from the final
state. The templates double as rule-extractor patterns (keys ``{subject}_{relation}``).
"""

from __future__ import annotations

import math
import random
import re
import string
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .common import Event, case_rng

NAME = "factconsolidation"
SIZES = (455, 2310, 4580, 18332)
QUESTIONS = 100
HEADER = "Here is a list of facts:"
#: Mean writes per key (paper: 455 facts over 239 keys at 6k, 18,332 over 8,445 at 262k).
FACTS_PER_KEY = 1.95
#: Share of keys overwritten at least once is drawn from this range (the paper's 55–63%).
OVERWRITE_RANGE = (0.56, 0.62)
#: Share of a subject type's entities that carry any one of its relations; high enough that
#: chains of 2-4 current values exist for multi-hop questions.
DENSITY = 0.7


@dataclass(frozen=True)
class Relation:
    """One template: the fact sentence, its single-hop question, and its multi-hop phrase."""

    name: str
    subject: str
    object: str
    statement: str  # "{s}" subject, "{o}" value
    question: str  # "{s}" subject
    phrase: str  # "{s}" subject, nests into another relation's question


RELATIONS: tuple[Relation, ...] = (
    Relation("birthplace", "person", "city", "{s} was born in the city of {o}.",
             "Which city was {s} born in?", "the city where {s} was born"),
    Relation("deathplace", "person", "city", "{s} died in the city of {o}.",
             "Which city did {s} die in?", "the city where {s} died"),
    Relation("citizenship", "person", "country", "{s} is a citizen of {o}.",
             "What is the country of citizenship of {s}?", "the country of citizenship of {s}"),
    Relation("spouse", "person", "person", "The spouse of {s} is {o}.",
             "Who is the spouse of {s}?", "the spouse of {s}"),
    Relation("education", "person", "university", "{s} was educated at {o}.",
             "Which university was {s} educated at?", "the university where {s} was educated"),
    Relation("employer", "person", "company", "{s} is employed by {o}.",
             "Who is the employer of {s}?", "the employer of {s}"),
    Relation("genre", "person", "genre", "The type of music that {s} plays is {o}.",
             "What type of music does {s} play?", "the type of music that {s} plays"),
    Relation("famous_for", "person", "work", "{s} is famous for {o}.",
             "What is {s} famous for?", "the work {s} is famous for"),
    Relation("position", "person", "position", "{s} plays the position of {o}.",
             "What position does {s} play?", "the position {s} plays"),
    Relation("author", "work", "person", "The author of {s} is {o}.",
             "Who is the author of {s}?", "the author of {s}"),
    Relation("chairperson", "company", "person", "The chairperson of {s} is {o}.",
             "Who is the chairperson of {s}?", "the chairperson of {s}"),
    Relation("ceo", "company", "person", "The chief executive officer of {s} is {o}.",
             "Who is the chief executive officer of {s}?", "the chief executive officer of {s}"),
    Relation("headquarters", "company", "city",
             "The headquarters of {s} is located in the city of {o}.",
             "Which city is the headquarter of {s} located in?", "the city where {s} is headquartered"),
    Relation("capital", "country", "city", "The capital of {s} is {o}.",
             "What is the capital of {s}?", "the capital of {s}"),
    Relation("official_language", "country", "language", "The official language of {s} is {o}.",
             "What is the official language of {s}?", "the official language of {s}"),
    Relation("continent", "country", "continent", "{s} is located in the continent of {o}.",
             "Which continent is {s} located in?", "the continent where {s} is located"),
    Relation("religion", "country", "religion", "{s} is affiliated with the religion of {o}.",
             "Which religion is {s} affiliated with?", "the religion {s} is affiliated with"),
    Relation("head_of_government", "city", "person",
             "The name of the current head of the {s} government is {o}.",
             "Who is the head of government of {s}?", "the head of government of {s}"),
    Relation("country", "city", "country", "{s} is located in the country of {o}.",
             "Which country is {s} located in?", "the country where {s} is located"),
    Relation("sport", "team", "sport", "{s} is associated with the sport of {o}.",
             "Which sport is {s} associated with?", "the sport {s} is associated with"),
    Relation("sport_origin", "sport", "country", "{s} was created in the country of {o}.",
             "Which country was {s} created in?", "the country where {s} was created"),
)
BY_NAME = {r.name: r for r in RELATIONS}


# --- synthetic entity names ------------------------------------------------------------------

_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s",
           "st", "t", "tr", "v", "z", "th", "sh", "c", "j", "w")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "ia")
_CODAS = ("", "", "n", "r", "l", "s", "th", "m", "nd", "rk")
_CITY_SUFFIX = ("ton", "burg", "ford", "ville", "mouth", "haven", "field", "port", "stad", "grad")
_COUNTRY_SUFFIX = ("ia", "land", "stan", "ora", "enia", "ica")
_COMPANY_SUFFIX = ("Corporation", "Group", "Systems", "Industries", "Holdings", "Labs")
_TEAM_SUFFIX = ("Rovers", "United", "Wanderers", "Athletic", "Falcons", "Giants", "RFC")
_WORK_ADJ = ("Silent", "Broken", "Golden", "Hidden", "Last", "Distant", "Crimson", "Quiet",
             "Winter", "Burning", "Hollow", "Northern", "Glass", "Iron", "Pale", "Lost")
_WORK_NOUN = ("Harbor", "Orchard", "Mirror", "Kingdom", "Garden", "Voyage", "Lantern", "River",
              "Archive", "Empire", "Letters", "Bridge", "Tower", "Season", "Covenant", "Tide")
_FIXED = {
    "continent": ("Ostravia", "Meridia", "Norvane", "Sulara", "Tessaly", "Eburnia", "Caldera"),
    "genre": ("post-punk", "jazz fusion", "synth-pop", "bluegrass", "trip hop", "sea shanty",
              "chamber pop", "drum and bass", "highlife", "shoegaze", "zydeco", "krautrock",
              "dream pop", "grime", "afrobeat", "tango nuevo", "skiffle", "math rock"),
    "position": ("goalkeeper", "quarterback", "point guard", "shortstop", "striker", "fullback",
                 "winger", "pitcher", "libero", "setter", "center fielder", "fly-half",
                 "wicket-keeper", "sweeper", "power forward", "tight end"),
}


def _syllables(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n))


def _word(rng: random.Random, lo: int = 2, hi: int = 3) -> str:
    return _syllables(rng, rng.randint(lo, hi)).capitalize()


_MAKERS = {
    "person": lambda r: f"{_word(r, 1, 2)} {_word(r, 2, 2)}",
    "city": lambda r: _syllables(r, 1).capitalize() + r.choice(_CITY_SUFFIX),
    "country": lambda r: _syllables(r, 2).capitalize() + r.choice(_COUNTRY_SUFFIX),
    "company": lambda r: f"{_word(r)} {r.choice(_COMPANY_SUFFIX)}",
    "university": lambda r: f"University of {_word(r)}",
    "work": lambda r: f"The {r.choice(_WORK_ADJ)} {r.choice(_WORK_NOUN)} of {_word(r)}",
    "team": lambda r: f"{_word(r)} {r.choice(_TEAM_SUFFIX)}",
    "sport": lambda r: _syllables(r, 1) + r.choice(("ball", " racing", " wrestling", "-polo")),
    "language": lambda r: _syllables(r, 2).capitalize() + r.choice(("ish", "ese", "ian", "i")),
    "religion": lambda r: _syllables(r, 2).capitalize() + r.choice(("ism", "ity", " Faith")),
}


def _pool(rng: random.Random, kind: str, size: int, taken: set[str]) -> list[str]:
    """``size`` new names of one entity type, unique across every type (keys embed subjects)."""
    names: list[str] = []
    while len(names) < size:
        name = _MAKERS[kind](rng)
        if name not in taken:
            taken.add(name)
            names.append(name)
    return names


# --- the stream ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fact:
    index: int
    subject: str
    relation: str
    value: str

    @property
    def text(self) -> str:
        return BY_NAME[self.relation].statement.format(s=self.subject, o=self.value)

    @property
    def key(self) -> str:
        return fact_key(self.subject, self.relation)


@dataclass(frozen=True)
class Question:
    kind: str  # "single" | "multi"
    text: str
    gold: str
    hops: tuple[str, ...]  # keys read, in order
    #: earlier values of the answered key (single-hop stale scoring; empty if never overwritten)
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class Stream:
    size: int
    facts: tuple[Fact, ...]
    questions: tuple[Question, ...]
    history: dict[str, tuple[str, ...]] = field(repr=False)  # key -> values in stream order

    @property
    def text(self) -> str:
        """The stream exactly as MemoryAgentBench presents it."""
        return "\n".join([HEADER, *(f"{f.index}. {f.text}" for f in self.facts)])

    @property
    def final(self) -> dict[str, str]:
        return {key: values[-1] for key, values in self.history.items()}

    @property
    def overwrite_rate(self) -> float:
        return sum(len(v) > 1 for v in self.history.values()) / len(self.history)


def fact_key(subject: str, relation: str) -> str:
    """The cell key of a fact, as the rule extractor's ``{s}_{relation}`` template normalises it."""
    return re.sub(r"[^0-9a-z]+", "_", f"{subject} {relation}".lower()).strip("_")


def _pool_sizes(keys: int) -> dict[str, int]:
    """Entities per type so each relation covers about DENSITY of its subject type's entities."""
    per_relation = keys / len(RELATIONS)
    sizes = {kind: max(8, math.ceil(per_relation / DENSITY)) for kind in _MAKERS}
    sizes["language"] = sizes["religion"] = max(8, keys // 40)
    return sizes


def _draw_keys(rng: random.Random, keys: int, pools: dict[str, list[str]]) -> list[tuple[str, str]]:
    """``keys`` distinct (subject, relation) pairs, spread evenly over the relations."""
    pairs: list[tuple[str, str]] = []
    for i, relation in enumerate(RELATIONS):
        share = keys // len(RELATIONS) + (i < keys % len(RELATIONS))
        subjects = rng.sample(pools[relation.subject], min(share, len(pools[relation.subject])))
        pairs += [(s, relation.name) for s in subjects]
    return pairs


def _write_counts(rng: random.Random, keys: int, size: int) -> list[int]:
    """Writes per key: every key once, a drawn share of keys at least twice, ``size`` in total."""
    overwritten = round(keys * rng.uniform(*OVERWRITE_RANGE))
    extra = size - keys
    if extra < overwritten:
        raise ValueError(f"{size} facts cannot overwrite {overwritten} of {keys} keys")
    counts = [2] * overwritten + [1] * (keys - overwritten)
    for _ in range(extra - overwritten):
        counts[rng.randrange(overwritten)] += 1
    rng.shuffle(counts)
    return counts


def _values(rng: random.Random, pool: list[str], n: int, subject: str) -> list[str]:
    """``n`` values for one key, each differing from the one before (every write is a change)."""
    out: list[str] = []
    while len(out) < n:
        value = rng.choice(pool)
        if value != subject and (not out or value != out[-1]):
            out.append(value)
    return out


def make_stream(size: int, questions: int = QUESTIONS) -> Stream:
    """A stream of ``size`` facts with single- and multi-hop questions; deterministic in size."""
    rng = case_rng(NAME, 0, size)
    keys = round(size / FACTS_PER_KEY)
    taken: set[str] = set()
    pools = {kind: _pool(rng, kind, n, taken) for kind, n in _pool_sizes(keys).items()}
    pools.update({kind: list(names) for kind, names in _FIXED.items()})
    pairs = _draw_keys(rng, keys, pools)
    counts = _write_counts(rng, len(pairs), size)
    # Arrival order: shuffle every write slot; a key's j-th slot carries its j-th value.
    slots = [i for i, n in enumerate(counts) for _ in range(n)]
    rng.shuffle(slots)
    values = [_values(rng, pools[BY_NAME[r].object], n, s) for (s, r), n in zip(pairs, counts, strict=True)]
    used = [0] * len(pairs)
    facts = []
    for index, slot in enumerate(slots):
        subject, relation = pairs[slot]
        facts.append(Fact(index, subject, relation, values[slot][used[slot]]))
        used[slot] += 1
    history = {fact_key(s, r): tuple(v) for (s, r), v in zip(pairs, values, strict=True)}
    qs = _single_hop(rng, pairs, history, questions) + _multi_hop(rng, pairs, history, questions)
    return Stream(size, tuple(facts), tuple(qs), history)


def _single_hop(rng: random.Random, pairs: list[tuple[str, str]],
                history: dict[str, tuple[str, ...]], n: int) -> list[Question]:
    out = []
    for subject, relation in rng.sample(pairs, min(n, len(pairs))):
        values = history[fact_key(subject, relation)]
        out.append(Question("single", BY_NAME[relation].question.format(s=subject), values[-1],
                            (fact_key(subject, relation),), tuple(values[:-1])))
    return out


def _multi_hop(rng: random.Random, pairs: list[tuple[str, str]],
               history: dict[str, tuple[str, ...]], n: int, attempts: int = 200_000) -> list[Question]:
    """Questions chaining 2-4 current values, built by walking relations from a random key.

    Each hop's subject is the previous hop's *final* value, so the gold needs every hop current.
    """
    by_subject: dict[str, list[str]] = defaultdict(list)
    for subject, relation in pairs:
        by_subject[subject].append(relation)
    out: list[Question] = []
    seen: set[str] = set()
    for _ in range(attempts):
        if len(out) >= n:
            break
        question = _walk(rng, rng.choice(pairs), rng.randint(2, 4), by_subject, history)
        if question is not None and question.text not in seen:
            seen.add(question.text)
            out.append(question)
    return out


def _walk(rng: random.Random, start: tuple[str, str], hops: int,
          by_subject: dict[str, list[str]], history: dict[str, tuple[str, ...]]) -> Question | None:
    subject, relation = start
    phrase = subject
    keys: list[str] = []
    visited = {subject}
    while True:
        key = fact_key(subject, relation)
        keys.append(key)
        value = history[key][-1]
        if len(keys) == hops:
            text = BY_NAME[relation].question.format(s=phrase)
            return Question("multi", text[0].upper() + text[1:], value, tuple(keys))
        options = by_subject.get(value, [])
        if value in visited or not options:
            return None
        phrase = BY_NAME[relation].phrase.format(s=phrase)
        subject, relation = value, rng.choice(options)
        visited.add(subject)


def chunks(stream: Stream, limit: int = 1000) -> list[str]:
    """Line-aligned pieces of at most ``limit`` characters, as the paper's write path reads them."""
    pieces: list[str] = []
    current: list[str] = []
    for line in stream.text.split("\n"):
        if current and sum(len(x) + 1 for x in current) + len(line) > limit:
            pieces.append("\n".join(current))
            current = []
        current.append(line)
    if current:
        pieces.append("\n".join(current))
    return pieces


# --- parsing: the templates as rule-extractor patterns ---------------------------------------


def rule_pattern_entries() -> list[dict[str, str]]:
    """The templates as rule-extractor patterns (``PMEM_RULE_PATTERNS`` JSON entries).

    A numbered stream line ("12. X was born in the city of Y.") and a bare sentence both parse,
    to key ``{subject}_{relation}`` (normalised: :func:`fact_key`) with the value ``{value}``.
    """
    entries = []
    for r in RELATIONS:
        bare = r.statement.replace("{s}", "{subject}").replace("{o}", "{value}")
        for template in ("{n}. " + bare, bare):
            entries.append({"pattern": template, "key": "{subject}_" + r.name, "value": "value"})
    return entries


def rule_patterns() -> list[Any]:
    """The same entries as :class:`memory.llm.rules.Pattern` objects (imported lazily: the
    generator itself needs no part of P-Mem)."""
    from memory.llm.rules import patterns_from_json

    return patterns_from_json(rule_pattern_entries())


_LINE = re.compile(r"^(\d+)\. (.*)$")


def _compile(statement: str) -> re.Pattern[str]:
    literal = re.escape(statement).replace(re.escape("{s}"), "(?P<s>.+?)")
    return re.compile("^" + literal.replace(re.escape("{o}"), "(?P<o>.+?)") + "$")


_PARSERS = tuple((r, _compile(r.statement)) for r in RELATIONS)


def parse_line(line: str) -> Fact | None:
    """The template-perfect parse of one numbered stream line (what the oracle write path reads)."""
    numbered = _LINE.match(line)
    if numbered is None:
        return None
    for relation, pattern in _PARSERS:
        m = pattern.match(numbered.group(2))
        if m:
            return Fact(int(numbered.group(1)), m.group("s"), relation.name, m.group("o"))
    return None


def line_event(seq: int, line: str) -> Event:
    """A numbered stream line as an arrival-ordered event (one observation per fact)."""
    fact = parse_line(line)
    if fact is None:
        raise ValueError(f"not a stream line: {line!r}")
    return Event(seq, fact.subject, line, "accept", fact.value)


def subject_of_key(key: str) -> str | None:
    """The subject part of a ``{subject}_{relation}`` key, or None for a key of another shape."""
    for relation in RELATIONS:
        if key.endswith("_" + relation.name) and len(key) > len(relation.name) + 1:
            return key[: -len(relation.name) - 1]
    return None


def parse_stream(text: str) -> dict[str, tuple[str, ...]]:
    """Every key's value sequence in stream order: the gold state the audit checks against."""
    history: dict[str, list[str]] = defaultdict(list)
    for line in text.split("\n"):
        fact = parse_line(line)
        if fact is not None:
            history[fact.key].append(fact.value)
    return {k: tuple(v) for k, v in history.items()}


# --- MemoryAgentBench's metric ---------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation and articles, collapse whitespace (MemoryAgentBench/SQuAD)."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCT)).split())


def substring_exact_match(prediction: str, gold: str) -> bool:
    """The official metric: the normalised gold is contained in the normalised prediction."""
    return normalize_answer(gold) in normalize_answer(prediction)


def is_stale(prediction: str, question: Question) -> bool:
    """Incorrect and naming an earlier value of the answered key (Appendix B.4)."""
    if substring_exact_match(prediction, question.gold):
        return False
    return any(substring_exact_match(prediction, old) for old in question.stale)
