"""The lexical half of the frontier read's ranking (memory.domain.ranking), in SQL.

Each headed cell carries its terms — the words of its key and of its head's value — as
``<namespace id>:<word>`` in ``memory_cell.terms``, written by the commit with the head
(:func:`stored_terms`), behind a GIN index: a lookup of a word reads one posting list, inside
its namespace, whatever the namespace's size. Nothing here waits for an embedder: a cell is
found by its words from the commit that wrote them.

Both lookups by words — the frontier read's candidates and the heads shown to extraction
(:func:`cells_sharing_words`) — let only a word held by at most :data:`PROPOSING_DF` cells
propose cells: its frequency is counted first, capped, so a word half of a large namespace
holds costs ``PROPOSING_DF + 1`` rows, never its whole posting list's rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import connection

from memory.domain.ranking import cell_terms

#: Cells a word may be held by and still propose cells of its own: a commoner word weighs
#: little (its idf) and is only scored on the cells other words or the cosine propose.
PROPOSING_DF = 500
#: Cells counted for the idf's total: above it, the weights hardly move.
TOTAL_CAP = 10_000


def stored_terms(namespace_id: int, key: str, value: str | None) -> str:
    """A cell's terms as the commit writes them: space-separated ``<namespace>:<word>``."""
    return " ".join(f"{namespace_id}:{w}" for w in cell_terms(key, value))


@dataclass(frozen=True)
class Frequencies:
    total: int  # headed cells of the namespace (at most TOTAL_CAP)
    df: dict[str, int]  # per query word: the cells holding it (at most PROPOSING_DF + 1)


# Per query word, in order: the cells holding it, counted up to the cap and no further (rows
# stop being fetched there; past it, only the word's compressed posting list is read).
_HELD_SQL = """
ARRAY(SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_cell c
                                     WHERE c.terms @> ARRAY[t.term]
                                     LIMIT %(df_cap)s) AS held)
        FROM unnest(%(terms)s::text[]) WITH ORDINALITY AS t(term, n) ORDER BY t.n)
"""

_FREQUENCIES_SQL = f"""
SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_cell
                               WHERE namespace_id = %(ns)s AND head_id IS NOT NULL
                               LIMIT %(total_cap)s) AS n),
       {_HELD_SQL}
"""


def _stored(namespace_id: int, words: Sequence[str]) -> list[str]:
    return [f"{namespace_id}:{w}" for w in words]


def term_frequencies(*, namespace_id: int, words: Sequence[str]) -> Frequencies:
    """How many of the namespace's cells hold each word (capped), and how many cells it has."""
    with connection.cursor() as cur:
        cur.execute(_FREQUENCIES_SQL, {"ns": namespace_id, "total_cap": TOTAL_CAP,
                                       "df_cap": PROPOSING_DF + 1,
                                       "terms": _stored(namespace_id, words)})
        total, counts = cur.fetchone()
    return Frequencies(int(total), dict(zip(words, (int(c) for c in counts), strict=True)))


def proposing_words(df: Mapping[str, int]) -> list[str]:
    """The words that propose cells, rarest first: held by some cell, by PROPOSING_DF at most."""
    return sorted((w for w, n in df.items() if 0 < n <= PROPOSING_DF), key=lambda w: df[w])


def _proposed_sql(columns: str) -> str:
    """``columns`` of every headed cell a proposing word names, each word naming PROPOSING_DF
    cells at most (a cell named by two words comes twice)."""
    return f"""
SELECT {columns} FROM unnest(%(proposing)s::text[]) AS p(term)
 CROSS JOIN LATERAL (SELECT * FROM memory_cell c
                      WHERE c.terms @> ARRAY[p.term] AND c.head_id IS NOT NULL
                      LIMIT %(df_cap)s) AS c
"""


# The proposed cells that share the most query words (the common ones count here too). The
# cells are ranked on the rows the words' lookups fetched: joined back to memory_cell, a
# planner without fresh statistics may read the whole namespace to hash it.
_SHARING_SQL = f"""
SELECT c.key FROM ({_proposed_sql("c.id, c.key, c.terms")}) AS c
 GROUP BY c.id, c.key, c.terms
 ORDER BY cardinality(ARRAY(SELECT unnest(c.terms) INTERSECT SELECT unnest(%(terms)s::text[])))
          DESC, c.id DESC
 LIMIT %(limit)s
"""


def cells_sharing_words(*, namespace_id: int, words: Sequence[str], limit: int) -> list[str]:
    """The keys of the ``limit`` headed cells sharing the most ``words`` (newest first among
    equals), found through the words that propose cells: a cell holding only words commoner
    than PROPOSING_DF is not among them. Two statements, whatever the namespace's size: the
    words' capped frequencies, then the candidates."""
    if limit <= 0 or not words:
        return []
    with connection.cursor() as cur:
        cur.execute(f"SELECT {_HELD_SQL}", {"df_cap": PROPOSING_DF + 1,
                                            "terms": _stored(namespace_id, words)})
        (counts,) = cur.fetchone()
        proposing = proposing_words(dict(zip(words, (int(c) for c in counts), strict=True)))
        if not proposing:
            return []
        cur.execute(_SHARING_SQL, {"proposing": _stored(namespace_id, proposing),
                                   "df_cap": PROPOSING_DF, "limit": limit,
                                   "terms": _stored(namespace_id, words)})
        return [row[0] for row in cur.fetchall()]


# The candidates: every cell holding a word that proposes (rarest words first, each proposing
# up to PROPOSING_DF cells) and the cells the cosine proposed; each with the summed weight of
# the query words it holds and its cosine distance (null without an embedding).
_SCORES_SQL = f"""
WITH w AS (SELECT * FROM unnest(%(terms)s::text[], %(weights)s::float8[]) AS w(term, weight)),
proposed AS ({_proposed_sql("c.id")} UNION SELECT unnest(%(ids)s::bigint[]))
SELECT c.id, (SELECT coalesce(sum(w.weight), 0) FROM w WHERE c.terms @> ARRAY[w.term]),
       c.embedding <=> %(q)s::vector
  FROM memory_cell c JOIN proposed ON proposed.id = c.id
 WHERE c.namespace_id = %(ns)s AND c.head_id IS NOT NULL
"""


def lexical_scores(*, namespace_id: int, weights: dict[str, float], proposing: Sequence[str],
                   semantic_ids: Sequence[int], vector: str) -> list[tuple[int, float, float | None]]:
    """``(cell id, matched weight, cosine distance or None)`` of every cell a ``proposing``
    word names and of every ``semantic_ids`` cell. ``weights`` are the query words' (their
    share of the whole is the lexical score: memory.domain.ranking.lexical_score); ``vector``
    is the query's embedding as a pgvector literal."""
    with connection.cursor() as cur:
        cur.execute(_SCORES_SQL, {"terms": _stored(namespace_id, list(weights)),
                                  "weights": list(weights.values()),
                                  "proposing": _stored(namespace_id, proposing),
                                  "df_cap": PROPOSING_DF,
                                  "ids": list(semantic_ids), "q": vector, "ns": namespace_id})
        return [(int(i), float(m), None if d is None else float(d)) for i, m, d in cur.fetchall()]
