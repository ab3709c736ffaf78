"""Hybrid ranking of the frontier read (SPEC §7): a semantic score (cosine of the query's and
the cell's ``key: value`` embeddings) fused with an exact, lexical one (the query's words found in
the key's words, numbers and the value), so that "ring 77" is not "ring 65" and "What do I like to
eat?" still finds ``user_favorite_food``.

The lexical score of a cell is the share of the query's informative words it holds, each word
weighted by its rarity among the namespace's current cells (inverse document frequency): a word
every cell holds ("ring" among 200 rings) weighs nearly nothing, one that names a single cell
("77") nearly everything. Function words ("where", "is", "my") are not looked up at all.

Fusion adds the lexical score, weighted, to the cosine (:data:`LEXICAL_WEIGHT`). Reciprocal
rank fusion is kept beside it for the benchmarks: it ranks by places alone, so a cell second on
both lists beats one first on the lexical list and fifth on the semantic one, which is how "ring
65" wins over "ring 77" (docs/decisions.md, "Hybrid ranking").
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: How much a full lexical match adds to a cosine (which spans about 0.1 to 0.8 between an
#: unrelated and a matching cell for the semantic embedder).
LEXICAL_WEIGHT = 0.5
#: The constant of reciprocal rank fusion (its authors' 60).
RRF_K = 60
FUSIONS = ("weighted", "rrf")

_WORD = re.compile(r"[^\W_]+")  # letters and digits; '_' splits snake_case keys into words

#: Words a question is made of rather than about: never looked up. English, short on purpose
#: (a word left out merely weighs by its rarity, like any other).
STOPWORDS = frozenset("""
a about above after again all also am an and any are as at be been before being below between
both but by can could did do does doing done down during each else ever few for from had has
have having he her here hers herself him himself his how i if in into is it its itself just
me mine more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up upon us very was we were what when where
whether which while who whom whose why will with would you your yours yourself yourselves
currently current now today tell know please
""".split())


def words(text: str) -> list[str]:
    """The words and numbers of a text, folded (NFKC, case-folded), in order, each once."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return list(dict.fromkeys(_WORD.findall(folded)))


def cell_terms(key: str, value: str | None) -> list[str]:
    """What the lexical score finds in a cell: the words of its key and of its value."""
    return words(f"{key} {value or ''}")


def query_terms(query: str) -> list[str]:
    """The words of a query that are looked up (its function words left out)."""
    return [w for w in words(query) if w not in STOPWORDS]


def idf(df: int, total: int) -> float:
    """The weight of a word ``df`` of ``total`` cells hold (BM25's idf: positive, and near 0
    for a word every cell holds)."""
    total = max(total, df)
    return math.log(1 + (total - df + 0.5) / (df + 0.5))


def term_weights(df: Mapping[str, int], total: int) -> dict[str, float]:
    """Each query word that some cell holds, with its weight; words no cell holds drop out
    (they would lower every cell's score alike)."""
    return {term: idf(n, total) for term, n in df.items() if n > 0}


def lexical_score(matched: float, weights: Mapping[str, float]) -> float:
    """The weight of the query words a cell holds (``matched``), as a share of all of them."""
    whole = sum(weights.values())
    return min(1.0, matched / whole) if whole > 0 else 0.0


@dataclass(frozen=True)
class Scored:
    """One cell's place in a hybrid ranking: the fused score and the parts it was fused from
    (``semantic`` is None for a cell without an embedding yet)."""

    id: int
    score: float
    semantic: float | None
    lexical: float


def fuse(candidates: Iterable[tuple[int, float | None, float]], k: int,
         method: str = "weighted") -> list[Scored]:
    """The top ``k`` of ``(id, cosine or None, lexical score)`` by the fused score, best first
    (ties by id, so a read is repeatable)."""
    rows = list(candidates)
    if method == "rrf":
        scores = _rrf(rows)
    elif method == "weighted":
        scores = {i: (sem or 0.0) + LEXICAL_WEIGHT * lex for i, sem, lex in rows}
    else:
        raise ValueError(f"unknown fusion {method!r}: one of {', '.join(FUSIONS)}")
    ranked = sorted(rows, key=lambda r: (-scores[r[0]], r[0]))[:k]
    return [Scored(i, scores[i], sem, lex) for i, sem, lex in ranked]


def _rrf(rows: Sequence[tuple[int, float | None, float]]) -> dict[int, float]:
    """Reciprocal rank fusion: 1/(60 + place) on each list a cell is on (the lexical list
    holds only cells with a lexical score; tied scores share a place)."""
    scores = {i: 0.0 for i, _, _ in rows}
    semantic = [(sem, i) for i, sem, _ in rows if sem is not None]
    lexical = [(lex, i) for i, _, lex in rows if lex > 0]
    for listed in (semantic, lexical):
        for place, (_, i) in _places(listed):
            scores[i] += 1 / (RRF_K + place)
    return scores


def _places(listed: list[tuple[float, int]]) -> list[tuple[int, tuple[float, int]]]:
    ordered = sorted(listed, key=lambda r: -r[0])
    out, place, previous = [], 0, None
    for n, row in enumerate(ordered, start=1):
        if row[0] != previous:
            place, previous = n, row[0]
        out.append((place, row))
    return out
