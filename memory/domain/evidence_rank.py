"""The evidence read's ranking (SPEC §7): what was said, ranked by fusing its meaning (the cosine
of the query's and the passage's embeddings) with its words (the query's informative words it
holds, each weighted by its rarity among the namespace's observations).

A *passage* is what is ranked: a whole observation today, and — since nothing here knows what a
passage is cut from — as well a part of one (a message of a chat session), named by a key of
the caller's (an observation's id, or its id and a part's index).

The lexical score is the share of the query's word weight a passage holds (BM25's idf of each
word, held or not: a passage's length and how often it repeats a word are not counted; on LoCoMo
that scored better than BM25's saturation and length normalisation, bench/README.md "Evidence
retrieval"). The fused score adds it, weighted, to the cosine. A passage not embedded yet (the
embedding comes after the commit) is ranked by its lexical score alone: found at once, never
skipped. Nothing assumes the embedder is lexical: the weight was tuned on the semantic default.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

#: How much a full lexical match adds to a cosine. Tuned on LoCoMo with the default semantic
#: embedder (0.4 to 0.6 of a normalised sum all within a point of each other; this is 0.5).
EVIDENCE_LEXICAL_WEIGHT = 1.0


@dataclass(frozen=True)
class Passage:
    """One candidate: its key, its cosine (None: not embedded yet) and its lexical score."""

    key: Hashable
    semantic: float | None
    lexical: float


@dataclass(frozen=True)
class RankedPassage:
    key: Hashable
    score: float
    semantic: float | None
    lexical: float


def fused_score(semantic: float | None, lexical: float) -> float:
    """The fused score of a passage: its cosine (0 without an embedding) plus its weighted
    lexical share."""
    return (semantic or 0.0) + EVIDENCE_LEXICAL_WEIGHT * lexical


def rank_passages(candidates: Iterable[Passage], k: int,
                  order: dict[Hashable, int] | None = None) -> list[RankedPassage]:
    """The top ``k`` passages by fused score, best first; among equals the one ``order`` (e.g.
    an observation's arrival index) puts later, then as given, so a read is repeatable."""
    order = order or {}
    scored = [RankedPassage(p.key, fused_score(p.semantic, p.lexical), p.semantic, p.lexical)
              for p in candidates]
    scored.sort(key=lambda r: (-r.score, -order.get(r.key, 0)))
    return scored[:k]
