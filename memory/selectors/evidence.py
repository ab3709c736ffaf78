"""The evidence read (SPEC §7): the observations that best match a query, ranked by fusing
their meaning (the cosine over their embeddings, pgvector) with their words (PostgreSQL full
text search over ``pmem_evidence_lex``, migration 0022), with both score parts returned.

Candidates come from both sides: the cosine's nearest observations, and the observations
holding the most query weight among those holding a query word held by at most
:data:`PROPOSING_DF` of the namespace's observations (each word one GIN lookup, inside its
namespace through the ``ns:<id>`` lexeme); as many from each side (on LoCoMo, fusing every
observation ranks exactly as fusing these). A commoner
word still counts towards the candidates' scores (it is checked on them) but proposes none:
its weight is small, and its posting list could be the whole namespace. An observation the
embedder has not reached yet (the embedding comes after the commit) is found by its words at
once and ranked by its lexical score alone (memory.domain.evidence_rank).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, transaction

from memory.domain.evidence_rank import Passage, rank_passages
from memory.domain.ranking import idf, lexical_score
from memory.llm.embedding import embed_texts
from memory.models import Evidence, Namespace
from memory.services.binding import vector_literal
from memory.services.embeddings import namespace_embedder_check

from .search import FRONTIER_EF_SEARCH, ReadResult, evidence_line

EVIDENCE_HEADER = "Retrieved observations (best match first):"
#: Observations a query word may be held by and still propose candidates of its own.
PROPOSING_DF = 1000
#: Observations counted for the idf's total: above it, the weights hardly move.
TOTAL_CAP = 20_000
#: Observations each side proposes, per observation asked for (at least :data:`MIN_POOL`).
POOL_PER_ITEM = 4
MIN_POOL = 40

#: The indexed lexemes of an observation ``e`` (migration 0022: folded, stemmed, stop words
#: out), and of a query.
INDEXED = "pmem_evidence_lex(e.namespace_id, e.text)"
_LEXEMES_SQL = "SELECT lexeme FROM unnest(pmem_evidence_lex(0, %s)) WHERE lexeme <> 'ns:0'"
#: Another text search configuration, for the benchmarks only: computed row by row, no index.
UNINDEXED = ("(to_tsvector('{config}'::regconfig, pmem_fold(e.text))"
             " || array_to_tsvector(ARRAY['ns:' || e.namespace_id::text]))")
_UNINDEXED_LEXEMES_SQL = ("SELECT lexeme FROM unnest(to_tsvector('{config}'::regconfig,"
                          " pmem_fold(%s)))")

# The namespace's size (capped) and, per word, the observations holding it (capped).
_FREQUENCIES_SQL = """
SELECT (SELECT count(*) FROM (SELECT 1 FROM memory_evidence
                               WHERE namespace_id = %(ns)s LIMIT %(total_cap)s) AS n),
       ARRAY(SELECT (SELECT count(*) FROM (
                        SELECT 1 FROM memory_evidence e
                         WHERE {lex} @@ t.q{scope}
                         LIMIT %(df_cap)s) AS held)
               FROM unnest(%(queries)s::tsquery[]) WITH ORDINALITY AS t(q, n) ORDER BY t.n)
"""

# Candidates from both sides, each with its cosine distance (null: not embedded yet) and the
# summed weight of the query words it holds. ``{as_of}`` narrows every scan to what was
# committed by T.
_SCORES_SQL = """
WITH w AS (SELECT * FROM unnest(%(queries)s::tsquery[], %(weights)s::float8[],
                                %(proposes)s::bool[]) AS w(q, weight, proposes)),
hits AS (SELECT h.id, w.weight FROM w CROSS JOIN LATERAL (
             SELECT e.id FROM memory_evidence e
              WHERE {lex} @@ w.q{scope}{as_of}
              LIMIT %(df_cap)s) AS h
          WHERE w.proposes),
sem AS (SELECT e.id FROM memory_evidence e
         WHERE e.namespace_id = %(ns)s AND e.embedding IS NOT NULL{as_of}
         ORDER BY e.embedding <=> %(v)s::vector LIMIT %(pool)s),
lex AS (SELECT id, sum(weight) AS matched FROM hits GROUP BY id
         ORDER BY matched DESC, id DESC LIMIT %(pool)s),
cand AS (SELECT id FROM lex UNION SELECT id FROM sem),
docs AS MATERIALIZED (
    SELECT e.id, e.seq, e.embedding <=> %(v)s::vector AS d,
           CASE WHEN %(recheck)s THEN {lex} END AS tsv
      FROM memory_evidence e JOIN cand ON cand.id = e.id)
SELECT docs.id, docs.seq, docs.d,
       coalesce(lex.matched, 0)
       + coalesce((SELECT sum(w.weight) FROM w WHERE NOT w.proposes AND docs.tsv @@ w.q), 0)
  FROM docs LEFT JOIN lex ON lex.id = docs.id
"""


def _search_settings() -> None:
    """As the raw read's: a wider HNSW candidate list, and iterative scans where pgvector has
    them (0.8+), so that the namespace's filter cannot starve the cosine's pool."""
    with connection.cursor() as cur:
        cur.execute(f"SET LOCAL hnsw.ef_search = {FRONTIER_EF_SEARCH}")
        try:
            with transaction.atomic():
                cur.execute("SET LOCAL hnsw.iterative_scan = 'relaxed_order'")
        except DatabaseError:
            pass  # older pgvector: a plain post-filtered scan


def _tsquery(namespace_id: int, lexeme: str) -> str:
    """A tsquery's text for one lexeme inside a namespace (quotes doubled, backslashes
    escaped: tsquery's own quoting)."""
    quoted = lexeme.replace("\\", "\\\\").replace("'", "''")
    return f"'ns:{namespace_id}' & '{quoted}'"


def evidence_candidates(*, namespace: Namespace, query: str, k: int,
                        as_of: datetime | None = None,
                        config: str = "") -> list[tuple[int, int, float | None, float]]:
    """``(observation id, seq, cosine or None, lexical score)`` of every candidate of the
    evidence read for ``query``: the cosine's nearest and those the query's words propose.
    ``config``: another text search configuration than the index's (benchmarks: no index,
    each observation's lexemes computed as it is read)."""
    # Not query_vector: it first embeds the namespace's pending cells, which this read never
    # ranks; its own unembedded observations rank by their words instead.
    namespace_embedder_check(namespace)
    vector = vector_literal(embed_texts([query])[0])
    if config and not config.isidentifier():
        raise ValueError(f"not a text search configuration: {config!r}")
    lex = UNINDEXED.format(config=config) if config else INDEXED
    # The tsquery's ns:<id> lexeme keeps an indexed lookup in the namespace; a row-by-row
    # one reads the namespace's rows only.
    scope = " AND e.namespace_id = %(ns)s" if config else ""
    with connection.cursor() as cur:
        cur.execute(_UNINDEXED_LEXEMES_SQL.format(config=config) if config else _LEXEMES_SQL,
                    [query])
        lexemes = [row[0] for row in cur.fetchall()]
        queries = [_tsquery(namespace.pk, lexeme) for lexeme in lexemes]
        df: list[int] = []
        total = 0
        if queries:
            cur.execute(_FREQUENCIES_SQL.format(lex=lex, scope=scope), {"ns": namespace.pk, "total_cap": TOTAL_CAP,
                                           "df_cap": PROPOSING_DF + 1, "queries": queries})
            total, counts = cur.fetchone()
            df = [int(c) for c in counts]
    held = [(q, n) for q, n in zip(queries, df, strict=True) if n > 0]
    weights = [idf(n, int(total)) for _, n in held]
    proposes = [n <= PROPOSING_DF for _, n in held]
    whole = {str(i): w for i, w in enumerate(weights)}
    params: dict[str, Any] = {
        "queries": [q for q, _ in held], "weights": weights, "proposes": proposes,
        "recheck": not all(proposes), "ns": namespace.pk, "v": vector,
        "df_cap": PROPOSING_DF, "pool": max(MIN_POOL, POOL_PER_ITEM * k), "t": as_of}
    sql = _SCORES_SQL.format(lex=lex, scope=scope, as_of=""
                             if as_of is None else " AND e.committed_at <= %(t)s")
    with transaction.atomic():
        _search_settings()
        with connection.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
    return [(int(i), int(seq), None if d is None else 1 - float(d),
             lexical_score(float(m), whole)) for i, seq, d, m in rows]


def evidence_read(*, namespace: Namespace, query: str, k: int = 10,
                  as_of: datetime | None = None) -> ReadResult:
    """Top-k observations by the fused score (SPEC §7), best first, each with ``score`` (the
    fused one), ``semantic_score`` (the cosine; null for one not embedded yet) and
    ``lexical_score`` (0 to 1). As of T: the observations committed by T."""
    rows = evidence_candidates(namespace=namespace, query=query, k=k, as_of=as_of)
    ranked = rank_passages((Passage(i, sem, lex) for i, _, sem, lex in rows), k,
                           order={i: seq for i, seq, _, _ in rows})
    found = Evidence.objects.only(
        "id", "seq", "text", "source", "observed_at", "received_at").in_bulk(
        [r.key for r in ranked])
    textless = [e.pk for e in found.values() if not e.text.strip()]
    if textless:  # a line is the text, else the facts: read those only where needed
        facts = dict(Evidence.objects.filter(pk__in=textless).values_list("id", "facts"))
        for pk in textless:
            found[pk].facts = facts.get(pk)
    items: list[dict[str, Any]] = []
    for r in ranked:
        e = found[r.key]
        items.append({"id": e.id, "seq": e.seq, "text": evidence_line(e),
                      "score": round(r.score, 4),
                      "semantic_score": None if r.semantic is None else round(r.semantic, 4),
                      "lexical_score": round(r.lexical, 4), "source": e.source,
                      "observed_at": e.observed_at, "received_at": e.received_at})
    context = "\n".join([EVIDENCE_HEADER, *(str(i["text"]) for i in items)])
    return ReadResult("evidence", context, items, len(context),
                      note=f"as of {as_of.isoformat()}" if as_of is not None else "")
