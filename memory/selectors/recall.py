"""The frontier read's hybrid ranking (SPEC §7): the cosine of the query's and each cell's
``key: value`` embeddings fused with an exact, lexical score over the key's words, numbers and
the value (memory.domain.ranking), so that "Where is ring 77?" finds ring 77, not ring 65, and
"What do I like to eat?" still finds ``user_favorite_food``.

Candidates come from both sides: the cosine's top cells (the frontier index and the stale
cells, memory.selectors.search.frontier_candidates) and every cell holding a query word that is rare
enough to propose cells (memory.services.lexical). Each candidate gets both scores; the fused
one orders them. Each item carries ``score`` (the fused score), ``semantic_score`` (the cosine;
null for a cell not embedded yet) and ``lexical_score`` (0 to 1).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction

from memory.domain.metadata import Metadata
from memory.domain.ranking import fuse, lexical_score, query_terms, term_weights
from memory.models import Namespace
from memory.services.binding import vector_literal
from memory.services.lexical import lexical_scores, proposing_words, term_frequencies

from .filtered import filtered_candidates, heads_matching
from .search import ReadResult, frontier_candidates, frontier_render, query_vector

#: Cells the cosine proposes, per cell asked for (at least :data:`MIN_POOL`): a cell the
#: lexical score lifts to the top may stand far down the cosine's list.
POOL_PER_CELL = 4
MIN_POOL = 40


def frontier_hybrid_read(*, namespace: Namespace, query: str, k: int = 12,
                         disclose: Iterable[str] = (), fusion: str = "weighted",
                         metadata: Metadata | None = None) -> ReadResult:
    """Top-k cells by the fused score, one line each (SPEC §7). ``fusion`` is ``weighted``
    (the read's) or ``rrf`` (reciprocal rank fusion, measured beside it by the benchmarks).
    ``metadata``: among the cells whose current version's metadata holds it, scored alike (a
    filter narrows the read; it never changes what ``score`` means)."""
    vector = vector_literal(query_vector(namespace, query))
    pool = max(MIN_POOL, POOL_PER_CELL * k)
    if metadata:
        with transaction.atomic():
            semantic = filtered_candidates(namespace, vector, metadata, pool)
    else:
        semantic = frontier_candidates(namespace_id=namespace.pk, vector=vector, k=pool)
    words = query_terms(query)
    weights: dict[str, float] = {}
    if words:
        frequencies = term_frequencies(namespace_id=namespace.pk, words=words)
        weights = term_weights(frequencies.df, frequencies.total)
    if weights:
        rows = lexical_scores(namespace_id=namespace.pk, weights=weights,
                              proposing=proposing_words(frequencies.df),
                              semantic_ids=[i for i, _ in semantic], vector=vector)
        if metadata:  # the lexical side proposes from the whole namespace
            kept = heads_matching(namespace_id=namespace.pk, cell_ids=[r[0] for r in rows],
                                  metadata=metadata)
            rows = [r for r in rows if r[0] in kept]
        candidates = [(i, None if d is None else 1 - d, lexical_score(m, weights))
                      for i, m, d in rows]
    else:  # no word of the query is held anywhere: the cosine alone ranks
        candidates = [(i, 1 - d, 0.0) for i, d in semantic]
    ranked = fuse(candidates, k, fusion)
    return frontier_render(namespace=namespace, mode="frontier", disclose=disclose, scored=[
        (s.id, {"score": round(s.score, 4),
                "semantic_score": None if s.semantic is None else round(s.semantic, 4),
                "lexical_score": round(s.lexical, 4)}) for s in ranked])
